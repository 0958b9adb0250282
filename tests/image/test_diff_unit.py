"""The explainer on small real OCI images written here (no engine needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ocitest import E, archive, tar_bytes, write_layout
from servelab.errors import InputError
from servelab.image.diff import diff_images
from servelab.image.render import render_diff as render

BASE = [E("etc/"), E("etc/os-release", b"ID=debian\n")]


def _pair(tmp_path: Path, a: list[E], b: list[E], **kw: object) -> tuple[Path, Path]:
    pa, pb = tmp_path / "a", tmp_path / "b"
    write_layout(pa, [tar_bytes(BASE), tar_bytes(a)], **kw)  # type: ignore[arg-type]
    write_layout(pb, [tar_bytes(BASE), tar_bytes(b)], **kw)  # type: ignore[arg-type]
    return pa, pb


def _files(result: object) -> dict[str, list[str]]:
    return {c.subject: c.fields for c in result.changes if c.category == "file"}  # type: ignore[attr-defined]


def test_identical_images_stop_at_the_manifest(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("app.py", b"x")], [E("app.py", b"x")])
    r = diff_images(str(pa), str(pb))
    assert r.verdict == "identical"
    assert r.equivalent and r.changes == [] and r.layers == []


def test_content_change_names_the_file(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("build-date", b"1700000001\n")], [E("build-date", b"17000002\n")])
    r = diff_images(str(pa), str(pb))
    assert r.verdict == "differs"
    assert _files(r) == {"/build-date": ["content", "size"]}
    line = r.explanation()[0]
    assert "/build-date" in line and "content differs" in line
    # the base layer is equal: only layer 1 was opened
    assert [x.opened for x in r.layers] == [False, True]


@pytest.mark.parametrize("direction", ["inserted", "removed"])
def test_layers_are_aligned_by_content_not_position(tmp_path: Path, direction: str) -> None:
    """A layer inserted (or removed) in the middle: the layers after it still pair, nothing
    is opened, and the one layer is named added (removed)."""
    base, extra, app = (tar_bytes(BASE), tar_bytes([E("extra.txt", b"x")]),
                        tar_bytes([E("app.py", b"print(1)")]))
    short, long_ = tmp_path / "short", tmp_path / "long"
    write_layout(short, [base, app], history=["FROM base", "COPY app.py"])
    write_layout(long_, [base, extra, app], history=["FROM base", "COPY extra.txt", "COPY app.py"])
    a, b = (short, long_) if direction == "inserted" else (long_, short)
    r = diff_images(str(a), str(b))
    assert r.verdict == "differs"
    rows = [(x.a_index, x.b_index, x.status) for x in r.layers]
    if direction == "inserted":
        assert rows == [(0, 0, "same"), (None, 1, "added"), (1, 2, "same")]
    else:
        assert rows == [(0, 0, "same"), (1, None, "removed"), (2, 1, "same")]
    assert not any(x.opened for x in r.layers)  # no layer had to be read
    layer_changes = [c for c in r.changes if c.category == "layer"]
    assert [c.fields for c in layer_changes] == [["added" if direction == "inserted"
                                                  else "removed"]]
    assert "COPY extra.txt" in (layer_changes[0].note or "")
    assert _files(r) == {}


def _pyc(tmp_path: Path, source: bytes, mtime: int, mode: object = None) -> bytes:
    """Real bytecode of *source* as py_compile writes it when the source has *mtime*."""
    import py_compile

    src, out = tmp_path / "m.py", tmp_path / f"m{mtime}.pyc"  # one source path, as a rebuild
    src.write_bytes(source)
    os.utime(src, (mtime, mtime))
    py_compile.compile(str(src), str(out), doraise=True,
                       invalidation_mode=mode)  # type: ignore[arg-type]
    return out.read_bytes()


def test_timestamp_bytecode_is_named_as_the_cause_with_its_fix(tmp_path: Path) -> None:
    import py_compile

    code = b"def f():\n    return 1\n"
    stamp = py_compile.PycInvalidationMode.TIMESTAMP
    mods = [f"usr/lib/python3/m{i}/__pycache__/x.cpython-311.pyc" for i in range(12)]
    pa, pb = _pair(tmp_path, [E(m, _pyc(tmp_path, code, 1_700_000_000, stamp)) for m in mods],
                   [E(m, _pyc(tmp_path, code, 1_700_000_090, stamp)) for m in mods])
    r = diff_images(str(pa), str(pb))
    assert r.verdict == "differs"
    lines = r.explanation()
    assert lines[0].startswith("12 of the 12 files that differ are Python bytecode (.pyc)")
    assert "ARG SOURCE_DATE_EPOCH" in lines[0] and "--no-compile" in lines[0]
    assert lines[-1] == "... and 2 more"  # the files are still listed after the cause
    # the fix holds: hash-based bytecode of the same source is the same bytes at any mtime
    hashed = py_compile.PycInvalidationMode.CHECKED_HASH
    assert (_pyc(tmp_path, code, 1_700_000_000, hashed)
            == _pyc(tmp_path, code, 1_700_000_090, hashed))


def test_bytecode_is_not_named_when_it_is_not_most_of_the_difference(tmp_path: Path) -> None:
    import py_compile

    code, stamp = b"x = 1\n", py_compile.PycInvalidationMode.TIMESTAMP
    a = [E("app/__pycache__/a.cpython-311.pyc", _pyc(tmp_path, code, 1_700_000_000, stamp)),
         E("app/build-id", b"1"), E("app/version", b"1")]
    b = [E("app/__pycache__/a.cpython-311.pyc", _pyc(tmp_path, code, 1_700_000_050, stamp)),
         E("app/build-id", b"2"), E("app/version", b"2")]
    pa, pb = _pair(tmp_path, a, b)
    lines = diff_images(str(pa), str(pb)).explanation()
    assert len(lines) == 3 and not any("bytecode" in x for x in lines)


def test_mtime_only_is_timestamps_only(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("hello", b"hi", mtime=1_800_000_000)],
                   [E("hello", b"hi", mtime=1_800_000_007)])
    r = diff_images(str(pa), str(pb))
    assert r.verdict == "timestamps-only"
    assert not r.equivalent
    assert "mtime 2027-01-15T08:00:00+00:00 -> 2027-01-15T08:00:07+00:00" in r.explanation()[0]
    hidden = diff_images(str(pa), str(pb), ignore_timestamps=True)
    assert hidden.equivalent
    assert hidden.explanation() == []


def test_config_created_is_a_timestamp_and_env_is_content(tmp_path: Path) -> None:
    pa, pb = tmp_path / "a", tmp_path / "b"
    layer = tar_bytes([E("x", b"1")])
    write_layout(pa, [layer], created="2023-01-01T00:00:00Z")
    write_layout(pb, [layer], created="2024-01-01T00:00:00Z")
    r = diff_images(str(pa), str(pb))
    assert r.verdict == "timestamps-only"
    assert {c.subject for c in r.changes if c.kind == "timestamp"} == {
        "config.created", "history[0].created"}
    pc = tmp_path / "c"
    write_layout(pc, [layer], created="2023-01-01T00:00:00Z",
                 config={"config": {"Env": ["PATH=/usr/bin", "DEBUG=1"], "User": "0"}})
    r2 = diff_images(str(pa), str(pc))
    assert r2.verdict == "differs"
    assert {c.subject for c in r2.changes if c.kind == "content"} == {"config.Env", "config.User"}


@pytest.mark.parametrize(("a", "b", "fields"), [
    (E("f", b"x", mode=0o644), E("f", b"x", mode=0o755), ["mode"]),
    (E("f", b"x", uid=0, gid=0), E("f", b"x", uid=10001, gid=10001), ["uid", "gid"]),
    (E("l", kind=tarfile.SYMTYPE, linkname="/a"), E("l", kind=tarfile.SYMTYPE, linkname="/b"),
     ["link-target"]),
    (E("f", b"x", pax={"SCHILY.xattr.security.capability": "a"}),
     E("f", b"x", pax={"SCHILY.xattr.security.capability": "b"}), ["xattrs"]),
    (E("f", b"x", pax={"comment": "one"}), E("f", b"x", pax={"comment": "two"}),
     ["pax-headers"]),
    (E("d/", kind=tarfile.DIRTYPE), E("d", b"", kind=tarfile.REGTYPE), ["type", "content"]),
])
def test_entry_fields(tmp_path: Path, a: E, b: E, fields: list[str]) -> None:
    pa, pb = _pair(tmp_path, [a], [b])
    r = diff_images(str(pa), str(pb))
    (only,) = _files(r).items()
    assert only[1] == fields
    assert r.verdict == "differs"


def test_added_and_removed_files(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("old", b"1"), E("same", b"s")], [E("same", b"s"), E("new", b"2")])
    r = diff_images(str(pa), str(pb))
    assert _files(r) == {"/new": ["added"], "/old": ["removed"]}


def test_order_only_is_encoding(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("a", b"1"), E("b", b"2")], [E("b", b"2"), E("a", b"1")])
    r = diff_images(str(pa), str(pb))
    assert r.verdict == "encoding-only"
    assert any("different order" in c.note for c in r.changes)


def test_other_compression_is_not_opened(tmp_path: Path) -> None:
    layer = tar_bytes([E("big", b"y" * 100_000)])
    pa, pb = tmp_path / "a", tmp_path / "b"
    write_layout(pa, [(layer, "gzip")])
    write_layout(pb, [(layer, "zstd")])
    r = diff_images(str(pa), str(pb))
    assert r.verdict == "encoding-only"
    assert r.layers[0].status == "encoding" and not r.layers[0].opened
    assert r.layers[0].verified  # both read through: digests, sizes and the diff_id hold


def test_zstd_and_plain_layers_are_streamed(tmp_path: Path) -> None:
    pa, pb = tmp_path / "a", tmp_path / "b"
    write_layout(pa, [(tar_bytes([E("f", b"zstd one")]), "zstd")])
    write_layout(pb, [(tar_bytes([E("f", b"plain two")]), "none")])
    r = diff_images(str(pa), str(pb))
    assert _files(r) == {"/f": ["content", "size"]}


def test_archives_and_layout_dirs_read_alike(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("f", b"1")], [E("f", b"2")])
    ta = archive(pa, tmp_path / "a.tar")
    r1 = diff_images(str(ta), str(pb))
    r2 = diff_images(f"oci-archive:{ta}", f"oci:{pb}")
    assert _files(r1) == _files(r2) == {"/f": ["content"]}


def test_hostile_entry_names_never_become_files(tmp_path: Path) -> None:
    evil = [E("../../escaped", b"1"), E("/abs/path", b"2"), E("a/../../b", b"3")]
    pa, pb = _pair(tmp_path, evil, [E(e.name, b"other") for e in evil])
    before = set(tmp_path.rglob("*")) | set(tmp_path.parent.iterdir())
    cwd_before = set(Path.cwd().iterdir())
    r = diff_images(str(pa), str(pb))
    assert len(_files(r)) == 3
    assert set(tmp_path.rglob("*")) | set(tmp_path.parent.iterdir()) == before
    assert set(Path.cwd().iterdir()) == cwd_before


def test_max_entries_caps_the_listing(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E(f"f{i}", b"a") for i in range(30)],
                   [E(f"f{i}", b"b") for i in range(30)])
    r = diff_images(str(pa), str(pb), max_entries=10)
    assert len(_files(r)) == 10 and r.omitted == 20
    assert "20 more file changes" in render(r, "text")


def test_renderings(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("build-date", b"1")], [E("build-date", b"2")])
    r = diff_images(str(pa), str(pb))
    doc = json.loads(render(r, "json"))
    assert doc["verdict"] == "differs" and doc["equivalent"] is False
    assert doc["changes"][0]["subject"] == "/build-date"
    assert doc["changes"][0]["a"]["content"].startswith("sha256:")
    md = render(r, "markdown")
    assert "| content | `/build-date` |" in md
    assert "verdict: differs" in render(r, "text")


def test_bad_inputs_are_input_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no index\.json"):
        diff_images(str(tmp_path / "empty"), str(tmp_path / "empty"))
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(InputError, match=r"not a readable tar|index\.json is missing"):
        diff_images(str(junk), str(junk))
    with pytest.raises(InputError, match="no such file"):
        diff_images("./missing.tar", "./missing.tar")


def test_corrupt_gzip_layer_is_an_input_error(tmp_path: Path) -> None:
    pa, pb = _pair(tmp_path, [E("f", b"1" * 5000)], [E("f", b"2" * 5000)])
    man = json.loads((pb / "index.json").read_text())["manifests"][0]["digest"]
    m = json.loads((pb / "blobs" / "sha256" / man.split(":")[1]).read_bytes())
    blob = pb / "blobs" / "sha256" / m["layers"][1]["digest"].split(":")[1]
    data = blob.read_bytes()
    blob.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=rf"blob {m['layers'][1]['digest']} is truncated: "
                       rf"{len(data) // 2} of its declared {len(data)} bytes"):
        diff_images(str(pa), str(pb))


def test_peak_memory_stays_small_on_big_layers(tmp_path: Path) -> None:
    """Two 100 MB layers that differ in one file: the diff streams them (RSS << 200 MB)."""
    chunk = os.urandom(4096) * 256  # 1 MiB, cheap to compress: the test is about memory
    files_a = [E(f"w/{i}.bin", chunk[i:] + chunk[:i]) for i in range(100)]
    files_b = [*files_a[:-1], E("w/99.bin", b"changed")]
    pa, pb = tmp_path / "a", tmp_path / "b"
    write_layout(pa, [(tar_bytes(files_a), "gzip")], level=1)
    write_layout(pb, [(tar_bytes(files_b), "gzip")], level=1)
    # VmHWM: the peak RSS of this process image (ru_maxrss would include the parent's at fork)
    code = ("import re, sys\nfrom servelab.cli import main\nrc = main(sys.argv[1:])\n"
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
            "sys.stderr.write(f'MAXRSS={hwm}')\nsys.exit(rc)\n")
    res = subprocess.run([sys.executable, "-c", code, "diff", str(pa), str(pb), "-f", "json"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 1, res.stderr
    assert json.loads(res.stdout)["explanation"][0].startswith("/w/99.bin")
    peak_kb = int(res.stderr.rsplit("MAXRSS=", 1)[1])
    assert peak_kb < 200 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
