"""``servelab diff`` against hostile OCI inputs made here: every case exits 0, 1 or 2 (never an
internal error), within 10 s, leaving nothing behind; the bad ones exit 2 naming what is wrong.

The issue (13) they come from: blobs that do not match their digest or declared size gave
"encoding-only" or file differences; decompression bombs ran for 30-40 s; wrong-typed JSON
and corrupt tar/zstd data were internal errors; a missing .tar asked the engine and a registry;
a pipe hung the diff; Ctrl-C was ignored while the workers ran."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hostile_images import (
    RUN,
    Image,
    Layer,
    base_files,
    blob_path,
    bomb,
    check_sane,
    compress,
    run_diff,
    sha,
    tar_of,
)

APP_A = {"app/config.json": b'{"threads": 4}\n'}
APP_B = {"app/config.json": b'{"threads": 8}\n'}


def _pair(tmp_path: Path, b_layer: Layer | None = None) -> tuple[Path, Path, dict[str, Any]]:
    """A good image A, and B with *b_layer* on top of the same base (default: a changed app)."""
    a, b = tmp_path / "a", tmp_path / "b"
    Image([Layer.of(base_files()), Layer.of(APP_A)]).write(a)
    written = Image([Layer.of(base_files()), b_layer or Layer.of(APP_B)]).write(b)
    return a, b, written


def _expect_2(tmp_path: Path, *args: str, match: str, env: dict[str, str] | None = None,
              max_s: float = 10.0) -> str:
    out = run_diff(*args, tmp=tmp_path / "tmp", env=env)
    check_sane(out, max_s=max_s)
    assert out.rc == 2, out.summary()
    assert match in out.stderr, out.summary()
    return out.stderr


# ---------------------------------------------------------------------------- false passes


@pytest.mark.parametrize(("how", "match"), [
    ("flip", "does not match its digest"),
    ("truncate", "is truncated"),
    ("append", "longer than its declared size"),
])
def test_a_layer_that_is_not_its_digest_is_exit_2(tmp_path: Path, how: str, match: str) -> None:
    a, b, written = _pair(tmp_path)
    path = blob_path(b, written["layers"][1])
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x01
    elif how == "truncate":
        del data[len(data) // 2:]
    else:
        data += b"\0" * 100
    path.write_bytes(bytes(data))
    err = _expect_2(tmp_path, str(a), str(b), match=match)
    assert written["layers"][1] in err  # names the blob


@pytest.mark.parametrize(("declared", "match"), [(-1, "longer than"), (+7, "truncated")])
def test_declared_sizes_are_checked(tmp_path: Path, declared: int, match: str) -> None:
    good = Layer.of(APP_B)
    good.size = len(good.blob) + declared
    a, b, _ = _pair(tmp_path, good)
    err = _expect_2(tmp_path, str(a), str(b), match=match)
    assert f"declared size ({good.size} bytes)" in err or f"declared {good.size}" in err


@pytest.mark.parametrize("which", ["manifest", "config"])
def test_modified_json_blobs_are_exit_2(tmp_path: Path, which: str) -> None:
    a, b, written = _pair(tmp_path)
    path = blob_path(b, written[which])
    path.write_bytes(path.read_bytes().replace(b'"', b"'", 1).replace(b"'", b'"', 1) + b" ")
    err = _expect_2(tmp_path, str(a), str(b), match=written[which])
    assert "longer than its declared size" in err or "does not match its digest" in err


def test_recompressed_layer_with_other_content_is_not_encoding_only(tmp_path: Path) -> None:
    """B's top layer is zstd and its config claims A's diff_id, but the tar differs: before,
    "--ignore-timestamps" said encoding-only (exit 0) without reading it."""
    a = tmp_path / "a"
    top_a = Layer.of(APP_A)
    Image([Layer.of(base_files()), top_a]).write(a)
    lie = Layer.of(APP_B, "zstd")
    lie.diff_id = top_a.claimed_diff_id()
    Image([Layer.of(base_files()), lie]).write(tmp_path / "b")
    err = _expect_2(tmp_path, "--ignore-timestamps", str(a), str(tmp_path / "b"),
                    match="does not match its diff_id")
    assert top_a.claimed_diff_id() in err


@pytest.mark.parametrize("liar", ["b", "both"])
def test_one_blob_with_two_claimed_diff_ids_is_opened(tmp_path: Path, liar: str) -> None:
    """hostile-same-diffid: A and B share the top layer's blob, but B's config (or both,
    differently) claims another diff_id for it, and the created times differ. Before, with
    --ignore-timestamps, the layer was never opened and the verdict was timestamps-only
    (exit 0): a config that does not describe its layers passed as "the same image"."""
    top = Layer.of(APP_A)
    a, b = tmp_path / "a", tmp_path / "b"
    claim_a = top.claimed_diff_id() if liar == "b" else sha(b"claim a")
    Image([Layer.of(base_files()), Layer(top.blob, raw=top.raw, diff_id=claim_a)]).write(a)
    Image([Layer.of(base_files()), Layer(top.blob, raw=top.raw, diff_id=sha(b"claim b"))],
          created="2024-01-01T00:00:00Z").write(b)
    err = _expect_2(tmp_path, "--ignore-timestamps", str(a), str(b),
                    match="does not match its diff_id")
    assert (sha(b"claim b") if liar == "b" else claim_a) in err


def test_an_honest_recompression_is_verified_and_encoding_only(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    Image([Layer.of(base_files()), Layer.of(APP_A)]).write(a)
    Image([Layer.of(base_files()), Layer.of(APP_A, "zstd")]).write(b)
    out = run_diff("--ignore-timestamps", str(a), str(b), "-f", "json", tmp=tmp_path / "tmp")
    check_sane(out)
    assert out.rc == 0, out.summary()
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "encoding-only"
    top = doc["layers"][1]
    assert top["status"] == "encoding" and top["verified"] is True and top["opened"] is False


# ---------------------------------------------------------------------------- corrupt data


def _raw_layer(blob: bytes, how: str, raw: bytes | None = None) -> Layer:
    """A layer whose blob is *blob* (its digest and size true); the config's diff_id is the
    true one of *raw* when given, else a wrong one."""
    return Layer(blob, how, raw=raw, diff_id=None if raw is not None else sha(b"unknown"))


JUNK = os.urandom(4096)


@pytest.mark.parametrize(("layer", "match"), [
    (_raw_layer(compress(JUNK, "gzip"), "gzip", JUNK), "not a readable tar"),
    (_raw_layer(compress(JUNK, "gzip"), "gzip"), "not a readable tar"),
    (_raw_layer(b"\x1f\x8b\x08\x00" + os.urandom(2000), "gzip"), "compressed data is corrupt"),
    (_raw_layer(b"\x28\xb5\x2f\xfd" + os.urandom(2000), "zstd"), "compressed data is corrupt"),
    (_raw_layer(compress(tar_of(APP_B), "gzip")[:-12], "gzip"), "compressed data is corrupt"),
    (_raw_layer(b"", "none", b""), "not a readable tar"),
], ids=["random-tar", "wrong-diff-id", "corrupt-gzip", "corrupt-zstd", "gzip-cut-short",
        "empty"])
def test_corrupt_layer_data_is_exit_2(tmp_path: Path, layer: Layer, match: str) -> None:
    a, b, written = _pair(tmp_path, layer)
    err = _expect_2(tmp_path, str(a), str(b), match=match)
    assert written["layers"][1] in err


def _with_config(tmp_path: Path, extra: dict[str, Any]) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    Image([Layer.of(base_files())]).write(a)
    Image([Layer.of(base_files())], config_extra=extra).write(b)
    return a, b


@pytest.mark.parametrize(("extra", "match"), [
    ({"history": "RUN x"}, "history must be a list of objects"),
    ({"history": [{"created_by": 42}]}, "history[0]: created_by must be a string"),
    ({"rootfs": {"diff_ids": [1]}}, "rootfs.diff_ids must be a list of digests"),
    ({"rootfs": []}, "rootfs must be an object"),
    ({"config": ["Env"]}, "config must be an object"),
    ({"os": {"name": "linux"}}, "os must be a string"),
])
def test_wrong_typed_config_fields_are_exit_2(tmp_path: Path, extra: dict[str, Any],
                                              match: str) -> None:
    a, b = _with_config(tmp_path, extra)
    _expect_2(tmp_path, str(a), str(b), match=match)


def _index(tmp_path: Path, entry: dict[str, Any] | None = None, **top: Any) -> Path:
    root = tmp_path / "b"
    Image([Layer.of(base_files())]).write(root)
    index = json.loads((root / "index.json").read_text())
    index["manifests"][0].update(entry or {})
    index.update(top)
    (root / "index.json").write_text(json.dumps(index))
    return root


@pytest.mark.parametrize(("entry", "top", "match"), [
    ({"size": "380"}, {}, "size must be a non-negative integer"),
    ({"size": True}, {}, "size must be a non-negative integer"),
    ({"digest": 5}, {}, "a descriptor without a digest"),
    ({"digest": "sha256:../../etc/passwd"}, {}, "malformed digest"),
    ({"annotations": {"a": 1}}, {}, "annotations must be an object of strings"),
    ({"platform": "linux"}, {}, "platform must be an object"),
    ({"mediaType": ["x"]}, {}, "mediaType must be a string"),
    ({}, {"manifests": {}}, "no manifests list"),
    ({}, {"mediaType": 7}, "mediaType must be a string"),
], ids=["size-str", "size-bool", "digest-int", "digest-path", "annotations", "platform",
        "media-type", "manifests-dict", "top-media-type"])
def test_wrong_typed_index_fields_are_exit_2(tmp_path: Path, entry: dict[str, Any],
                                             top: dict[str, Any], match: str) -> None:
    a = tmp_path / "a"
    Image([Layer.of(base_files())]).write(a)
    _expect_2(tmp_path, str(a), str(_index(tmp_path, entry, **top)), match=match)


def test_wrong_typed_manifest_fields_are_exit_2(tmp_path: Path) -> None:
    a = tmp_path / "a"
    img = Image([Layer.of(base_files())])
    written = img.write(a)
    manifest = json.loads(blob_path(a, written["manifest"]).read_bytes())
    for bad, match in ((dict(manifest, layers="all"), "not an image manifest"),
                       (dict(manifest, layers=[dict(manifest["layers"][0], size=-5)]),
                        "size must be a non-negative integer"),
                       (dict(manifest, annotations=["x"]), "annotations must be"),
                       (dict(manifest, config="sha256:" + "0" * 64), "a descriptor without")):
        b = tmp_path / "b"
        img.write(b, manifest=bad)
        _expect_2(tmp_path, str(a), str(b), match=match)


def test_deeply_nested_json_is_exit_2(tmp_path: Path) -> None:
    a = tmp_path / "a"
    Image([Layer.of(base_files())]).write(a)
    b = tmp_path / "b"
    Image([Layer.of(base_files())]).write(b, config_bytes=b"[" * 100_000 + b"]" * 100_000)
    _expect_2(tmp_path, str(a), str(b), match="is not JSON")


def test_too_many_manifests_is_exit_2(tmp_path: Path) -> None:
    a = tmp_path / "a"
    Image([Layer.of(base_files())]).write(a)
    index = json.loads((a / "index.json").read_text())
    b = tmp_path / "b"
    Image([Layer.of(base_files())]).write(b, index=dict(index, manifests=index["manifests"] * 1001))
    _expect_2(tmp_path, str(a), str(b), match="more than 1000 manifests")


def test_hostile_entry_names_are_shown_escaped(tmp_path: Path) -> None:
    names = {"bin/\x1b[31mred": b"1", "etc/\xff\xfe-latin1".encode("latin-1").decode(
        "utf-8", "surrogateescape"): b"2", "new\nline": b"3", "rtl\u202efdp.exe": b"4"}
    a, b = tmp_path / "a", tmp_path / "b"
    Image([Layer.of({k: b"a" for k in names})]).write(a)
    Image([Layer(compress(_tar_raw(names), "gzip"), raw=_tar_raw(names))]).write(b)
    for fmt in ("text", "json", "markdown"):
        out = run_diff(str(a), str(b), "-f", fmt, tmp=tmp_path / "tmp")
        check_sane(out)
        assert out.rc == 1, out.summary()
        assert "\x1b" not in out.stdout and "\u202e" not in out.stdout
        shown = out.stdout
        if fmt == "json":
            shown = "\n".join(c["subject"] for c in json.loads(out.stdout)["changes"])
            assert "\x1b" not in shown and "\u202e" not in shown
            assert "/new\\nline" in shown.splitlines()
        assert "/bin/\\x1b[31mred" in shown and "/etc/\\xff\\xfe-latin1" in shown
        assert "/rtl\\u202efdp.exe" in shown


def _tar_raw(names: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT,
                      encoding="utf-8", errors="surrogateescape") as tf:
        for name, data in names.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime = len(data), 1_700_000_000
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


# ---------------------------------------------------------------------------- bombs and caps


@pytest.mark.parametrize("how", ["gzip", "zstd"])
def test_decompression_bombs_stop_early_and_say_so(tmp_path: Path, how: str) -> None:
    """4 GiB of zeros from ~4 MB of gzip / ~130 KB of zstd: before, 42 s and 31 s."""
    layer = Layer(bomb(how, 4 << 30), how, diff_id=sha(b"never reached"))
    a, b, written = _pair(tmp_path, layer)
    assert blob_path(b, written["layers"][1]).stat().st_size < 5 << 20
    err = _expect_2(tmp_path, str(a), str(b), match="expands more than 100 times")
    assert "--max-expansion" in err and "SERVELAB_MAX_EXPANSION" in err


def test_the_size_cap_applies_and_is_configurable(tmp_path: Path) -> None:
    layer = Layer(bomb("zstd", 1 << 30), "zstd", diff_id=sha(b"never reached"))
    a, b, _ = _pair(tmp_path, layer)
    err = _expect_2(tmp_path, str(a), str(b), "--max-expansion", "1e9", "--max-layer-bytes",
                    "96M", match="over the 96.0 MiB cap on one layer")
    assert "--max-layer-bytes" in err
    _expect_2(tmp_path, str(a), str(b), match="over the 80.0 MiB cap",
              env={"SERVELAB_MAX_LAYER_BYTES": "80M", "SERVELAB_MAX_EXPANSION": "1e9"})
    _expect_2(tmp_path, str(a), str(b), "--max-layer-bytes", "lots", match="is not a size")


# ---------------------------------------------------------------------------- files


def test_a_blob_that_is_a_pipe_is_refused_at_once(tmp_path: Path) -> None:
    a, b, written = _pair(tmp_path)
    path = blob_path(b, written["layers"][1])
    path.unlink()
    os.mkfifo(path)
    err = _expect_2(tmp_path, str(a), str(b), match="is not a regular file (a pipe")
    assert written["layers"][1] in err


def test_a_blob_linked_to_a_device_is_refused(tmp_path: Path) -> None:
    a, b, written = _pair(tmp_path)
    path = blob_path(b, written["layers"][1])
    path.unlink()
    path.symlink_to("/dev/zero")
    _expect_2(tmp_path, str(a), str(b), match="a character device")


def test_an_index_that_is_a_pipe_is_refused(tmp_path: Path) -> None:
    a, b, _ = _pair(tmp_path)
    (b / "index.json").unlink()
    os.mkfifo(b / "index.json")
    _expect_2(tmp_path, str(a), str(b), match="index.json is not a regular file")


def test_a_pipe_argument_is_not_no_such_file(tmp_path: Path) -> None:
    a, _, _ = _pair(tmp_path)
    fifo = tmp_path / "image.tar"
    os.mkfifo(fifo)
    _expect_2(tmp_path, str(a), str(fifo), match="is a pipe, not a regular file")


@pytest.mark.parametrize("missing", ["nosuch.tar", "out/nosuch", "./nosuch", "/nonexistent/x"])
def test_a_missing_file_never_asks_the_engine_or_a_registry(tmp_path: Path,
                                                            missing: str) -> None:
    """No docker on PATH and no engine: asking either would be exit 3, not 2."""
    a, _, _ = _pair(tmp_path)
    (tmp_path / "out").mkdir()
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        env = {"PATH": str(Path(sys.executable).parent), "DOCKER_HOST": "unix:///nonexistent"}
        _expect_2(tmp_path, str(a), missing, match="no such file or directory", env=env)
    finally:
        os.chdir(cwd)


def test_an_unreadable_archive_is_exit_2(tmp_path: Path) -> None:
    a, _, _ = _pair(tmp_path)
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"\0" * 100 + os.urandom(5000))
    out = run_diff(str(a), str(junk), tmp=tmp_path / "tmp")
    check_sane(out)
    assert out.rc == 2, out.summary()


# ---------------------------------------------------------------------------- signals


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_workers_within_a_second(tmp_path: Path, sig: int,
                                                    code: int) -> None:
    """Two 8 GiB layers of zeros (8 MB each, so both are read by worker threads) with the
    expansion cap lifted: minutes of work. A signal ends the command within a second, with
    130 (SIGINT) or 143 (SIGTERM), and nothing left in its TMPDIR. Before: ~40 s, sometimes 3."""
    a, b = tmp_path / "a", tmp_path / "b"
    Image([Layer(bomb("gzip", 8 << 30), diff_id=sha(b"a"))]).write(a)
    Image([Layer(bomb("gzip", (8 << 30) + (16 << 20)), diff_id=sha(b"b"))]).write(b)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "SERVELAB_MAX_EXPANSION": "1e12"}
    proc = subprocess.Popen([sys.executable, "-c", RUN, "diff", str(a), str(b)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.5)
        assert proc.poll() is None, "the diff ended before the signal"
        start = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=7)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert took < 1.5, f"took {took:.2f}s to stop"
    assert "internal error" not in err
    assert list(tmp.iterdir()) == []
