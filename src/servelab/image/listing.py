"""What a layer holds, learnt from bytes that pass by anyway.

API::

    ix = TarIndexer()
    ix.feed(chunk) ...            # the layer's uncompressed tar, in order, any chunk sizes
    listing = ix.listing()        # LayerListing: regular files (path, size) and whiteouts
    remember(gzip_digest, listing)  # once the bytes are verified against the diff_id
    recall(digest)                # -> LayerListing | None

The build stage reads each new layer once, to compress it for the registry-shaped archive
(:mod:`servelab.build.export`). The baked-weights scan needs only the layer's file names and
sizes; without this module it inflated the same multi-GB layer again (about 6 s of CPU for a
0.77 GB layer). :class:`TarIndexer` is a push parser over the tar headers only: it never
copies file data, it counts past it. It understands what BuildKit and ``tar`` write: ustar
names with a prefix, GNU long names (``L``) and PAX records (``path``, ``size``); a global
PAX header or anything it cannot parse makes the listing unusable (:meth:`TarIndexer.listing`
returns None) and the reader falls back to reading the layer itself.

A listing is remembered only after the layer's bytes were verified against its ``diff_id``
(the caller's duty), by the digest of the blob that was written from them; at most
:data:`MAX_REMEMBERED` layers are kept, in this process only.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.image.blob import Readable

BLOCK = 512
MAX_REMEMBERED = 256
#: a PAX or GNU long-name record larger than this is not a name: the listing gives up
MAX_META = 1 << 20
_REGULAR = frozenset(b"0\x007")
#: tar entry kinds whose size field counts no data blocks (links, devices, dirs, FIFOs)
NO_DATA_KINDS = frozenset({b"1", b"2", b"3", b"4", b"5", b"6"})


@dataclass(frozen=True)
class LayerListing:
    """The regular files of a layer (path as in the tar, size) and its whiteout entries."""

    files: tuple[tuple[str, int], ...]
    #: paths of ``.wh.``-prefixed entries, as in the tar (opaque dirs end in .wh..wh..opq)
    whiteouts: tuple[str, ...] = ()


@dataclass
class _Next:
    """Overrides the next real header takes from a GNU long name or a PAX header."""

    path: str | None = None
    size: int | None = None


@dataclass
class TarIndexer:
    """Push parser of a tar stream's headers (see the module docstring)."""

    files: list[tuple[str, int]] = field(default_factory=list)
    whiteouts: list[str] = field(default_factory=list)
    broken: str | None = None
    ended: bool = False
    _buf: bytearray = field(default_factory=bytearray)
    _skip: int = 0  # data bytes (with padding) still to pass
    #: (typeflag, padded bytes, bytes) of a long-name or PAX record being collected
    _meta: tuple[bytes, int, int] | None = None
    _next: _Next = field(default_factory=_Next)

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """The next bytes of the tar."""
        view = memoryview(chunk)
        while view and self.broken is None and not self.ended:
            if self._skip:
                n = min(self._skip, len(view))
                self._skip -= n
                view = view[n:]
                continue
            want = self._meta[1] if self._meta else BLOCK
            take = min(want - len(self._buf), len(view))
            self._buf += view[:take]
            view = view[take:]
            if len(self._buf) < want:
                return
            data = bytes(self._buf)
            self._buf.clear()
            if self._meta is not None:
                self._record(self._meta, data)
            else:
                self._header(data)

    def listing(self) -> LayerListing | None:
        """What the tar held; None when it was not understood or did not end properly."""
        if self.broken is not None or not self.ended:
            return None
        return LayerListing(tuple(self.files), tuple(self.whiteouts))

    # -------------------------------------------------------------------------- headers

    def _header(self, block: bytes) -> None:
        if block == bytes(BLOCK):
            self.ended = True  # the first of the two zero blocks: the archive's end
            return
        if not tar_checksum_ok(block):
            self.broken = "a header's checksum does not match"
            return
        kind = block[156:157]
        size = tar_number(block[124:136])
        if size is None or size < 0:
            self.broken = "a header's size is not a number"
            return
        padded = -(-size // BLOCK) * BLOCK
        if kind in (b"L", b"x"):
            if size > MAX_META:
                self.broken = "a long name or PAX record is too large"
                return
            self._meta = (kind, padded, size)
            if not padded:
                self._record(self._meta, b"")
            return
        if kind == b"g":
            self.broken = "a global PAX header"
            return
        nxt, self._next = self._next, _Next()
        name = nxt.path if nxt.path is not None else _name(block)
        if nxt.size is not None:
            size = nxt.size
            padded = -(-size // BLOCK) * BLOCK
        base = name.rstrip("/").rsplit("/", 1)[-1]
        if base.startswith(".wh."):
            self.whiteouts.append(name)
        elif kind and kind[0] in _REGULAR:
            self.files.append((name, size))
        # links, devices, directories and fifos carry no data; every other type's is skipped
        self._skip = 0 if kind in NO_DATA_KINDS else padded
        if kind == b"S":
            self.broken = "a GNU sparse file"

    def _record(self, meta: tuple[bytes, int, int], data: bytes) -> None:
        kind, _, size = meta
        self._meta = None
        body = data[:size]
        if kind == b"L":
            self._next.path = body.rstrip(b"\0").decode("utf-8", "surrogateescape")
            return
        try:
            for key, value in _pax(body):
                if key == "path":
                    self._next.path = value
                elif key == "size":
                    self._next.size = int(value)
                elif key.startswith("GNU.sparse"):
                    self.broken = "a PAX sparse file"
        except ValueError:
            self.broken = "a PAX header that does not parse"


def tar_checksum_ok(block: bytes) -> bool:
    """Whether a tar header's stored checksum matches its bytes."""
    stored = tar_number(block[148:156])
    return stored is not None and stored == tar_checksum(block)


def tar_checksum(block: bytes) -> int:
    """A tar header's checksum: its bytes summed, the checksum field counted as spaces."""
    return sum(block[:148]) + 8 * 32 + sum(block[156:])


def tar_number(field_: bytes) -> int | None:
    """A tar numeric field: octal text, or GNU base-256 when the high bit is set."""
    if field_[:1] and field_[0] & 0x80:
        n = int.from_bytes(field_[1:], "big")
        return -n if field_[0] & 0x40 else n
    text = field_.replace(b"\0", b" ").strip()
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        return None


def _name(block: bytes) -> str:
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:262] == b"ustar":
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode("utf-8", "surrogateescape")


def _pax(body: bytes) -> list[tuple[str, str]]:
    """PAX records ``"<len> key=value\\n"``."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        if body[pos] == 0:
            break
        space = body.index(b" ", pos)
        length = int(body[pos:space])
        if length <= 0 or pos + length > len(body):
            raise ValueError("bad PAX record length")
        record = body[space + 1:pos + length - 1]
        key, eq, value = record.partition(b"=")
        if not eq:
            raise ValueError("PAX record without =")
        out.append((key.decode("utf-8", "surrogateescape"),
                    value.decode("utf-8", "surrogateescape")))
        pos += length
    return out


def size_and_listing(raw: Readable, *, name: str = "a layer") -> tuple[int, LayerListing | None]:
    """Stream the layer blob *raw* (best a verified :class:`~servelab.image.blob.BlobReader`)
    once: its uncompressed size, and what its tar lists (None when not understood). Call
    :func:`remember` only once the block that opened *raw* ended without an error."""
    from servelab.image.blob import CHUNK, layer_stream

    indexer = TarIndexer()
    with layer_stream(raw, name=name) as s:
        while chunk := s.read(CHUNK):
            indexer.feed(chunk)
    return s.size, indexer.listing()


# ---------------------------------------------------------------------------- memory

_remembered: collections.OrderedDict[str, LayerListing] = collections.OrderedDict()


def remember(digest: str, listing: LayerListing) -> None:
    """Keep *listing* for the blob *digest* (call only once its bytes were verified)."""
    _remembered[digest] = listing
    _remembered.move_to_end(digest)
    while len(_remembered) > MAX_REMEMBERED:
        _remembered.popitem(last=False)


def recall(digest: str) -> LayerListing | None:
    """The listing remembered for the blob *digest*, if any."""
    return _remembered.get(digest)


def forget() -> None:
    """Drop every remembered listing (tests)."""
    _remembered.clear()
