"""Read OCI images from an archive, a layout directory, the engine or a registry, verified.

API::

    with open_image("out/image.oci.tar") as img:     # or a layout dir, or an image ref
        for pm in img.platform_manifests():           # per-platform manifests, attestations skipped
            cfg = img.read_config(pm.config)          # checked JSON (types of the fields used)
            with img.open_layer(pm.layers[0], stop=event) as tar_bytes:
                ...                                   # a decompressed tar stream, never on disk
            tar_bytes.size, tar_bytes.compressed_size # what the one pass measured

Sources (``open_image(text)``; an explicit prefix wins over guessing):

* ``oci-archive:PATH`` or a file: a tar of an OCI layout (``docker buildx build --output
  type=oci``, and ``docker save`` of Docker 25+, which writes an OCI layout too);
* ``oci:PATH`` or a directory: an OCI image layout;
* ``docker-daemon:REF``: an image in the local engine, read by ``docker save -o`` into a
  temporary archive (removed on close): the engine has no API to stream one blob;
* ``docker://REF`` or any other reference: the engine when it has the image, else the registry
  (OCI distribution API, see :mod:`servelab.image.registry`), whose blobs are streamed over HTTP.

Text that looks like a path (see :func:`looks_like_path`) is never taken for a reference: a
missing file is "no such file" (exit 2), never a question to the engine or a registry.

Trust: every blob (index, manifest, config, layer) is read through
:class:`servelab.image.blob.BlobReader`: counted against the size its descriptor declares and
hashed while it streams; a mismatch or a truncation is an InputError naming the blob. Layers
are decompressed with the caps of :class:`servelab.image.blob.Limits`. Descriptors, manifests
and configs with wrong-typed fields are InputErrors (exit 2). Files of a layout or archive are
opened only when they are regular files (a FIFO or device is refused, never waited on).
Limits: JSON blobs up to 16 MiB, up to 1000 manifests under one index and 1000 layers in one
manifest (engines refuse far fewer).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from servelab.errors import CapabilityError, InputError, ServelabError
from servelab.image.blob import (
    CHUNK,
    GZIP_MAGIC,
    ZSTD_MAGIC,
    BlobReader,
    LayerStream,
    Limits,
    compression_of,
    layer_stream,
    open_regular,
    path_kind,
    read_all,
    uncompressed_size,
)
from servelab.image.ref import ImageRef, check_digest, is_digest

__all__ = [
    "CHUNK", "GZIP_MAGIC", "INDEX_TYPES", "MANIFEST_TYPES", "OCI_INDEX", "OCI_MANIFEST",
    "ZSTD_MAGIC", "Descriptor", "EngineImage", "ImageSource", "OciArchive", "OciLayout",
    "PlatformManifest", "RegistryImage", "check_config", "compression_of", "engine_has",
    "layer_stream", "looks_like_path", "open_image", "platform_text", "uncompressed_size",
]

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_MANIFESTS = 1000
MAX_LAYERS = 1000

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".oci")


def _show(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=True, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _wrong(where: str, key: str, want: str, got: Any) -> InputError:
    return InputError(f"{where}: {key} must be {want} (got {_show(got)})",
                      hint="the image's JSON is corrupt or not an OCI image")


def _str_map(v: Any, where: str, key: str) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        raise _wrong(where, key, "an object of strings", v)
    return dict(v)


def _opt_str(doc: dict[str, Any], key: str, where: str) -> None:
    if doc.get(key) is not None and not isinstance(doc[key], str):
        raise _wrong(where, key, "a string", doc[key])


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    annotations: dict[str, str] = field(default_factory=dict)
    platform: dict[str, Any] | None = None

    @classmethod
    def parse(cls, d: Any, where: str) -> Descriptor:
        """A descriptor from JSON; InputError for a missing or wrong-typed field."""
        if not isinstance(d, dict) or not isinstance(d.get("digest"), str):
            raise InputError(f"{where}: a descriptor without a digest", hint="is it an OCI image?")
        check_digest(d["digest"], where)
        size = d.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise _wrong(where, "size", "a non-negative integer", size)
        _opt_str(d, "mediaType", where)
        plat = d.get("platform")
        if plat is not None:
            if not isinstance(plat, dict):
                raise _wrong(where, "platform", "an object", plat)
            for key in ("os", "architecture", "variant"):
                _opt_str(plat, key, f"{where}: platform")
        return cls(d.get("mediaType") or "", d["digest"], size,
                   _str_map(d.get("annotations"), where, "annotations"), plat)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"media_type": self.media_type, "digest": self.digest,
                               "size": self.size}
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


def platform_text(p: dict[str, Any] | None) -> str:
    if not p:
        return "unknown"
    out = f"{p.get('os') or 'unknown'}/{p.get('architecture') or 'unknown'}"
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


def check_config(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """*doc* when the image-config fields servelab reads have the right types (InputError
    naming the field otherwise)."""
    for key in ("os", "architecture", "variant", "created", "author"):
        _opt_str(doc, key, where)
    if doc.get("config") is not None and not isinstance(doc["config"], dict):
        raise _wrong(where, "config", "an object", doc["config"])
    rootfs = doc.get("rootfs")
    if rootfs is not None:
        if not isinstance(rootfs, dict):
            raise _wrong(where, "rootfs", "an object", rootfs)
        ids = rootfs.get("diff_ids")
        if ids is not None and not (isinstance(ids, list)
                                    and all(isinstance(x, str) and is_digest(x) for x in ids)):
            raise _wrong(where, "rootfs.diff_ids", "a list of digests", ids)
    history = doc.get("history")
    if history is not None:
        if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
            raise _wrong(where, "history", "a list of objects", history)
        for i, h in enumerate(history):
            for key in ("created", "created_by", "comment", "author"):
                _opt_str(h, key, f"{where}: history[{i}]")
    return doc


class ImageSource:
    """Base class of the readers: subclasses provide the top index and raw blob access."""

    name: str
    #: the error class for a blob that cannot be read (a registry's is exit 3)
    read_error: type[ServelabError] = InputError

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        """(descriptor of the top document or None for a layout's index.json, its JSON)."""
        raise NotImplementedError

    def _open(self, digest: str) -> IO[bytes] | io.RawIOBase:
        raise NotImplementedError

    def close(self) -> None:
        """Release files and temporary copies."""

    def __enter__(self) -> ImageSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_blob(self, blob: str | Descriptor, *,
                  stop: threading.Event | None = None) -> BlobReader:
        """A verified stream of the blob (a digest, or a descriptor whose size is checked
        too); the caller closes it. The checks run when its end is read."""
        digest, size = (blob, None) if isinstance(blob, str) else (blob.digest, blob.size)
        check_digest(digest, self.name)
        return BlobReader(self._open(digest), digest, size=size, name=self.name, stop=stop,
                          read_error=self.read_error)

    def read_blob(self, blob: str | Descriptor, limit: int = MAX_JSON_BYTES) -> bytes:
        """The whole blob, verified; InputError when it is over *limit* bytes."""
        if isinstance(blob, Descriptor) and blob.size > limit:
            raise InputError(f"{self.name}: blob {blob.digest} declares {blob.size} bytes, "
                             f"over the {limit} allowed",
                             hint="a manifest or config this large is not an image")
        with self.open_blob(blob) as f:
            digest = blob if isinstance(blob, str) else blob.digest
            return read_all(f, limit, f"{self.name}: blob {digest}")

    def read_json(self, blob: str | Descriptor) -> dict[str, Any]:
        data = self.read_blob(blob)
        digest = blob if isinstance(blob, str) else blob.digest
        return parse_object(data, f"{self.name}: blob {digest}")

    def read_config(self, blob: str | Descriptor) -> dict[str, Any]:
        """An image config, its fields' types checked (see :func:`check_config`)."""
        digest = blob if isinstance(blob, str) else blob.digest
        return check_config(self.read_json(blob), f"{self.name}: config {digest}")

    @contextlib.contextmanager
    def open_layer(self, layer: Descriptor, *, limits: Limits | None = None,
                   stop: threading.Event | None = None, diff_id: str | None = None,
                   hash_uncompressed: bool = False) -> Iterator[LayerStream]:
        """The layer's uncompressed tar, verified (digest, declared size, and *diff_id* when
        given) and capped (*limits*, default :meth:`Limits.from_env`)."""
        name = f"{self.name}: layer {layer.digest}"
        with self.open_blob(layer, stop=stop) as blob, \
                layer_stream(blob, limits=limits, name=name, stop=stop, diff_id=diff_id,
                             hash_uncompressed=hash_uncompressed) as data:
            yield data

    def platform_manifests(self) -> list[PlatformManifest]:
        """Every image manifest under the top document, attestations left out."""
        desc, doc = self.top()
        out: list[PlatformManifest] = []
        self._walk(desc, doc, [], out=out, depth=0, seen=[0])
        if not out:
            raise InputError(f"{self.name}: no image manifest found",
                             hint="pass an OCI image (index.json with a manifest)")
        return out

    def _walk(self, desc: Descriptor | None, doc: dict[str, Any], parents: list[str], *,
              out: list[PlatformManifest], depth: int, seen: list[int]) -> None:
        if depth > 4:
            raise InputError(f"{self.name}: indexes nested too deeply")
        where = f"{self.name}: {desc.digest if desc else 'index.json'}"
        _opt_str(doc, "mediaType", where)
        if _doc_is_index(doc, desc):
            here = parents + ([desc.digest] if desc else [])
            children = doc.get("manifests")
            if not isinstance(children, list):
                raise _wrong(where, "manifests", "a list", children)
            seen[0] += len(children)
            if seen[0] > MAX_MANIFESTS:
                raise InputError(f"{self.name}: more than {MAX_MANIFESTS} manifests",
                                 hint="no real image has that many platforms")
            for i, raw in enumerate(children):
                child = Descriptor.parse(raw, f"{where}: manifests[{i}]")
                if _is_attestation(child):
                    continue
                self._walk(child, self.read_json(child), here, out=out, depth=depth + 1,
                           seen=seen)
            return
        if desc is None:
            raise InputError(f"{self.name}: index.json is not an index")
        pm = _platform_manifest(where, desc, doc, parents)
        if desc.platform is None:  # docker save leaves it out: the config says it
            cfg = self.read_config(pm.config)
            pm.platform = platform_text({k: cfg.get(k) for k in ("os", "architecture", "variant")})
        out.append(pm)


def parse_object(data: bytes, where: str) -> dict[str, Any]:
    """A JSON object from *data*; InputError (never a crash) for anything else."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{where} is not JSON: {str(e)[:200]}",
                         hint="the image is corrupt or not an OCI image") from e
    if not isinstance(doc, dict):
        raise InputError(f"{where} is not a JSON object",
                         hint="the image is corrupt or not an OCI image")
    return doc


def _doc_is_index(doc: dict[str, Any], desc: Descriptor | None) -> bool:
    mt = doc.get("mediaType") or (desc.media_type if desc else "")
    return mt in INDEX_TYPES or ("manifests" in doc and "layers" not in doc)


def _platform_manifest(where: str, desc: Descriptor, doc: dict[str, Any],
                       parents: list[str]) -> PlatformManifest:
    if "config" not in doc or not isinstance(doc.get("layers"), list):
        raise InputError(f"{where}: not an image manifest (no config or layers list)")
    if len(doc["layers"]) > MAX_LAYERS:
        raise InputError(f"{where}: more than {MAX_LAYERS} layers",
                         hint="no engine runs an image with that many layers")
    _str_map(doc.get("annotations"), where, "annotations")
    config = Descriptor.parse(doc["config"], f"{where}: config")
    layers = [Descriptor.parse(x, f"{where}: layers[{i}]") for i, x in enumerate(doc["layers"])]
    return PlatformManifest(desc, platform_text(desc.platform), doc, config, layers, parents)


# ---------------------------------------------------------------------------- archives, dirs


class _Slice(io.RawIOBase):
    """A read-only window on a file: one blob inside an uncompressed tar."""

    def __init__(self, f: BinaryIO, offset: int, size: int) -> None:
        super().__init__()
        self._f = f
        self._f.seek(offset)
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(b)[: min(len(b), self._left)]
        n = self._f.readinto(view)  # type: ignore[attr-defined]
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
        with open_regular(path, "the archive", self.name) as f:
            try:
                with tarfile.open(fileobj=f, mode="r:") as tf:
                    for m in tf:
                        self._members[m.name.removeprefix("./")] = m
            except (tarfile.TarError, OSError, EOFError, ValueError) as e:
                raise _bad_layout(self.name, f"not a readable tar archive ({e})") from e

    def _member(self, name: str) -> tarfile.TarInfo:
        m = self._members.get(name)
        if m is None or not m.isfile():
            raise _bad_layout(self.name, f"{name} is missing from the archive")
        if m.issparse():
            raise _bad_layout(self.name, f"{name} is a sparse member (not an OCI archive)")
        return m

    def _slice(self, m: tarfile.TarInfo) -> _Slice:
        return _Slice(open_regular(self.path, "the archive", self.name), m.offset_data, m.size)

    def open_member(self, name: str, digest: str | None = None) -> BlobReader:
        """A verified stream of member *name*: counted against its size in the archive and,
        when *digest* is given, hashed against it. A symbolic link inside the archive (docker
        save links a layer two images share) is followed, never out of the archive."""
        target = self._resolve(name)
        if target != name and target not in self._members:
            raise _bad_layout(self.name, f"{name} is a symbolic link to {target}, which is "
                              "missing from the archive")
        m = self._member(target)
        return BlobReader(self._slice(m), digest, size=m.size, name=f"{self.name}: {name}")

    def _resolve(self, name: str) -> str:
        import posixpath

        for _ in range(8):
            m = self._members.get(name)
            if m is None or not m.issym():
                return name
            name = posixpath.normpath(posixpath.join(posixpath.dirname(name), m.linkname))
        raise _bad_layout(self.name, f"{name}: more than 8 symbolic links in a row")

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        with self._slice(self._member("index.json")) as f:
            data = read_all(f, MAX_JSON_BYTES, f"{self.name}: index.json")
        return None, _parse_index(self.name, data)

    def _open(self, digest: str) -> IO[bytes] | io.RawIOBase:
        algo, _, hexd = digest.partition(":")
        return self._slice(self._member(f"blobs/{algo}/{hexd}"))


class OciLayout(ImageSource):
    """An OCI image layout directory (index.json, blobs/<algo>/<hex>)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        if path_kind(str(path / "index.json")) is None:
            raise _bad_layout(self.name, "no index.json in this directory")

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        with open_regular(self.path / "index.json", "index.json", self.name) as f:
            data = read_all(f, MAX_JSON_BYTES, f"{self.name}: index.json")
        return None, _parse_index(self.name, data)

    def _open(self, digest: str) -> IO[bytes]:
        algo, _, hexd = digest.partition(":")
        return open_regular(self.path / "blobs" / algo / hexd, f"blob {digest}", self.name)


def _parse_index(name: str, data: bytes) -> dict[str, Any]:
    doc = parse_object(data, f"{name}: index.json")
    if not isinstance(doc.get("manifests"), list):
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

    read_error = CapabilityError

    def __init__(self, ref: str) -> None:
        from servelab.image.registry import RegistryClient

        self.ref = ImageRef.parse(ref)
        self.name = str(self.ref)
        self._client = RegistryClient()
        got = self._client.get_manifest(self.ref)
        self._top = Descriptor(got.media_type, got.digest, len(got.body))
        self._doc = parse_object(got.body, f"{self.name}: the manifest")

    def top(self) -> tuple[Descriptor | None, dict[str, Any]]:
        return self._top, self._doc

    def _open(self, digest: str) -> IO[bytes]:
        return self._client.open_blob(self.ref, digest)


def engine_has(ref: str) -> bool:
    """Whether the local engine holds *ref* (an engine that never answers is exit 3)."""
    from servelab import proc
    from servelab.errors import CommandError

    seconds = proc.deadline(proc.ENGINE_TIMEOUT_ENV, proc.ENGINE_TIMEOUT_S)
    try:
        res = proc.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                       check=False, timeout=seconds)
    except CommandError as e:
        if e.timed_out:  # an engine that never answers is not an engine without the image
            raise proc.engine_silent(seconds) from e
        return False
    except ServelabError:
        return False
    return res.returncode == 0


def looks_like_path(text: str) -> bool:
    """Whether *text* names a file rather than an image: an archive suffix (``.tar``, ...),
    a leading ``/``, ``.`` or ``~``, a directory part that exists here, or a ``/`` in text that
    is no image reference. Such text is never looked up in the engine or a registry."""
    if text.endswith(ARCHIVE_SUFFIXES) or text.startswith(("/", ".", "~")):
        return True
    if "/" not in text:
        return False
    if path_kind(str(Path(text).parent)) == "dir":
        return True
    try:
        ImageRef.parse(text)
    except InputError:
        return True
    return False


def open_image(text: str) -> ImageSource:
    """The reader for *text*: see the module docstring for the accepted forms."""
    for prefix, cls in (("oci-archive:", OciArchive), ("oci:", OciLayout)):
        if text.startswith(prefix):
            return cls(_existing(text[len(prefix):]))
    if text.startswith("docker-daemon:"):
        return EngineImage(text[len("docker-daemon:"):])
    if text.startswith("docker://"):
        return RegistryImage(text[len("docker://"):])
    kind = path_kind(text)
    if kind == "dir":
        return OciLayout(Path(text))
    if kind is not None:
        return OciArchive(_existing(text))
    if looks_like_path(text):
        _existing(text)
    if engine_has(text):
        return EngineImage(text)
    return RegistryImage(text)


def _existing(text: str) -> Path:
    """*text* as a path when a file or directory is there; InputError otherwise."""
    kind = path_kind(text)
    if kind is None:
        raise InputError(f"{text}: no such file or directory",
                         hint="check the path; an image reference is read from the engine or "
                         "a registry only when it does not look like a path (prefix it with "
                         "docker-daemon: or docker:// to say so)")
    if kind not in ("file", "dir"):
        raise InputError(f"{text} is {kind}, not a regular file",
                         hint="save the image to a file first (docker save -o FILE, or "
                         "buildx --output type=oci,dest=FILE)")
    return Path(text)
