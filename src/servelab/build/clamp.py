"""Clamp a layer tar's timestamps to SOURCE_DATE_EPOCH while it streams by.

API::

    c = Clamp(reader, epoch)        # reader: the layer's uncompressed tar
    data = c.read(n) ...            # the same tar, every time after *epoch* set to *epoch*
    c.diff_id, c.size, c.clamped    # once read to the end: what was shipped

Why here. BuildKit's ``rewrite-timestamp=true`` does this inside the export: it compresses
each new layer, then reads it back, rewrites the times and compresses it again. That second
pass held a second copy of every new layer in BuildKit's store (one compressed image, C) and
took about a third of the vLLM image's export. servelab reads every new layer once anyway, to
gzip it for the registry (:mod:`servelab.build.export`), so the rewrite rides on that pass.

What changes, and nothing else: a header's ``mtime`` field (octal or GNU base-256) later than
*epoch* becomes *epoch* (octal, the field's width), with its checksum; the ``mtime``, ``atime``
and ``ctime`` records of a PAX header (``x``, ``g``) later than *epoch* become the integer
*epoch*, with the record's length and the header's size. File data, names and the order of
entries pass byte for byte, so a tar with nothing to clamp comes out identical (its
``diff_id`` unchanged). Only headers are parsed (a push parser over 512-byte blocks); a
stream this parser does not understand raises :class:`~servelab.errors.InputError` rather
than ship a layer half rewritten.
"""

from __future__ import annotations

import hashlib
from typing import IO, Protocol

from servelab.errors import InputError
from servelab.image.listing import NO_DATA_KINDS, tar_checksum, tar_checksum_ok, tar_number

BLOCK = 512
#: a PAX header larger than this is refused (BuildKit's are a few hundred bytes)
MAX_PAX = 1 << 20
_PAX_TIMES = (b"mtime", b"atime", b"ctime")


class _Reader(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class Clamp:
    """A reader of *src*'s tar with every timestamp after *epoch* set to *epoch*."""

    def __init__(self, src: IO[bytes] | _Reader, epoch: int, name: str = "layer") -> None:
        if epoch < 0:
            raise InputError(f"SOURCE_DATE_EPOCH {epoch} is negative")
        self._src, self.epoch, self.name = src, epoch, name
        self._in = bytearray()  # read from src, not yet passed on
        self._out = bytearray()  # passed on, not yet returned
        self._skip = 0  # file bytes (with padding) to pass unparsed
        self._ended = False  # the first zero block was seen: the rest passes as is
        self._eof = False
        self._hash = hashlib.sha256()
        self.size = 0
        self.clamped = 0

    @property
    def diff_id(self) -> str:
        return "sha256:" + self._hash.hexdigest()

    def read(self, n: int = -1) -> bytes:
        want = n if n >= 0 else 1 << 62
        while len(self._out) < want and not (self._eof and not self._in):
            self._fill(max(want - len(self._out), 1 << 16))
        out = bytes(self._out[:want])
        del self._out[:want]
        self._hash.update(out)
        self.size += len(out)
        return out

    # ------------------------------------------------------------------------ parsing

    def _fill(self, hint: int) -> None:
        if not self._eof:
            chunk = self._src.read(hint)
            if chunk:
                self._in += chunk
            else:
                self._eof = True
        self._parse()
        if self._eof and self._in:
            if self._ended or not any(self._in):
                self._pass(len(self._in))
            else:
                raise InputError(f"{self.name}: the tar ends inside a header or a PAX record",
                                 hint="the layer is truncated; rebuild the image")

    def _pass(self, n: int) -> None:
        self._out += self._in[:n]
        del self._in[:n]

    def _parse(self) -> None:
        while self._in:
            if self._ended:
                self._pass(len(self._in))
                return
            if self._skip:
                n = min(self._skip, len(self._in))
                self._skip -= n
                self._pass(n)
                continue
            if len(self._in) < BLOCK:
                return
            if not self._header():
                return

    def _header(self) -> bool:
        """Handle the header at the front of the input; False when more input is needed."""
        block = bytes(self._in[:BLOCK])
        if block == bytes(BLOCK):
            self._ended = True
            return True
        if not tar_checksum_ok(block):
            raise InputError(f"{self.name}: a tar header's checksum does not match",
                             hint="the layer is not a tar this parser knows; rebuild the "
                             "image, or report the Dockerfile")
        size = tar_number(block[124:136])
        if size is None or size < 0:
            raise InputError(f"{self.name}: a tar header's size is not a number")
        kind = block[156:157]
        padded = -(-size // BLOCK) * BLOCK
        if kind in (b"x", b"g"):
            if size > MAX_PAX:
                raise InputError(f"{self.name}: a PAX header of {size} bytes (most {MAX_PAX})")
            if len(self._in) < BLOCK + padded:
                return False
            body = bytes(self._in[BLOCK:BLOCK + size])
            del self._in[:BLOCK + padded]
            self._out += self._pax(block, body)
            return True
        del self._in[:BLOCK]
        self._out += self._mtime(block)
        self._skip = 0 if kind in NO_DATA_KINDS else padded
        return True

    # ------------------------------------------------------------------------ rewriting

    def _mtime(self, block: bytes) -> bytes:
        mtime = tar_number(block[136:148])
        if mtime is None or mtime <= self.epoch:
            return block
        self.clamped += 1
        digits = f"{self.epoch:0{11}o}".encode()
        if len(digits) > 11:  # pragma: no cover - an epoch after the year 4147
            raise InputError(f"SOURCE_DATE_EPOCH {self.epoch} does not fit a tar header")
        return _with_checksum(block[:136] + digits + b"\0" + block[148:])

    def _pax(self, block: bytes, body: bytes) -> bytes:
        records = _pax_records(body, self.name)
        changed = False
        out = []
        for key, value in records:
            late = key in _PAX_TIMES and _after(value, self.epoch)
            out.append((key, str(self.epoch).encode() if late else value))
            changed = changed or late
        if not changed:
            return block + body + bytes(-len(body) % BLOCK)
        self.clamped += 1
        new = b"".join(_pax_record(k, v) for k, v in out)
        size = f"{len(new):0{11}o}".encode()
        header = _with_checksum(block[:124] + size + b"\0" + block[136:])
        return self._mtime(header) + new + bytes(-len(new) % BLOCK)


def _with_checksum(block: bytes) -> bytes:
    return block[:148] + f"{tar_checksum(block):06o}".encode() + b"\0 " + block[156:]


def _after(value: bytes, epoch: int) -> bool:
    whole, _, frac = value.partition(b".")
    try:
        seconds = int(whole)
    except ValueError:
        return False  # not a time: left as it is
    return seconds > epoch or (seconds == epoch and frac.strip(b"0") != b"")


def _pax_records(body: bytes, name: str) -> list[tuple[bytes, bytes]]:
    """A PAX header's records ("<len> <key>=<value>\\n"), in order."""
    out = []
    pos = 0
    while pos < len(body):
        if body[pos:].strip(b"\0") == b"":
            break
        space = body.find(b" ", pos)
        try:
            length = int(body[pos:space]) if space > pos else -1
        except ValueError:
            length = -1
        end = pos + length
        if length <= 0 or end > len(body) or body[end - 1:end] != b"\n":
            raise InputError(f"{name}: a PAX record at byte {pos} is malformed")
        key, eq, value = body[space + 1:end - 1].partition(b"=")
        if not eq:
            raise InputError(f"{name}: a PAX record at byte {pos} has no '='")
        out.append((key, value))
        pos = end
    return out


def _pax_record(key: bytes, value: bytes) -> bytes:
    """One PAX record; its length counts its own digits."""
    rest = len(key) + len(value) + 3  # " ", "=", "\n"
    length = rest + len(str(rest))
    if len(str(length)) != len(str(rest)):
        length += 1
    return str(length).encode() + b" " + key + b"=" + value + b"\n"
