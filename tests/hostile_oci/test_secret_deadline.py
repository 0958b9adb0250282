"""The secret scan has a deadline of its own (issue 24): a layer of many small text files
took Trivy's secret scanner 24 s (its vulnerability scan 1 s) and had no bound. The secret
scan is now a Trivy run of its own under SERVELAB_SECRET_TIMEOUT; stopped there, scan.json
and scan.md say so ("secret scan stopped at its deadline"), never "no secrets found".
Real Trivy, a fixture DB written at test time, images written with tarfile (no Docker).

Test id named in docs/limits.md: secret_deadline."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import trivydb
from ocitest import write_layout

pytestmark = pytest.mark.trivy

#: a GitHub token's shape (Trivy's github-pat rule), made up for the test
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _layer(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode = len(data), 1_700_000_000, 0o644
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _many_files(n: int) -> dict[str, bytes]:
    """*n* small config-like files whose words make the secret scanner read each one."""
    files = {"etc/os-release": b"ID=debian\nVERSION_ID=12\n"}
    for i in range(n):
        files[f"srv/conf/d{i // 1000}/c{i}.ini"] = (
            b"api_key = secret token password aws_access_key_id %d\n" % i) * 8
    return files


def _scan(target: Path, tmp: Path, env: dict[str, str]) -> tuple[int, dict, str, str]:
    cache = tmp / "cache"
    trivydb.write_db(cache)
    out = tmp / "out"
    res = subprocess.run([sys.executable, "-m", "servelab", "scan", str(target), "--offline",
                          "--cache-dir", str(cache), "--out-dir", str(out)],
                         capture_output=True, text=True, env={**os.environ, **env},
                         timeout=300, check=False)
    found = sorted(out.rglob("scan.json"))
    doc = json.loads(found[0].read_text()) if found else {}
    md = found[0].with_name("scan.md").read_text() if found else ""
    return res.returncode, doc, md, res.stdout + res.stderr


def test_secret_deadline_stops_and_says_so(tmp_path: Path, trivy_bin: str) -> None:
    write_layout(tmp_path / "img", [_layer(_many_files(60_000))])
    code, doc, md, out = _scan(tmp_path / "img", tmp_path, {"SERVELAB_SECRET_TIMEOUT": "1"})
    assert code in (0, 1), out
    assert doc["secret_scan"]["complete"] is False and doc["secret_scan"]["deadline_s"] == 1
    assert "secret scan stopped at its deadline" in md
    assert any("secret scan stopped at its deadline" in n for n in doc["notes"])
    assert "secret scan stopped at its deadline" in out  # the text report


def test_secret_deadline_a_complete_scan_still_finds_secrets(tmp_path: Path,
                                                              trivy_bin: str) -> None:
    files = {"etc/os-release": b"ID=debian\nVERSION_ID=12\n",
             "app/settings.py": b'GITHUB_TOKEN = "' + TOKEN.encode() + b'"\n'}
    write_layout(tmp_path / "img", [_layer(files)])
    code, doc, _md, out = _scan(tmp_path / "img", tmp_path, {})
    assert doc["secret_scan"]["complete"] is True, out
    secrets = [f for f in doc["findings"] if f["kind"] == "secret"]
    assert [f["path"] for f in secrets] == ["/app/settings.py"] or \
        [f["path"] for f in secrets] == ["app/settings.py"], json.dumps(doc["findings"])[:2000]
    assert code == 1, out  # a GitHub token is CRITICAL: the gate fails


def test_secret_deadline_bad_value_is_exit_2(tmp_path: Path, trivy_bin: str) -> None:
    write_layout(tmp_path / "img", [_layer({"etc/os-release": b"ID=debian\n"})])
    code, _doc, _md, out = _scan(tmp_path / "img", tmp_path, {"SERVELAB_SECRET_TIMEOUT": "-1"})
    assert code == 2 and "SERVELAB_SECRET_TIMEOUT" in out, out
