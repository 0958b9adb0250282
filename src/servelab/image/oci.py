"""Read OCI images from an archive, a layout directory, the engine or a registry.

API::

    with open_image("out/image.oci.tar") as img:     # or a layout dir, or an image ref
        for pm in img.platform_manifests():           # per-platform manifests, attestations skipped
            cfg = img.read_json(pm.config.digest)
            with img.open_blob(pm.layers[0].digest) as raw, layer_stream(raw) as tar_bytes:
                ...                                   # a decompressed tar stream, never on disk

Sources (``open_image(text)``; an explicit prefix wins over guessing):

* ``oci-archive:PATH`` or a file: a tar of an OCI layout (``docker buildx build --output
  type=oci``, and ``docker save`` of Docker 25+, which writes an OCI layout too);
* ``oci:PATH`` or a directory: an OCI image layout;
* ``docker-daemon:REF``: an image in the local engine, read by ``docker save -o`` into a
  temporary archive (removed on close): the engine has no API to stream one blob;
* ``docker://REF`` or any other reference: the engine when it has the image, else the registry
  (OCI distribution API, see :mod:`servelab.image.registry`), whose blobs are streamed over HTTP.

JSON blobs (indexes, manifests, configs) are size-capped and checked against their digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from servelab.errors import CapabilityError, InputError
from servelab.image.ref import check_digest

MAX_JSON_BYTES = 16 * 1024 * 1024
CHUNK = 1024 * 1024

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    annotations: dict[str, str] = field(default_factory=dict)
    platform: dict[str, Any] | None = None

    @classmethod
    def parse(cls, d: Any, where: str) -> Descriptor:
        if not isinstance(d, dict) or not isinstance(d.get("digest"), str):
            raise InputError(f"{where}: a descriptor without a digest", hint="is it an OCI image?")
        check_digest(d["digest"], where)
        ann = d.get("annotations")
        plat = d.get("platform")
        return cls(str(d.get("mediaType", "")), d["digest"], int(d.get("size", 0)),
                   {str(k): str(v) for k, v in ann.items()} if isinstance(ann, dict) else {},
                   plat if isinstance(plat, dict) else None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"media_type": self.media_type, "digest": self.digest,
                               "size": self.size}
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


def platform_text(p: dict[str, Any] | None) -> str:
    if not p:
        return "unknown"
    out = f"{p.get('os', 'unknown')}/{p.get('architecture', 'unknown')}"
    return out + (f"/{p['variant']}" if p.get("variant") else "")


@dataclass
class PlatformManifest:
    """One image manifest (one platform) and where it hangs in the index tree."""

    descriptor: Descriptor
    platform: str
    manifest: dict[str, Any]
    config: Descriptor
    layers: list[Descriptor]
    #: digests of the indexes above this manifest, outermost first
    parents: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return self.descriptor.digest


def _is_attestation(d: Descriptor) -> bool:
    return (d.annotations.get("vnd.docker.reference.type") == "attestation-manifest"
            or platform_text(d.platform) == "unknown/unknown")


class ImageSource:
    """Base class of the readers: subclasses provide the top index and blob access."""

    name: str

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        """(descriptor of the top document or None for a layout's index.json, its JSON)."""
        raise NotImplementedError

    def _open(self, digest: str) -> BinaryIO:
        raise NotImplementedError

    def close(self) -> None:
        """Release files and temporary copies."""

    def __enter__(self) -> ImageSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_blob(self, digest: str) -> BinaryIO:
        """A stream of the blob's bytes (the caller closes it)."""
        check_digest(digest)
        return self._open(digest)

    def read_blob(self, digest: str, limit: int = MAX_JSON_BYTES) -> bytes:
        with self.open_blob(digest) as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"{self.name}: blob {digest} is over {limit} bytes",
                             hint="a manifest or config this large is not an image")
        algo, _, hexd = digest.partition(":")
        if hashlib.new(algo, data).hexdigest() != hexd:
            raise InputError(f"{self.name}: blob {digest} does not match its digest",
                             hint="the image is corrupt or was modified; rebuild or re-pull it")
        return data

    def read_json(self, digest: str) -> dict[str, Any]:
        data = self.read_blob(digest)
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise InputError(f"{self.name}: blob {digest} is not JSON: {e}") from e
        if not isinstance(doc, dict):
            raise InputError(f"{self.name}: blob {digest} is not a JSON object")
        return doc

    def platform_manifests(self) -> list[PlatformManifest]:
        """Every image manifest under the top document, attestations left out."""
        desc, doc = self.top()
        out: list[PlatformManifest] = []
        self._walk(desc, doc, [], out, depth=0)
        if not out:
            raise InputError(f"{self.name}: no image manifest found",
                             hint="pass an OCI image (index.json with a manifest)")
        return out

    def _walk(self, desc: Descriptor | None, doc: dict[str, Any], parents: list[str],
              out: list[PlatformManifest], depth: int) -> None:
        if depth > 4:
            raise InputError(f"{self.name}: indexes nested too deeply")
        if _doc_is_index(doc, desc):
            here = parents + ([desc.digest] if desc else [])
            for i, raw in enumerate(doc.get("manifests", [])):
                child = Descriptor.parse(raw, f"{self.name}: manifests[{i}]")
                if _is_attestation(child):
                    continue
                self._walk(child, self.read_json(child.digest), here, out, depth + 1)
            return
        if desc is None:
            raise InputError(f"{self.name}: index.json is not an index")
        pm = _platform_manifest(self.name, desc, doc, parents)
        if desc.platform is None:  # docker save leaves it out: the config says it
            cfg = self.read_json(pm.config.digest)
            pm.platform = platform_text({k: cfg.get(k) for k in ("os", "architecture", "variant")})
        out.append(pm)


def _doc_is_index(doc: dict[str, Any], desc: Descriptor | None) -> bool:
    mt = doc.get("mediaType") or (desc.media_type if desc else "")
    return mt in INDEX_TYPES or ("manifests" in doc and "layers" not in doc)


def _platform_manifest(name: str, desc: Descriptor, doc: dict[str, Any],
                       parents: list[str]) -> PlatformManifest:
    if "config" not in doc or not isinstance(doc.get("layers"), list):
        raise InputError(f"{name}: {desc.digest} is not an image manifest")
    config = Descriptor.parse(doc["config"], f"{name}: config")
    layers = [Descriptor.parse(x, f"{name}: layers[{i}]") for i, x in enumerate(doc["layers"])]
    return PlatformManifest(desc, platform_text(desc.platform), doc, config, layers, parents)


# ---------------------------------------------------------------------------- archives, dirs


class _Slice(io.RawIOBase):
    """A read-only window on a file: one blob inside an uncompressed tar."""

    def __init__(self, path: Path, offset: int, size: int) -> None:
        self._f = path.open("rb")
        self._f.seek(offset)
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(b)[: min(len(b), self._left)]
        n = self._f.readinto(view)
        self._left -= n or 0
        return n or 0

    def close(self) -> None:
        self._f.close()
        super().close()


def _bad_layout(name: str, what: str) -> InputError:
    return InputError(f"{name}: {what}",
                      hint="pass an OCI archive (docker buildx build --output type=oci), an "
                      "OCI layout directory, or an image reference")


class OciArchive(ImageSource):
    """A tar holding an OCI layout. Blobs are read in place (one file handle per stream)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self._members: dict[str, tarfile.TarInfo] = {}
        try:
            with tarfile.open(path, "r:") as tf:
                for m in tf:
                    self._members[m.name.removeprefix("./")] = m
        except (tarfile.TarError, OSError) as e:
            raise _bad_layout(self.name, f"not a readable tar archive ({e})") from e

    def _member(self, name: str) -> tarfile.TarInfo:
        m = self._members.get(name)
        if m is None or not m.isfile():
            raise _bad_layout(self.name, f"{name} is missing from the archive")
        return m

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        m = self._member("index.json")
        with _Slice(self.path, m.offset_data, m.size) as f:
            data = f.read(MAX_JSON_BYTES)
        return None, _parse_index(self.name, data)

    def _open(self, digest: str) -> BinaryIO:
        algo, _, hexd = digest.partition(":")
        m = self._member(f"blobs/{algo}/{hexd}")
        return io.BufferedReader(_Slice(self.path, m.offset_data, m.size), CHUNK)


class OciLayout(ImageSource):
    """An OCI image layout directory (index.json, blobs/<algo>/<hex>)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        if not (path / "index.json").is_file():
            raise _bad_layout(self.name, "no index.json in this directory")

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        data = (self.path / "index.json").read_bytes()[:MAX_JSON_BYTES]
        return None, _parse_index(self.name, data)

    def _open(self, digest: str) -> BinaryIO:
        algo, _, hexd = digest.partition(":")
        p = self.path / "blobs" / algo / hexd
        try:
            return p.open("rb")
        except OSError as e:
            raise _bad_layout(self.name, f"blob {digest} is missing") from e


def _parse_index(name: str, data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise _bad_layout(name, f"index.json is not JSON ({e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("manifests"), list):
        raise _bad_layout(name, "index.json has no manifests list")
    return doc


class EngineImage(OciArchive):
    """An image in the local engine, saved with ``docker save -o`` into a temporary dir."""

    def __init__(self, ref: str) -> None:
        from servelab import proc

        self._tmp = Path(tempfile.mkdtemp(prefix="servelab-save-"))
        dest = self._tmp / "image.tar"
        try:
            proc.run(["docker", "save", "-o", str(dest), ref], timeout=1800,
                     hint="check the image exists: docker image inspect " + ref)
            super().__init__(dest)
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self.name = f"docker-daemon:{ref}"

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)


class RegistryImage(ImageSource):
    """An image in a registry; blobs are streamed over HTTP."""

    def __init__(self, ref: str) -> None:
        from servelab.image.ref import ImageRef
        from servelab.image.registry import RegistryClient

        self.ref = ImageRef.parse(ref)
        self.name = str(self.ref)
        self._client = RegistryClient()
        got = self._client.get_manifest(self.ref)
        self._top = Descriptor(got.media_type, got.digest, len(got.body))
        try:
            self._doc = json.loads(got.body)
        except ValueError as e:
            raise InputError(f"{self.name}: the manifest is not JSON ({e})") from e

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        return self._top, self._doc

    def _open(self, digest: str) -> BinaryIO:
        return self._client.open_blob(self.ref, digest)


def _engine_has(ref: str) -> bool:
    from servelab import proc
    from servelab.errors import ServelabError

    try:
        res = proc.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                       check=False, timeout=60)
    except ServelabError:
        return False
    return res.returncode == 0


def open_image(text: str) -> ImageSource:
    """The reader for *text*: see the module docstring for the accepted forms."""
    for prefix, cls in (("oci-archive:", OciArchive), ("oci:", OciLayout)):
        if text.startswith(prefix):
            return cls(Path(text[len(prefix):]))
    if text.startswith("docker-daemon:"):
        return EngineImage(text[len("docker-daemon:"):])
    if text.startswith("docker://"):
        return RegistryImage(text[len("docker://"):])
    p = Path(text)
    if p.is_dir():
        return OciLayout(p)
    if p.is_file():
        return OciArchive(p)
    if "/" in text and (text.startswith((".", "/")) or text.endswith(".tar")):
        raise InputError(f"{text}: no such file or directory", hint="check the path")
    if _engine_has(text):
        return EngineImage(text)
    return RegistryImage(text)


# ---------------------------------------------------------------------------- layer streams

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class _Gunzip(io.RawIOBase):
    """Streaming gzip decompression, multi-member aware (eStargz layers have many members)."""

    def __init__(self, raw: IO[bytes]) -> None:
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
                    raise InputError("a gzip layer ends early (truncated blob)")
                self._eof = True
                return
            self._mid_member = True
            self._buf = self._d.decompress(data, max(want, CHUNK))
            if self._d.eof:
                self._pending = self._d.unused_data
                self._d = zlib.decompressobj(wbits=31)
                self._mid_member = False

    def readinto(self, b: Any) -> int:
        try:
            self._fill(len(b))
        except zlib.error as e:
            raise InputError(f"a gzip layer is corrupt: {e}") from e
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def compression_of(head: bytes) -> str:
    """'gzip', 'zstd' or 'none' from the first bytes of a layer blob."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return "none"


def _zstd_reader(raw: IO[bytes]) -> BinaryIO:
    try:
        import zstandard
    except ImportError as e:
        raise CapabilityError(
            "this layer is zstd-compressed and the zstandard module is not installed",
            hint="pip install zstandard (servelab's dependency for zstd layers)",
        ) from e
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return cast(BinaryIO, io.BufferedReader(cast(io.RawIOBase, reader), CHUNK))


def _peekable(raw: BinaryIO) -> io.BufferedReader:
    if isinstance(raw, io.BufferedReader):
        return raw
    return io.BufferedReader(cast(io.RawIOBase, raw), CHUNK)


@contextlib.contextmanager
def layer_stream(raw: BinaryIO) -> Iterator[BinaryIO]:
    """The uncompressed tar bytes of a layer blob (gzip, zstd or plain, by magic bytes)."""
    buffered = _peekable(raw)
    kind = compression_of(buffered.peek(4)[:4])
    if kind == "gzip":
        out = cast(BinaryIO, io.BufferedReader(_Gunzip(buffered), CHUNK))
    elif kind == "zstd":
        out = _zstd_reader(buffered)
    else:
        out = cast(BinaryIO, buffered)
    try:
        yield out
    finally:
        out.close()


def uncompressed_size(raw: BinaryIO) -> int:
    """Bytes of the uncompressed tar in a layer blob, counted by streaming (nothing stored)."""
    total = 0
    buf = bytearray(CHUNK)
    with layer_stream(raw) as s:
        while True:
            n = cast(io.BufferedReader, s).readinto(buf)
            if not n:
                return total
            total += n
