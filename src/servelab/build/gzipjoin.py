"""One gzip member out of pieces that libdeflate compressed one at a time (pigz's layout).

libdeflate compresses a whole buffer only, and ends each raw deflate stream with a *final*
block. servelab compresses a layer in :data:`~servelab.build.export.BLOCK` pieces, so it must
join them. Concatenating gzip members is valid (RFC 1952, 2.2), and runtimes read it, but
zran-style indexers read only the first member: SOCI before v0.13 maps every file of such a
layer to span 0, so a lazy node fetches the whole layer and serves zeros for files past the
first member (seen on the vLLM image: ``torch/__init__.py`` read as 130,530 zero bytes;
awslabs/soci-snapshotter#1834, fixed by #1871). A registry image that BuildKit or pigz
compressed is one member.

So the pieces become one deflate stream, as pigz and zlib's ``Z_SYNC_FLUSH`` lay it out: every
piece but the last has its final block made non-final and is followed by an empty stored
block (three zero bits, zero padding to the byte, ``00 00 ff ff``), which ends it on a byte
boundary; the last piece keeps its final block. One gzip header (libdeflate's: no name,
mtime 0) goes before, one trailer (CRC-32 and size of the whole input) after.

Where a piece's final block starts, and on which bit it ends, is found by inflating the piece
with zlib's ``inflate(Z_BLOCK)``, through ctypes (Python's zlib module has no ``Z_BLOCK``): it
stops after every block and says in ``data_type`` how many bits of the last byte it has not
used, and whether that block was the last. zlib only reads: the bytes are libdeflate's, so
they depend on its version, the level and the piece size, not on the machine's zlib.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import struct
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from servelab.errors import CapabilityError

Z_OK, Z_STREAM_END, Z_BLOCK = 0, 1, 5
#: ``data_type`` flags after ``inflate(Z_BLOCK)``: in the last block; at a block boundary
_LAST, _BOUNDARY = 64, 128
#: what follows a non-final piece: the empty stored block's LEN and NLEN
_STORED = b"\x00\x00\xff\xff"


class _ZStream(ctypes.Structure):
    _fields_ = [
        ("next_in", ctypes.c_void_p), ("avail_in", ctypes.c_uint),
        ("total_in", ctypes.c_ulong), ("next_out", ctypes.c_void_p),
        ("avail_out", ctypes.c_uint), ("total_out", ctypes.c_ulong),
        ("msg", ctypes.c_char_p), ("state", ctypes.c_void_p), ("zalloc", ctypes.c_void_p),
        ("zfree", ctypes.c_void_p), ("opaque", ctypes.c_void_p), ("data_type", ctypes.c_int),
        ("adler", ctypes.c_ulong), ("reserved", ctypes.c_ulong)]


@functools.cache
def _zlib() -> ctypes.CDLL:
    name = ctypes.util.find_library("z") or "libz.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise CapabilityError(
            f"zlib's shared library ({name}) cannot be loaded: servelab reads the block "
            f"boundaries of the layers it compresses with it ({e})",
            hint="install zlib (Debian/Ubuntu: apt-get install zlib1g)") from e
    lib.zlibVersion.restype = ctypes.c_char_p
    lib.inflateInit2_.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int, ctypes.c_char_p,
                                  ctypes.c_int]
    lib.inflate.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int]
    lib.inflateEnd.argtypes = [ctypes.POINTER(_ZStream)]
    return lib


@dataclass(frozen=True)
class Blocks:
    """Where a raw deflate stream's final block starts and where its last bit ends (bit
    offsets from the stream's first byte, bits counted from each byte's lowest)."""

    final_start: int
    end: int


def final_block(raw: bytes, size: int) -> Blocks:
    """The final block of *raw* (a whole raw deflate stream of *size* uncompressed bytes);
    ValueError when *raw* is not one."""
    lib = _zlib()
    src = ctypes.create_string_buffer(raw, len(raw))
    dst = ctypes.create_string_buffer(size + 1)
    z = _ZStream(next_in=ctypes.addressof(src), avail_in=len(raw),
                 next_out=ctypes.addressof(dst), avail_out=size + 1)
    if lib.inflateInit2_(ctypes.byref(z), -15, lib.zlibVersion(), ctypes.sizeof(z)) != Z_OK:
        raise CapabilityError("zlib's inflateInit2 failed", hint="reinstall zlib")
    try:
        return _walk(lib, z, size)
    finally:
        lib.inflateEnd(ctypes.byref(z))


def _walk(lib: ctypes.CDLL, z: _ZStream, size: int) -> Blocks:
    start = 0
    while True:
        before = (z.total_in, z.total_out)
        ret = lib.inflate(ctypes.byref(z), Z_BLOCK)
        if ret not in (Z_OK, Z_STREAM_END):
            raise ValueError(f"not a raw deflate stream (zlib inflate returned {ret})")
        flags = z.data_type
        if flags & _BOUNDARY:
            at = z.total_in * 8 - (flags & 7)
            if flags & _LAST:
                if z.total_out != size:
                    raise ValueError(f"the stream holds {z.total_out} bytes, not {size}")
                return Blocks(start, at)
            start = at
        elif ret == Z_STREAM_END or before == (z.total_in, z.total_out):
            raise ValueError("the raw deflate stream ended without a final block")


def non_final(raw: bytes, size: int) -> bytes:
    """*raw* (a whole raw deflate stream of *size* bytes) made non-final and ended on a byte
    boundary by an empty stored block: another stream may follow it."""
    b = final_block(raw, size)
    out = bytearray(raw[:(b.end + 7) >> 3])
    out[b.final_start >> 3] &= ~(1 << (b.final_start & 7)) & 0xFF
    used = b.end & 7
    if used:
        out[-1] &= (1 << used) - 1  # the padding after the last bit: zero, where the header goes
    if used == 0 or used > 5:  # the stored block's 3 header bits do not fit: one more byte
        out.append(0)
    return bytes(out + _STORED)


#: pieces whose boundaries are being read while the next one is compressed
IN_FLIGHT = 2


@dataclass
class Member:
    """One gzip member written piece by piece: :meth:`add` each piece, then :meth:`close`.

    libdeflate holds the GIL while it compresses, zlib's inflate (ctypes) does not: the
    boundaries of one piece are read on a second thread while the next piece is compressed,
    and the pieces are written in order."""

    sink: Callable[[bytes], object]
    level: int
    compress: Callable[[bytes, int], bytes]
    crc32: Callable[[bytes, int], int]
    size: int = 0
    pieces: int = 0
    _held: tuple[bytes, int] | None = field(default=None, repr=False)
    _crc: int = field(default=0, repr=False)
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)
    _pending: deque[Future[bytes]] = field(default_factory=deque, repr=False)

    def add(self, piece: bytes) -> None:
        """Compress *piece*; the one before it goes to be made non-final."""
        if not self.pieces:
            self.sink(GZIP_HEADER)
        held = (self.compress(piece, self.level), len(piece))
        if self._held is not None:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="servelab-gzipjoin")
            self._pending.append(self._pool.submit(non_final, *self._held))
        self._held = held
        self._crc = self.crc32(piece, self._crc)
        self.size += len(piece)
        self.pieces += 1
        self._drain(keep=IN_FLIGHT)

    def close(self) -> None:
        """The last piece as it is (final), then the trailer; an empty member for no piece.
        The helper thread is stopped (:meth:`abort`) however it ends."""
        try:
            if not self.pieces:
                self.add(b"")
            self._drain(keep=0)
            if self._held is not None:
                self.sink(self._held[0])
            self.sink(struct.pack("<II", self._crc, self.size & 0xFFFFFFFF))
        finally:
            self.abort()

    def abort(self) -> None:
        """Stop the helper thread (nothing more is written)."""
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _drain(self, *, keep: int) -> None:
        while len(self._pending) > keep or (self._pending and self._pending[0].done()):
            self.sink(self._pending.popleft().result())


#: libdeflate's gzip header: deflate, no flags, mtime 0, no extra flags, OS "unknown"
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
