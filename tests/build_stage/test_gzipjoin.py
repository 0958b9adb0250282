"""Joining libdeflate's raw streams into one deflate stream (servelab.build.gzipjoin): every
end-bit alignment of a piece, what is not a stream, and the helper thread on an error. What
servelab writes is read back with zlib, not with servelab's reader."""

from __future__ import annotations

import io
import random
import threading
import zlib
from collections.abc import Iterator

import pytest
from deflate import deflate_compress

from servelab.build import export, gzipjoin


def _pieces() -> Iterator[bytes]:
    """Short inputs of many shapes: their streams end on every bit of a byte."""
    rng = random.Random(3)  # noqa: S311 (test data)
    for n in range(400):
        kind = n % 4
        size = rng.randrange(0, 3000)
        if kind == 0:
            yield rng.randbytes(size)  # stored blocks: ends on a byte
        elif kind == 1:
            yield bytes(rng.choice(b"ab") for _ in range(size))
        elif kind == 2:
            yield b"x" * size
        else:
            yield (b"servelab %d " % rng.randrange(99)) * (size // 11)


def test_every_end_alignment_joins_into_one_stream() -> None:
    seen: set[int] = set()
    pieces = list(_pieces())
    joined = bytearray()
    for p in pieces[:-1]:
        raw = bytes(deflate_compress(p, 4))
        seen.add(gzipjoin.final_block(raw, len(p)).end & 7)
        joined += gzipjoin.non_final(raw, len(p))
    joined += bytes(deflate_compress(pieces[-1], 4))
    d = zlib.decompressobj(wbits=-15)
    assert d.decompress(bytes(joined)) == b"".join(pieces)
    assert d.eof and d.unused_data == b""
    assert seen == set(range(8))  # the extra byte (ends at 0, 6, 7) and none (1 to 5)


def test_the_final_block_is_found_after_several_blocks() -> None:
    data = random.Random(5).randbytes(400_000)  # noqa: S311 (test data) + b"z" * 400_000  # libdeflate: several blocks
    raw = bytes(deflate_compress(data, 4))
    b = gzipjoin.final_block(raw, len(data))
    assert b.final_start > 0 and raw[b.final_start >> 3] >> (b.final_start & 7) & 1
    assert (b.end + 7) >> 3 == len(raw)
    joined = gzipjoin.non_final(raw, len(data)) + bytes(deflate_compress(b"tail", 4))
    assert zlib.decompress(joined, wbits=-15) == data + b"tail"


@pytest.mark.parametrize("raw", [b"", b"\xff\xff\xff", zlib.compress(b"zlib wrapped")])
def test_what_is_not_one_raw_stream_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError, match=r"raw deflate|final block|holds"):
        gzipjoin.final_block(raw, 12)


def test_a_wrong_size_is_refused() -> None:
    raw = bytes(deflate_compress(b"twelve bytes", 4))
    with pytest.raises(ValueError, match="holds 12 bytes, not 13"):
        gzipjoin.final_block(raw, 13)


class _Breaks(io.RawIOBase):
    """A source that fails after three pieces."""

    def __init__(self) -> None:
        self.left = 3 * export.BLOCK

    def readable(self) -> bool:
        return True

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        if self.left <= 0:
            raise OSError("the disk went away")
        n = min(len(b), self.left)
        b[:n] = b"q" * n
        self.left -= n
        return n


def test_an_error_mid_layer_stops_the_helper_thread() -> None:
    out = io.BytesIO()
    with pytest.raises(OSError, match="went away"):
        export.gzip_to(_Breaks(), out.write)  # type: ignore[arg-type]
    assert not [t for t in threading.enumerate() if t.name.startswith("servelab-gzipjoin")]
