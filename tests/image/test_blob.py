"""servelab.image.blob: the verified blob reader, the capped layer stream, and the file opener
that refuses what is not a regular file."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import threading
from pathlib import Path

import pytest

from servelab.errors import InputError, UsageError
from servelab.image.blob import (
    BlobReader,
    Cancelled,
    LimitExceeded,
    Limits,
    digest_of_path,
    drain,
    layer_stream,
    member_layer,
    open_regular,
    parse_size,
    read_all,
    uncompressed_size,
)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _tar(n: int = 3) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for i in range(n):
            ti = tarfile.TarInfo(f"f{i}")
            data = f"file {i}\n".encode() * 100
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def test_a_good_blob_verifies_at_its_end() -> None:
    data = b"hello" * 1000
    r = BlobReader(io.BytesIO(data), _digest(data), size=len(data), name="img")
    assert read_all(r, 1 << 20) == data
    assert r.verified and r.count == len(data)


def test_sha512_digests_verify_too() -> None:
    data = b"x" * 99
    digest = "sha512:" + hashlib.sha512(data).hexdigest()
    r = BlobReader(io.BytesIO(data), digest, size=99, name="img")
    assert read_all(r, 1000) == data and r.verified


def test_an_overlong_blob_is_refused_before_it_is_all_read() -> None:
    data = b"a" * (3 << 20)
    r = BlobReader(io.BytesIO(data), _digest(data), size=10, name="img")
    with pytest.raises(InputError, match=r"img: blob sha256:\w+ is longer than its declared"):
        r.read(1 << 20)
    assert r.count == 11  # one byte past the declared size, not megabytes


def test_the_registry_kind_of_read_error_is_kept() -> None:
    from servelab.errors import CapabilityError

    class Broken(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b: object) -> int:
            raise ConnectionResetError("peer reset")

    r = BlobReader(Broken(), _digest(b""), size=None, name="reg", read_error=CapabilityError)
    with pytest.raises(CapabilityError, match="cannot be read: peer reset"):
        r.read(10)


def test_layer_stream_measures_one_pass_and_checks_the_diff_id() -> None:
    raw = _tar()
    blob = gzip.compress(raw)
    r = BlobReader(io.BytesIO(blob), _digest(blob), size=len(blob), name="img")
    with layer_stream(r, diff_id=_digest(raw)) as s:
        s.read(100)  # the block ends early: the rest is read and checked on the way out
    assert s.verified and s.size == len(raw) and s.compressed_size == len(blob)
    assert s.diff_id == _digest(raw) and s.compression == "gzip"
    r2 = BlobReader(io.BytesIO(blob), _digest(blob), size=len(blob), name="img")
    with pytest.raises(InputError, match="does not match its diff_id"), \
            layer_stream(r2, diff_id=_digest(b"other"), name="img: layer x"):
        pass


def test_a_plain_stream_is_counted_and_capped() -> None:
    raw = _tar(50)
    assert uncompressed_size(io.BytesIO(gzip.compress(raw))) == len(raw)
    tight = Limits(max_layer_bytes=len(raw) - 1)
    with pytest.raises(LimitExceeded, match="cap on one layer"):
        uncompressed_size(io.BytesIO(gzip.compress(raw)), limits=tight)


def test_the_expansion_trigger_waits_for_its_floor() -> None:
    zeros = gzip.compress(bytes(4 << 20))  # ~1000 times smaller
    assert uncompressed_size(io.BytesIO(zeros), limits=Limits(expansion_floor=8 << 20)) \
        == 4 << 20
    with pytest.raises(LimitExceeded, match="expands more than 100 times"):
        uncompressed_size(io.BytesIO(zeros), limits=Limits(expansion_floor=1 << 20))


def test_a_set_stop_event_cancels_at_the_next_chunk() -> None:
    stop = threading.Event()
    data = b"z" * (3 << 20)
    r = BlobReader(io.BytesIO(data), None, size=None, name="img", stop=stop)
    assert r.read(1 << 20)
    stop.set()
    with pytest.raises(Cancelled):
        drain(r)


@pytest.mark.parametrize(("text", "value"), [("1000", 1000), ("64G", 64 << 30),
                                             ("512MiB", 512 << 20), ("1.5k", 1536),
                                             ("2TB", 2 << 40)])
def test_sizes_parse(text: str, value: int) -> None:
    assert parse_size(text, "x") == value


def test_limits_from_env_and_flags() -> None:
    env = {"SERVELAB_MAX_LAYER_BYTES": "10G", "SERVELAB_MAX_EXPANSION": "50",
           "SERVELAB_EXPANSION_FLOOR": "1M"}
    assert Limits.from_env(env) == Limits(10 << 30, 50.0, 1 << 20)
    assert Limits.from_env(env, max_layer_bytes="1G", max_expansion="7") == \
        Limits(1 << 30, 7.0, 1 << 20)
    assert Limits.from_env({}) == Limits()
    for bad in ({"SERVELAB_MAX_LAYER_BYTES": "lots"}, {"SERVELAB_MAX_EXPANSION": "-3"},
                {"SERVELAB_MAX_EXPANSION": "inf"}):
        with pytest.raises(UsageError):
            Limits.from_env(bad)


def test_only_regular_files_are_opened(tmp_path: Path) -> None:
    f = tmp_path / "blob"
    f.write_bytes(b"x")
    with open_regular(f, "blob", "img") as fh:
        assert fh.read() == b"x"
    link = tmp_path / "link"
    link.symlink_to(f)
    with open_regular(link, "blob", "img") as fh:  # a link to a regular file is fine
        assert fh.read() == b"x"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"img: blob is not a regular file \(a pipe"):
        open_regular(fifo, "blob", "img")  # returns at once: opened non-blocking
    with pytest.raises(InputError, match="a directory"):
        open_regular(tmp_path, "blob", "img")
    with pytest.raises(InputError, match="is missing"):
        open_regular(tmp_path / "nope", "blob", "img")


def test_member_layer_verifies_against_the_digest_in_its_name() -> None:
    raw = _tar()
    blob = gzip.compress(raw)
    name = "blobs/sha256/" + _digest(blob).split(":")[1]
    assert digest_of_path(name) == _digest(blob)
    assert digest_of_path("layer.tar") is None and digest_of_path("blobs/sha256/xyz") is None
    with member_layer(io.BytesIO(blob), name, len(blob)) as s:
        assert s.read() == raw
    bad = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(InputError, match="does not match its digest"), \
            member_layer(io.BytesIO(bad), name, len(bad)):
        pass
