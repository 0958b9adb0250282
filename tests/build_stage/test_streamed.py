"""BuildKit's export through a named pipe (servelab.build.streamed): the pipe, the shaping
thread, and how a failure on either side stops the other. The writer here is a thread (or
``sh``) writing an archive the test made, as buildx writes into ``dest=<pipe>``."""

from __future__ import annotations

import os
import tarfile
import threading
import time
from pathlib import Path

import pytest
from test_export import EPOCH, _fresh, _payload, _tar_layer, read_back, write_buildkit_archive

from servelab import proc
from servelab.build import export, streamed
from servelab.errors import CommandError, InputError


def _archive(tmp_path: Path) -> Path:
    src = tmp_path / "build.oci.tar"
    write_buildkit_archive(src, [("zstd", _tar_layer({"opt/w.bin": _payload(3 << 20, 2)}))])
    return src


def _write(path: Path, data: bytes, *,
           errors: list[BaseException] | None = None) -> threading.Thread:
    def run() -> None:
        try:
            with path.open("wb") as w:
                w.write(data)
        except OSError as e:  # the reader went away
            if errors is not None:
                errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_what_is_written_into_the_pipe_is_shaped_as_the_file_would_be(tmp_path: Path) -> None:
    src = _archive(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper, \
            streamed.Streamed(shaper, store, epoch=EPOCH) as s:
        assert s.path.parent.parent == store and s.path.is_fifo()
        time.sleep(0.5)  # the writer comes late, as buildx does after its build
        _write(s.path, src.read_bytes()).join()
        s.writer_done()
        shaped = s.result()
        pipe_dir = s.path.parent
    assert not pipe_dir.exists()  # the pipe and its directory are gone
    alone, blobs = _fresh(tmp_path, src, "alone")
    assert shaped.digests == alone.digests and read_back(shaped.archive)[1] == blobs
    assert shaped.seconds < 5  # timed from the first byte, not from the pipe's making
    assert sorted(store.iterdir()) == [shaped.archive]


def test_a_writer_that_never_came_ends_as_a_clear_error(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper, \
            streamed.Streamed(shaper, store, epoch=EPOCH) as s:
        s.writer_done()  # buildx exited (its build failed) before its export
        with pytest.raises(InputError, match=r"tar stream|wrote nothing"):
            s.result()
    assert list(store.iterdir()) == []


def test_a_stream_that_is_not_an_archive_stops_the_command_writing_it(tmp_path: Path) -> None:
    """The shaping fails on the first bytes: the flag it sets stops the writer at once,
    where it would otherwise wait on a full pipe until its timeout."""
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper, \
            streamed.Streamed(shaper, store, epoch=EPOCH) as s:
        argv = ["sh", "-c", f"yes not-a-tar > {s.path}"]
        t0 = time.monotonic()
        with pytest.raises(proc.Cancelled):
            proc.run(argv, timeout=60, cancel=s.failed)
        assert time.monotonic() - t0 < 10
        assert s.failed.is_set() and isinstance(s.error, InputError)
        with pytest.raises(InputError):
            s.result()
    assert list(store.iterdir()) == []


def test_leaving_mid_stream_stops_the_thread_and_the_writer_sees_a_broken_pipe(
        tmp_path: Path) -> None:
    """Ctrl-C during the export: the block is left while the writer still writes."""
    src = _archive(tmp_path)
    data = src.read_bytes()
    with tarfile.open(src) as tf:  # the layer, then nothing more: the writer stalls there
        layer = max(tf.getmembers(), key=lambda m: m.size)
    store = tmp_path / "store"
    store.mkdir()
    errors: list[BaseException] = []
    with export.Shaper(store) as shaper:
        with streamed.Streamed(shaper, store, epoch=EPOCH) as s:
            r, w = os.pipe()  # the writer blocks on this until told to go on
            held = data[:layer.offset_data + layer.size // 2]

            def stall() -> None:
                try:
                    with s.path.open("wb") as f:
                        f.write(held)
                        f.flush()
                        os.read(r, 1)
                        f.write(data[len(held):])
                except OSError as e:
                    errors.append(e)

            writer = threading.Thread(target=stall, daemon=True)
            writer.start()
            time.sleep(1.0)
        os.write(w, b"x")  # left the block: now the writer goes on, into a closed pipe
        writer.join(10)
        os.close(r)
        os.close(w)
    assert not writer.is_alive()
    assert errors and isinstance(errors[0], BrokenPipeError)
    assert list(store.iterdir()) == []  # no pipe, no half-written archive


def test_a_cancel_flag_does_not_change_a_command_s_timeout_or_its_output() -> None:
    flag = threading.Event()
    res = proc.run(["sh", "-c", "echo out; echo err >&2"], cancel=flag)
    assert (res.stdout, res.stderr, res.returncode) == ("out\n", "err\n", 0)
    t0 = time.monotonic()
    with pytest.raises(CommandError) as e:
        proc.run(["sleep", "30"], timeout=0.5, cancel=flag)
    assert e.value.timed_out and time.monotonic() - t0 < 5
    threading.Timer(0.3, flag.set).start()
    t0 = time.monotonic()
    with pytest.raises(proc.Cancelled):
        proc.run(["sleep", "30"], timeout=60, cancel=flag)
    assert time.monotonic() - t0 < 5


@pytest.mark.docker
def test_a_real_build_whose_shaping_fails_is_stopped_and_leaves_nothing(
        builds: object, base_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BuildKit's export of a 64 MB layer is more than the pipe holds: the shaping fails on
    it, buildx (which would wait on the full pipe until its timeout) is stopped at once, the
    shaping's error is the build's, and nothing of it is left in the store."""
    from servelab.spec import Arm, BuildSettings

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN head -c 67108864 /dev/urandom > /big\n")
    arm = Arm("broken", ctx, ctx / "Dockerfile", {"BASE_IMAGE": base_image})
    seen: list[str] = []

    def broken(self: object, tar: object) -> None:
        seen.append("called")
        raise InputError("the shaping broke here")

    monkeypatch.setattr(export._Job, "shape_layer", broken)
    out = tmp_path / "r1"
    t0 = time.monotonic()
    with pytest.raises(InputError, match="the shaping broke here"):
        builds.build(arm, BuildSettings(source_date_epoch=EPOCH, timeout_s=900),  # type: ignore[attr-defined]
                     repeat=1, out_dir=out)
    assert seen and time.monotonic() - t0 < 300
    store: Path = builds.store_dir  # type: ignore[attr-defined]
    assert not list(store.glob(".export-*")) and not list(store.glob(".shaping-*"))
    assert (out / "build.log").is_file()
