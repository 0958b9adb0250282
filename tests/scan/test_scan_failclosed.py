"""Fail closed: every way the scan cannot be trusted is exit 3 with a reason, never a pass."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import scanfixtures
from scanfixtures import Image, run_cli, scan_cli_argv

import trivydb
from servelab.errors import CapabilityError
from servelab.scan import stage as scan
from servelab.spec import ScanPolicy


def _no_db(cache: Path) -> None:
    for f in (cache / "db").iterdir():
        f.unlink()


def _garbage_db(cache: Path) -> None:
    (cache / "db" / "trivy.db").write_bytes(bytes(range(256)) * 64)


def _bad_checksum(cache: Path) -> None:
    path = cache / "db" / "trivy.db"
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 16 + 56, 12345)
    path.write_bytes(bytes(data))


def _stale_db(cache: Path) -> None:
    trivydb.write_metadata(cache, updated_at=datetime.now(UTC) - timedelta(days=30))


def _no_metadata(cache: Path) -> None:
    (cache / "db" / "metadata.json").unlink()


def _bad_metadata(cache: Path) -> None:
    (cache / "db" / "metadata.json").write_text("{not json")


def _old_schema(cache: Path) -> None:
    trivydb.write_metadata(cache, version=1)


BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing": (_no_db, "no Trivy vulnerability DB"),
    "corrupt": (_garbage_db, "corrupt"),
    "bad-checksum": (_bad_checksum, "checksum"),
    "stale": (_stale_db, "older than"),
    "no-metadata": (_no_metadata, "no metadata"),
    "bad-metadata": (_bad_metadata, "unreadable"),
    "old-schema": (_old_schema, "schema version 1"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_db_exits_3(case: str, own_cache: Path, tmp_path: Path) -> None:
    damage, reason = BROKEN[case]
    damage(own_cache)
    layout = scanfixtures.minimal_layout(tmp_path / "img")
    done = run_cli(str(layout), "--offline", "--cache-dir", str(own_cache), "--max-db-age", "168")
    assert done.returncode == 3, done.stderr
    assert reason in done.stderr
    assert "fix:" in done.stderr
    assert "Traceback" not in done.stderr


def test_broken_db_raises_in_the_api(own_cache: Path, tmp_path: Path) -> None:
    _stale_db(own_cache)
    s = scan.Scanner(ScanPolicy(max_db_age_hours=24), cache_dir=own_cache, offline=True)
    with pytest.raises(CapabilityError, match="older than the 24 hours allowed"):
        s.scan(scanfixtures.minimal_layout(tmp_path / "img"), out_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "scan.json").exists()


FAKES = {
    "exit-1": ("echo 'FATAL something broke' >&2; exit 1", "failed (exit code 1)"),
    "not-json": (
        'out=""; while [ $# -gt 0 ]; do [ "$1" = --output ] && out=$2; shift; done; '
        'echo "this is not json" > "$out"', "not JSON"),
    "wrong-schema": (
        'out=""; while [ $# -gt 0 ]; do [ "$1" = --output ] && out=$2; shift; done; '
        'echo \'{"SchemaVersion": 1}\' > "$out"', "schema version 2"),
    "no-output": ("exit 0", "wrote no report"),
}


@pytest.mark.parametrize("case", sorted(FAKES))
def test_failing_trivy_exits_3(case: str, own_cache: Path, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    body, reason = FAKES[case]
    fake = scanfixtures.fake_trivy(tmp_path / "trivy", body)
    monkeypatch.setenv("SERVELAB_TRIVY", str(fake))
    layout = scanfixtures.minimal_layout(tmp_path / "img")
    done = run_cli(str(layout), "--offline", "--cache-dir", str(own_cache))
    assert done.returncode == 3, done.stderr
    assert reason in done.stderr
    assert "CVE" not in done.stdout and "gate passed" not in done.stdout


def test_trivy_past_its_timeout_is_killed(own_cache: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fake = scanfixtures.fake_trivy(tmp_path / "trivy", "sleep 60")
    monkeypatch.setenv("SERVELAB_TRIVY", str(fake))
    layout = scanfixtures.minimal_layout(tmp_path / "img")
    start = time.monotonic()
    done = run_cli(str(layout), "--offline", "--cache-dir", str(own_cache), "--timeout", "1")
    assert done.returncode == 3, done.stderr
    assert "timed out" in done.stderr
    assert time.monotonic() - start < 30


@pytest.mark.docker
@pytest.mark.trivy
def test_real_trivy_on_a_damaged_db_exits_3(images: dict[str, Image], own_cache: Path,
                                            trivy_bin: str) -> None:
    """Meta pages intact (servelab's check passes) but the data pages cut off: Trivy fails."""
    path = own_cache / "db" / "trivy.db"
    page = struct.unpack_from("<I", path.read_bytes(), 16 + 8)[0]
    with path.open("r+b") as fh:
        fh.truncate(3 * page)
    done = run_cli(str(images["control"].layout), "--offline", "--cache-dir", str(own_cache))
    assert done.returncode == 3, done.stderr
    assert "Trivy scan of" in done.stderr
    assert "CVE-2099" not in done.stdout


def test_offline_never_downloads(own_cache: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline with no DB: exit 3 before any Trivy call (the fake would record one)."""
    _no_db(own_cache)
    log = tmp_path / "calls"
    fake = scanfixtures.fake_trivy(tmp_path / "trivy", f'echo "$@" >> {log}; exit 0')
    monkeypatch.setenv("SERVELAB_TRIVY", str(fake))
    done = run_cli(str(scanfixtures.minimal_layout(tmp_path / "img")), "--offline",
                   "--cache-dir", str(own_cache))
    assert done.returncode == 3
    assert not log.exists()


def test_online_download_failure_lists_every_mirror(
    own_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_db(own_cache)
    log = tmp_path / "calls"
    fake = scanfixtures.fake_trivy(
        tmp_path / "trivy", f'echo "$@" >> {log}; echo "FATAL TOOMANYREQUESTS" >&2; exit 1')
    monkeypatch.setenv("SERVELAB_TRIVY", str(fake))
    done = run_cli(str(scanfixtures.minimal_layout(tmp_path / "img")),
                   "--cache-dir", str(own_cache),
                   "--db-repository", "mirror-a.invalid/db:2",
                   "--db-repository", "mirror-b.invalid/db:2")
    assert done.returncode == 3
    calls = log.read_text().splitlines()
    assert len(calls) == 2
    assert "mirror-a.invalid/db:2" in calls[0] and "mirror-b.invalid/db:2" in calls[1]
    for call in calls:
        assert "--disable-telemetry" in call and "--skip-version-check" in call
    assert "mirror-a.invalid" in done.stderr and "TOOMANYREQUESTS" in done.stderr


def test_json_output_of_fake_is_not_a_pass(own_cache: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A report with zero results but a failing exit is still a failure."""
    body = ('out=""; while [ $# -gt 0 ]; do [ "$1" = --output ] && out=$2; shift; done; '
            + "echo '" + json.dumps({"SchemaVersion": 2, "ArtifactName": "x"})
            + "' > \"$out\"; exit 2")
    monkeypatch.setenv("SERVELAB_TRIVY", str(scanfixtures.fake_trivy(tmp_path / "t", body)))
    done = run_cli(str(scanfixtures.minimal_layout(tmp_path / "img")), "--offline",
                   "--cache-dir", str(own_cache))
    assert done.returncode == 3


@pytest.mark.docker
def test_ctrl_c_removes_the_unpacked_archive(images: dict[str, Image], own_cache: Path,
                                            tmp_path: Path) -> None:
    """SIGINT while Trivy runs: Trivy is killed and the temp OCI layout is removed."""
    marker = tmp_path / "started"
    fake = scanfixtures.fake_trivy(tmp_path / "trivy", f"touch {marker}; exec sleep 60")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "SERVELAB_TRIVY": str(fake), "TMPDIR": str(tmp)}
    child = subprocess.Popen(
        [*scan_cli_argv(), str(images["control"].archive), "--offline",
         "--cache-dir", str(own_cache)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the fake Trivy never started"
    assert any(p.name.startswith("servelab-scan-oci-") for p in tmp.iterdir())
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert child.returncode != 0
    assert list(tmp.iterdir()) == [], err
    assert "CVE-2099" not in err
