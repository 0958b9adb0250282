"""Pure tests of the smoke stage's parts: no engine needed."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from servelab.smoke.diagnose import CAUSES, diagnose
from servelab.smoke.model import digest_path
from servelab.smoke.stage import (
    Timeline,
    check_response,
    config_uid,
    json_subset,
    percentile,
    proc_euid,
)
from servelab.smoke.weights import _walk, classify
from servelab.spec import Request

LOGS = Path(__file__).resolve().parent.parent / "data" / "smoke" / "logs"
LOG_CASES = sorted(LOGS.glob("*/*.log"))


def _expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path} must start with '# expect: <cause>'"
    return first.removeprefix("# expect: ").strip()


@pytest.mark.parametrize("path", LOG_CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_diagnose_log_fixture(path: Path) -> None:
    want = _expected(path)
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("# ")]
    got = diagnose(lines, exit_code=1, mount_path="/models")
    if path.parent.name == "negative":
        assert want == "none"
        assert got is None, got
    else:
        assert want in CAUSES
        assert got is not None and got.cause == want, got
        assert got.evidence and got.evidence in "\n".join(lines)


def test_log_fixtures_cover_every_pattern_cause() -> None:
    covered = {_expected(p) for p in LOG_CASES}
    assert {c.id for c in CAUSES.values() if c.pattern is not None} <= covered


def test_diagnose_oom_and_signals() -> None:
    d = diagnose([], exit_code=137, oom_killed=True)
    assert d is not None and d.cause == "out-of-memory"
    d = diagnose(["nothing useful"], exit_code=139)
    assert d is not None and d.cause == "signal-11"
    assert diagnose(["nothing useful"], exit_code=1) is None


def test_permission_denied_only_when_non_root() -> None:
    line = "PermissionError: [Errno 13] Permission denied: '/var/cache/x'"
    assert diagnose([line], non_root=False) is None
    d = diagnose([line], non_root=True)
    assert d is not None and d.cause == "permission-denied"


def test_model_missing_under_a_custom_mount_path() -> None:
    line = "FileNotFoundError: [Errno 2] No such file or directory: '/weights/llama/config.json'"
    d = diagnose([line], mount_path="/weights")
    assert d is not None and d.cause == "model-missing"


@pytest.mark.parametrize(("expected", "actual", "ok"), [
    ({"a": 1}, {"a": 1, "b": 2}, True),
    ({"a": 1.0}, {"a": 1}, True),
    ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2], "c": 0}}, True),
    ({"a": [1]}, {"a": [1, 2]}, False),
    ({"a": True}, {"a": 1}, False),
    ({"a": 3.1}, {"a": 3.1001}, False),
    ({"a": 0.3}, {"a": 0.1 + 0.2}, True),
    ({"missing": None}, {}, False),
    ("x", "x", True),
])
def test_json_subset(expected: object, actual: object, ok: bool) -> None:
    assert json_subset(expected, actual) is ok


def test_check_response() -> None:
    req = Request(path="/p", expect_status=200, expect_json={"prediction": 3.1},
                  expect_regex=r"tiny-\w+")
    good = b'{"model": "tiny-linear", "prediction": 3.1}'
    assert check_response(req, 200, good) is None
    assert check_response(req, 503, good) == "HTTP 503, expected 200"
    assert check_response(req, 200, b"not json") == "the body is not JSON"
    assert "does not contain" in str(check_response(req, 200, b'{"prediction": 2}'))
    assert "does not match" in str(check_response(req, 200, b'{"prediction": 3.1}'))
    assert check_response(req, None, b"") == "no response"


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(x) for x in range(1, 101)], 95) == pytest.approx(95.05)


@pytest.mark.parametrize(("user", "uid"), [
    ("", 0), ("root", 0), ("0:0", 0), ("10001:10001", 10001), ("app", None), ("65534", 65534),
])
def test_config_uid(user: str, uid: int | None) -> None:
    assert config_uid(user) == uid


def test_proc_euid_reads_the_uid_line() -> None:
    assert proc_euid(os.getpid()) == os.geteuid()
    assert proc_euid(2**22 + 12345) is None


def test_timeline_orders_and_measures() -> None:
    t = Timeline()
    t.mark("created", 10.0)
    t.mark("started", 10.5)
    t.mark("first_health_2xx", 12.0, "note")
    t.mark("started", 99.0)  # the first mark wins
    d = t.to_dict()
    assert [e["name"] for e in d["events"]] == ["created", "started", "first_health_2xx"]
    assert d["durations"]["start_to_ready_s"] == 1.5
    assert d["events"][2]["t_s"] == 2.0 and d["events"][2]["note"] == "note"


def test_directory_digest_matches_sha256sum(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "w.bin").write_bytes(b"\x00\x01" * 1000)
    (tmp_path / "a.json").write_text('{"x": 1}')
    (tmp_path / "B.txt").write_text("upper case sorts first")
    sha, files = digest_path(tmp_path)
    assert [f.relpath for f in files] == ["B.txt", "a.json", "b/w.bin"]
    shell = (
        "cd \"$1\" && find . -type f -printf '%P\\n' | LC_ALL=C sort "
        "| xargs -d '\\n' sha256sum | sha256sum"
    )
    out = subprocess.run(["bash", "-c", shell, "-", str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout.split()[0]
    assert sha == out
    single, _ = digest_path(tmp_path / "a.json")
    assert single == subprocess.run(["sha256sum", str(tmp_path / "a.json")],
                                    capture_output=True, text=True, check=True).stdout.split()[0]


@pytest.mark.parametrize(("path", "size", "reason"), [
    ("/m/model.safetensors", 5 << 20, "weights format .safetensors"),
    ("/m/small.safetensors", 1000, None),
    ("/m/pytorch_model.bin", 20 << 20, "large .bin file"),
    ("/usr/lib/x.bin", 1 << 20, None),
    ("/opt/model.json", 91, "same name and size as a file of the mounted model"),
    ("/opt/model.json", 92, None),
])
def test_classify(path: str, size: int, reason: str | None) -> None:
    assert classify(path, size, {("model.json", 91)}) == reason


def _tar(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_walk_synthetic_image_archive() -> None:
    """A docker-save archive written by hand (synthetic): two layers, a whiteout, a config."""
    big = b"\0" * (2 << 20)
    layer0 = _tar([("opt/m/w.safetensors", big), ("opt/m/ok.txt", b"x")])
    layer1 = _tar([("opt/m/.wh.w.safetensors", b""), ("srv/model.json", b"{}" * 10)])
    config = json.dumps({
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "a" * 64, "sha256:" + "b" * 64]},
        "history": [{"created_by": "FROM x", "empty_layer": True},
                    {"created_by": "COPY m /opt/m"}, {"created_by": "RUN rm"}],
    }).encode()
    manifest = json.dumps([{"Config": "blobs/sha256/c", "Layers": ["blobs/sha256/l0",
                                                                   "blobs/sha256/l1"]}])
    outer = _tar([("blobs/sha256/l1", layer1), ("blobs/sha256/c", config),
                  ("blobs/sha256/l0", layer0), ("manifest.json", manifest.encode())])
    from servelab.smoke.weights import _assemble

    found = _assemble(_walk(io.BytesIO(outer), {("model.json", 20)}))
    by = {w.path: w for w in found}
    assert set(by) == {"/opt/m/w.safetensors", "/srv/model.json"}
    w = by["/opt/m/w.safetensors"]
    assert (w.layer_index, w.created_by, w.deleted_later) == (0, "COPY m /opt/m", True)
    assert w.layer_digest == "sha256:" + "a" * 64
    assert by["/srv/model.json"].layer_index == 1 and not by["/srv/model.json"].deleted_later


def test_every_cause_is_documented() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "smoke.md").read_text()
    missing = [c for c in CAUSES if f"| `{c}` |" not in text and f"| `{c}` (" not in text]
    assert missing == []


@pytest.mark.parametrize(("text", "rows"), [
    ("0, 1024\n1, 3\n", [{"index": 0, "memory_used_mib": 1024},
                          {"index": 1, "memory_used_mib": 3}]),
    ("0, [N/A]\n", [{"index": 0, "memory_used_mib": None}]),
    ("No devices were found\n", []),
    ("", []),
])
def test_parse_memory_used(text: str, rows: list[dict[str, int | None]]) -> None:
    from servelab.smoke.gpu import parse_memory_used

    assert parse_memory_used(text) == rows
