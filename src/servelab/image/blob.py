"""Verified reading of OCI blobs, and layer decompression with caps: the one pass that sizes,
hashes and reads a layer.

API::

    blob = BlobReader(raw, "sha256:...", size=1234, name="a.tar")   # counts and hashes
    data = read_all(blob, limit)          # InputError at EOF: digest or size mismatch, truncation
    with layer_stream(blob, limits=Limits.from_env(), name="a.tar: layer 1",
                      diff_id="sha256:...", stop=event) as tar:   # -> LayerStream
        ...                               # the uncompressed tar bytes (gzip, zstd or plain)
    tar.compressed_size, tar.size, tar.diff_id   # after the block: what the one pass measured
    open_regular(path, what="blob sha256:...", name="layout")   # only regular files, never blocks

A blob is trusted only once its digest is verified (OCI image spec): :class:`BlobReader` hashes
the bytes as they stream by, counts them against the descriptor's declared size (more bytes
than declared is refused as soon as they arrive), and at end of stream raises
:class:`~servelab.errors.InputError` naming the blob when the count or the digest is wrong, so
a truncated or modified blob is never taken for content. :func:`layer_stream` reads the
stream to its end when its block ends normally, so every layer it opened is verified even when
the reader stopped early (a tar stream ends before its padding).

Decompression caps (:class:`Limits`), each stops the read at once with :class:`LimitExceeded`
(an InputError, exit 2) saying which cap and how to raise it:

* ``max_layer_bytes``: uncompressed bytes of one layer (default 256 GiB,
  ``SERVELAB_MAX_LAYER_BYTES``, ``servelab diff --max-layer-bytes``);
* ``max_expansion``: uncompressed bytes per compressed byte read so far (default 100,
  ``SERVELAB_MAX_EXPANSION``, ``servelab diff --max-expansion``), checked once a layer has
  produced more than ``expansion_floor`` bytes (default 64 MiB,
  ``SERVELAB_EXPANSION_FLOOR``). Real layers (packages, libraries, weights) expand 1.5 to 5
  times; a decompression bomb expands 1000 (gzip) to 30000 (zstd) times.

Cancellation: readers given a ``stop`` event (a :class:`threading.Event`) raise
:class:`Cancelled` at the next chunk (1 MiB) once it is set, so worker threads end within
milliseconds of the main thread's Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from servelab.errors import CapabilityError, InputError, ServelabError, UsageError

CHUNK = 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
CORRUPT_HINT = "the image is corrupt or was modified; rebuild, re-export or re-pull it"

GIB = 1 << 30
DEFAULT_MAX_LAYER_BYTES = 256 * GIB
DEFAULT_MAX_EXPANSION = 100.0
DEFAULT_EXPANSION_FLOOR = 64 << 20
ENV_MAX_LAYER_BYTES = "SERVELAB_MAX_LAYER_BYTES"
ENV_MAX_EXPANSION = "SERVELAB_MAX_EXPANSION"
ENV_EXPANSION_FLOOR = "SERVELAB_EXPANSION_FLOOR"
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


class Cancelled(Exception):
    """A reader's stop event was set: the main thread is unwinding (Ctrl-C, SIGTERM, an error
    in the other worker). Never reaches the user: the main thread's exception does."""


class LimitExceeded(InputError):
    """A layer went past a decompression cap (see :class:`Limits`)."""


def parse_size(text: str, what: str) -> int:
    """``"64G"``, ``"512MiB"``, ``"1000000"`` -> bytes (binary units); UsageError otherwise."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise UsageError(f"{what}: {text!r} is not a size",
                         hint="write bytes or a number with K, M, G or T (e.g. 64G)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_ratio(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{what}: {text!r} is not a positive number", hint="e.g. 100")
    return value


def show_bytes(n: float) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


@dataclass(frozen=True)
class Limits:
    """Decompression caps of one layer (see the module docstring)."""

    max_layer_bytes: int = DEFAULT_MAX_LAYER_BYTES
    max_expansion: float = DEFAULT_MAX_EXPANSION
    expansion_floor: int = DEFAULT_EXPANSION_FLOOR

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *,
                 max_layer_bytes: str | None = None,
                 max_expansion: str | None = None) -> Limits:
        """The defaults, overridden by the environment, overridden by flags (as text)."""
        env = os.environ if env is None else env
        size_text = max_layer_bytes or env.get(ENV_MAX_LAYER_BYTES)
        ratio_text = max_expansion or env.get(ENV_MAX_EXPANSION)
        floor_text = env.get(ENV_EXPANSION_FLOOR)
        return cls(
            parse_size(size_text, "--max-layer-bytes / " + ENV_MAX_LAYER_BYTES)
            if size_text else DEFAULT_MAX_LAYER_BYTES,
            parse_ratio(ratio_text, "--max-expansion / " + ENV_MAX_EXPANSION)
            if ratio_text else DEFAULT_MAX_EXPANSION,
            parse_size(floor_text, ENV_EXPANSION_FLOOR) if floor_text
            else DEFAULT_EXPANSION_FLOOR,
        )

    def check(self, produced: int, consumed: int, name: str) -> None:
        """LimitExceeded when *produced* uncompressed bytes from *consumed* compressed ones
        pass a cap."""
        if produced > self.max_layer_bytes:
            raise LimitExceeded(
                f"{name}: stopped after {show_bytes(produced)} of uncompressed data: over the "
                f"{show_bytes(self.max_layer_bytes)} cap on one layer",
                hint=f"if the layer is real, raise the cap: --max-layer-bytes or "
                f"{ENV_MAX_LAYER_BYTES} (e.g. 512G)")
        if produced > self.expansion_floor and produced > self.max_expansion * max(consumed, 1):
            raise LimitExceeded(
                f"{name}: stopped after {show_bytes(produced)} of uncompressed data from "
                f"{show_bytes(consumed)} compressed: it expands more than "
                f"{self.max_expansion:g} times (a decompression bomb?)",
                hint=f"if the layer is real (e.g. a large file of zeros), raise the ratio: "
                f"--max-expansion or {ENV_MAX_EXPANSION}, or the size where it starts to "
                f"apply, {ENV_EXPANSION_FLOOR} (now {show_bytes(self.expansion_floor)})")


def check_stop(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Cancelled


# ---------------------------------------------------------------------------- files


def open_regular(path: Path, what: str, name: str) -> BinaryIO:
    """*path* opened for reading when it is a regular file (symlinks followed).

    Opened non-blocking, so a FIFO never blocks the open, then checked with ``fstat``: a
    FIFO, socket or device is refused (InputError naming *what* in *name*), as is a missing
    file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise InputError(f"{name}: {what} is missing ({path})", hint=CORRUPT_HINT) from e
    except OSError as e:
        raise InputError(f"{name}: {what} cannot be opened: {e.strerror or e}") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{name}: {what} is not a regular file ({_kind(mode)}: {path})",
                             hint="an image's files must be regular files")
        os.set_blocking(fd, True)
        return cast(BinaryIO, os.fdopen(fd, "rb", buffering=0))
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, text in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a pipe"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return text
    return "not a regular file"


def path_kind(path: str) -> str | None:
    """'dir', 'file', another kind ('a pipe', ...) for what is at *path*, or None."""
    try:
        mode = Path(path).stat().st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else _kind(mode)


# ---------------------------------------------------------------------------- verified blobs


class BlobReader(io.RawIOBase):
    """The bytes of one blob, counted and hashed as they are read.

    *digest* None: only counted (a stream whose digest is not known). *size* None: the declared
    size is not known (checked against the digest only). *read_error* is the error class for
    an I/O failure of *raw* (InputError for files, CapabilityError for a registry).
    """

    def __init__(self, raw: IO[bytes] | io.RawIOBase, digest: str | None, *,
                 size: int | None, name: str,
                 stop: threading.Event | None = None,
                 read_error: type[ServelabError] = InputError) -> None:
        super().__init__()
        self._raw = raw
        self.digest = digest
        self.size = size
        self.name = name
        self._stop = stop
        self._read_error = read_error
        algo = digest.partition(":")[0] if digest else ""
        self._hash = hashlib.new(algo) if algo else None
        #: bytes read so far
        self.count = 0
        #: set once the end was reached and the size and digest checked
        self.verified = False

    @property
    def what(self) -> str:
        return f"blob {self.digest}" if self.digest else "blob"

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if self.verified or not len(view):
            return 0
        check_stop(self._stop)
        if self.size is not None:  # one byte more than declared tells an overlong blob
            view = view[: self.size - self.count + 1]
        n = self._read(view)
        if not n:
            self._finish()
            return 0
        if self._hash is not None:
            self._hash.update(view[:n])
        self.count += n
        if self.size is not None and self.count > self.size:
            raise InputError(f"{self.name}: {self.what} is longer than its declared size "
                             f"({self.size} bytes)", hint=CORRUPT_HINT)
        return n

    def _read(self, view: memoryview) -> int:
        try:
            readinto = getattr(self._raw, "readinto", None)
            if readinto is not None:
                return int(readinto(view) or 0)
            data = self._raw.read(len(view))
        except (OSError, ValueError, EOFError) as e:
            raise self._read_error(f"{self.name}: {self.what} cannot be read: {e}") from e
        except Exception as e:  # http.client.IncompleteRead and kin from a registry
            if type(e).__module__ != "http.client":
                raise
            raise self._read_error(f"{self.name}: {self.what} cannot be read: {e!r}") from e
        view[: len(data)] = data
        return len(data)

    def _finish(self) -> None:
        if self.size is not None and self.count != self.size:
            raise InputError(f"{self.name}: {self.what} is truncated: {self.count} of its "
                             f"declared {self.size} bytes", hint=CORRUPT_HINT)
        if self._hash is not None and self.digest is not None:
            got = f"{self._hash.name}:{self._hash.hexdigest()}"
            if got != self.digest:
                raise InputError(f"{self.name}: {self.what} does not match its digest (its "
                                 f"bytes hash to {got})", hint=CORRUPT_HINT)
        self.verified = True

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._raw.close()
        super().close()


Readable = IO[bytes] | io.RawIOBase


def read_all(stream: Readable, limit: int, name: str = "") -> bytes:
    """Everything up to the end of *stream* (so a BlobReader is verified); InputError when it
    is longer than *limit*."""
    out = bytearray()
    while True:
        chunk = stream.read(min(CHUNK, limit + 1 - len(out)))
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > limit:
            raise InputError(f"{name or 'a blob'} is over {limit} bytes",
                             hint="a manifest, index or config this large is not an image")


def drain(stream: Readable) -> None:
    """Read *stream* to its end (verification happens there)."""
    buf = bytearray(CHUNK)
    readinto = getattr(stream, "readinto", None)
    while True:
        if readinto is not None:
            if not readinto(buf):
                return
        elif not stream.read(CHUNK):
            return


# ---------------------------------------------------------------------------- decompression


def compression_of(head: bytes) -> str:
    """'gzip', 'zstd' or 'none' from the first bytes of a layer blob."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return "none"


class _Gunzip(io.RawIOBase):
    """Streaming gzip decompression, multi-member aware (eStargz layers have many members)."""

    def __init__(self, raw: Readable) -> None:
        super().__init__()
        self._raw = raw
        self._d = zlib.decompressobj(wbits=31)
        self._buf = b""
        self._pending = b""
        self._mid_member = False
        self._eof = False

    def readable(self) -> bool:
        return True

    def _fill(self, want: int) -> None:
        while not self._buf and not self._eof:
            data = self._d.unconsumed_tail or self._pending or self._raw.read(CHUNK)
            self._pending = b""
            if not self._mid_member:
                stripped = data.lstrip(b"\x00")  # zero padding between or after members
                if data and not stripped:
                    continue
                data = stripped
            if not data:
                if self._mid_member:
                    raise zlib.error("the gzip stream ends early (truncated)")
                self._eof = True
                return
            self._mid_member = True
            self._buf = self._d.decompress(data, max(want, CHUNK))
            if self._d.eof:
                self._pending = self._d.unused_data
                self._d = zlib.decompressobj(wbits=31)
                self._mid_member = False

    def readinto(self, b: Any) -> int:
        self._fill(len(b))  # zlib.error: told as an InputError by _Capped
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def _zstd_reader(raw: Readable) -> IO[bytes]:
    try:
        import zstandard
    except ImportError as e:
        raise CapabilityError(
            "this layer is zstd-compressed and the zstandard module is not installed",
            hint="pip install zstandard (servelab's dependency for zstd layers)",
        ) from e
    return cast(IO[bytes], zstandard.ZstdDecompressor().stream_reader(
        cast(IO[bytes], raw), read_size=CHUNK, read_across_frames=True))


def _decoder_errors() -> tuple[type[BaseException], ...]:
    try:
        import zstandard
    except ImportError:
        return (zlib.error, EOFError)
    return (zlib.error, EOFError, zstandard.ZstdError)


class _Capped(io.RawIOBase):
    """Uncompressed bytes of a layer: counted against the caps, hashed when asked."""

    def __init__(self, inner: IO[bytes] | io.RawIOBase, consumed: Callable[[], int], *,
                 limits: Limits, name: str, stop: threading.Event | None,
                 diff_id: str | None, hash_it: bool) -> None:
        super().__init__()
        self._inner = inner
        self._consumed = consumed
        self._limits = limits
        self._name = name
        self._stop = stop
        self._diff_id = diff_id
        algo = diff_id.partition(":")[0] if diff_id else "sha256"
        self._hash = hashlib.new(algo) if (hash_it or diff_id) else None
        self._errors = _decoder_errors()
        self.count = 0
        self.ended = False

    def readable(self) -> bool:
        return True

    @property
    def digest(self) -> str | None:
        """The uncompressed digest (the diff_id), once the end was reached and if hashed."""
        if self._hash is None or not self.ended:
            return None
        return f"{self._hash.name}:{self._hash.hexdigest()}"

    def readinto(self, b: Any) -> int:
        if self.ended:
            return 0
        check_stop(self._stop)
        try:
            n = int(cast(io.RawIOBase, self._inner).readinto(b) or 0)
        except self._errors as e:
            raise InputError(f"{self._name}: the compressed data is corrupt: {e}",
                             hint=CORRUPT_HINT) from e
        if not n:
            self.ended = True
            self._verify()
            return 0
        if self._hash is not None:
            self._hash.update(memoryview(b)[:n])
        self.count += n
        self._limits.check(self.count, self._consumed(), self._name)
        return n

    def _verify(self) -> None:
        if self._diff_id and self.digest != self._diff_id:
            raise InputError(f"{self._name}: the uncompressed layer does not match its diff_id "
                             f"{self._diff_id} (it hashes to {self.digest})", hint=CORRUPT_HINT)

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):
                self._inner.close()
        super().close()


class LayerStream(io.BufferedReader):
    """The uncompressed tar bytes of one layer, and what the pass measured.

    After the ``layer_stream`` block: ``compressed_size`` (blob bytes read), ``size``
    (uncompressed bytes), ``diff_id`` (when hashed) and ``verified`` (the blob's digest, size
    and, when given, diff_id were checked)."""

    def __init__(self, capped: _Capped, blob: BlobReader, compression: str) -> None:
        super().__init__(capped, CHUNK)
        self._capped = capped
        self._blob = blob
        self.compression = compression

    @property
    def compressed_size(self) -> int:
        return self._blob.count

    @property
    def size(self) -> int:
        return self._capped.count

    @property
    def diff_id(self) -> str | None:
        return self._capped.digest

    @property
    def verified(self) -> bool:
        return self._blob.verified and self._capped.ended

    def finish(self) -> None:
        """Read what is left (the tar's padding, trailing frames) so that every check runs."""
        drain(self)
        drain(self._blob)


@contextlib.contextmanager
def layer_stream(raw: Readable, *, limits: Limits | None = None, name: str = "a layer",
                 stop: threading.Event | None = None, diff_id: str | None = None,
                 hash_uncompressed: bool = False) -> Iterator[LayerStream]:
    """The uncompressed tar bytes of a layer blob (gzip, zstd or plain, by magic bytes).

    *raw* is best a :class:`BlobReader` (then the blob's digest and size are verified); any
    other stream is only counted. When the block ends without an exception the rest of the
    layer is read, so the blob (and *diff_id*, when given) are verified before it returns."""
    blob = raw if isinstance(raw, BlobReader) else BlobReader(raw, None, size=None, name=name,
                                                               stop=stop)
    buffered = io.BufferedReader(blob, CHUNK)
    try:
        kind = compression_of(buffered.peek(4)[:4])
        inner: IO[bytes] | io.RawIOBase = buffered
        if kind == "gzip":
            inner = _Gunzip(buffered)
        elif kind == "zstd":
            inner = _zstd_reader(buffered)
        capped = _Capped(inner, lambda: blob.count, limits=limits or Limits.from_env(),
                         name=name, stop=stop, diff_id=diff_id, hash_it=hash_uncompressed)
    except BaseException:
        buffered.close()
        raise
    out = LayerStream(capped, blob, kind)
    try:
        yield out
        out.finish()
    finally:
        out.close()
        buffered.close()


def uncompressed_size(raw: Readable, *, limits: Limits | None = None,
                      name: str = "a layer") -> int:
    """Bytes of the uncompressed tar in a layer blob, counted by streaming (nothing stored)."""
    with layer_stream(raw, limits=limits, name=name) as s:
        drain(s)
    return s.size


_BLOB_PATH = re.compile(r"(?:\./)?blobs/(sha256|sha512)/([a-f0-9]+)")


def digest_of_path(member: str) -> str | None:
    """``sha256:<hex>`` for an OCI layout path ``blobs/sha256/<hex>``, else None."""
    from servelab.image.ref import is_digest

    m = _BLOB_PATH.fullmatch(member)
    digest = f"{m.group(1)}:{m.group(2)}" if m else None
    return digest if digest and is_digest(digest) else None


@contextlib.contextmanager
def member_layer(fileobj: Readable, member: str, size: int | None, *,
                 limits: Limits | None = None) -> Iterator[LayerStream]:
    """:func:`layer_stream` of a layer stored as member *member* of an image archive: verified
    against the digest its name carries (``blobs/sha256/<hex>``) and its member size."""
    blob = BlobReader(fileobj, digest_of_path(member), size=size, name=member)
    with layer_stream(blob, limits=limits, name=member) as data:
        yield data
