"""Baked weights: files in an image's layers that look like model weights.

API: :func:`scan_image(client, image_id, model_files=...) -> WeightsReport`, or
:func:`scan_archive(oci_archive, model_files=...)` for an OCI archive the build wrote.

The image is streamed from the engine (``docker save``, read once, never written to disk), or
read from the OCI archive, and every layer's tar headers are read. What a layer holds is
cached by its digest (in memory, and on disk under ``~/.cache/servelab``), so a base layer
shared by many images and runs is read once. A file is reported when

* its extension is a weights format (.safetensors, .gguf, .onnx, .pt, .pth, .ckpt, ...) and it
  is at least :data:`STRONG_MIN_BYTES`; or
* its extension is a generic container of tensors (.bin, .pkl, .npz, .pb, ...) and it is at
  least :data:`WEAK_MIN_BYTES`; or
* it has the name and size of a file of the model the smoke test mounts (the model was copied
  into the image as well), whatever its size.

Each file comes with its size, its layer (index, digest, the instruction that made it from the
image's history) and whether a later layer deletes it (it still ships and is still pulled).
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import IO, Any

from servelab import logs
from servelab.errors import ServelabError
from servelab.image import listing
from servelab.image.blob import digest_of_path, member_layer
from servelab.textio import cache_dir, write_text_atomic

STRONG_EXT = frozenset({
    ".safetensors", ".gguf", ".ggml", ".ggmf", ".onnx", ".pt", ".pth", ".ckpt", ".h5",
    ".hdf5", ".keras", ".tflite", ".engine", ".plan", ".mlmodel", ".pdparams", ".nemo",
    ".mar", ".llamafile", ".caffemodel", ".weights",
})
WEAK_EXT = frozenset({
    ".bin", ".pkl", ".pickle", ".joblib", ".npy", ".npz", ".msgpack", ".params", ".pb",
    ".model", ".tar", ".zip",
})
STRONG_MIN_BYTES = 1 << 20
WEAK_MIN_BYTES = 10 << 20
_JSON_MAX = 8 << 20

_cache: dict[tuple[str, tuple[tuple[str, int], ...]], WeightsReport] = {}


@dataclass
class WeightFile:
    path: str
    size: int
    reason: str
    layer_index: int | None = None
    layer_digest: str | None = None
    created_by: str | None = None
    deleted_later: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "reason": self.reason,
            "layer": self.layer_index,
            "layer_digest": self.layer_digest,
            "created_by": self.created_by,
            "deleted_later": self.deleted_later,
        }


@dataclass
class WeightsReport:
    scanned: bool
    files: list[WeightFile] = field(default_factory=list)
    layers: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "files": [f.to_dict() for f in self.files],
            "total_bytes": self.total_bytes,
            "layers": self.layers,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


def classify(path: str, size: int, model_files: set[tuple[str, int]]) -> str | None:
    """Why *path* looks like model weights, or None."""
    name = path.rstrip("/").rsplit("/", 1)[-1]  # string work: a layer can list 100k files
    if (name, size) in model_files:
        return "same name and size as a file of the mounted model"
    dot = name.rfind(".")
    ext = name[dot:].lower() if 0 < dot < len(name) - 1 else ""  # PurePosixPath's suffix
    if ext in STRONG_EXT and size >= STRONG_MIN_BYTES:
        return f"weights format {ext}"
    if ext in WEAK_EXT and size >= WEAK_MIN_BYTES:
        return f"large {ext} file"
    return None


class _IterReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (the engine's export stream)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._it: Iterator[bytes] = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


@dataclass
class _Layer:
    candidates: list[WeightFile] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # paths; "dir/" = opaque directory


@dataclass
class _Archive:
    layers: dict[str, _Layer] = field(default_factory=dict)  # member name -> layer
    order: list[str] = field(default_factory=list)  # manifest.json "Layers"
    history: list[str | None] = field(default_factory=list)  # created_by per non-empty layer
    diff_ids: list[str] = field(default_factory=list)


def _add_entry(layer: _Layer, name: str, size: int | None,
               model_files: set[tuple[str, int]]) -> None:
    """One tar entry of a layer: a whiteout, or (*size* given) a regular file."""
    path = "/" + name.lstrip("./").lstrip("/")
    parent, _, base = path.rstrip("/").rpartition("/")
    if base == ".wh..wh..opq":
        layer.deleted.append(str(PurePosixPath(parent or "/")).rstrip("/") + "/")
    elif base.startswith(".wh."):
        layer.deleted.append(str(PurePosixPath(parent or "/") / base[4:]))
    elif size is not None:
        why = classify(path, size, model_files)
        if why:
            layer.candidates.append(WeightFile(path, size, why))


def _read_layer(fileobj: IO[bytes], model_files: set[tuple[str, int]]) -> _Layer | None:
    try:
        inner = tarfile.open(fileobj=fileobj, mode="r|*")  # noqa: SIM115 (stream)
    except (tarfile.TarError, OSError, EOFError):
        return None
    layer = _Layer()
    try:
        for m in inner:
            _add_entry(layer, m.name, m.size if m.isfile() else None, model_files)
    except (tarfile.TarError, OSError, EOFError):
        return layer if layer.candidates or layer.deleted else None
    return layer


def _listed_layer(member: str, model_files: set[tuple[str, int]]) -> _Layer | None:
    """The layer *member* (``blobs/sha256/<hex>``) from the listing the build's shaping pass
    made of the same verified bytes (:mod:`servelab.image.listing`), without reading it."""
    digest = digest_of_path(member)
    files = listing.recall(digest) if digest else None
    if files is None:
        return None
    layer = _Layer()
    for name in files.whiteouts:
        _add_entry(layer, name.rstrip("/"), None, model_files)
    for name, size in files.files:
        _add_entry(layer, name, size, model_files)
    return layer


def _read_json(fileobj: IO[bytes], archive: _Archive) -> None:
    try:
        doc = json.loads(fileobj.read(_JSON_MAX))
    except (ValueError, OSError):
        return
    if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "Layers" in doc[0]:
        archive.order = [str(x) for x in doc[0]["Layers"]]
    elif isinstance(doc, dict) and isinstance(doc.get("layers"), list) and "config" in doc:
        # an OCI image manifest: the layer order of an OCI archive
        archive.order = ["blobs/sha256/" + str(x.get("digest", "")).split(":")[-1]
                         for x in doc["layers"] if isinstance(x, dict)]
    elif isinstance(doc, dict) and "rootfs" in doc and "history" in doc:
        archive.history = [
            h.get("created_by") for h in doc.get("history") or [] if not h.get("empty_layer")
        ]
        archive.diff_ids = list((doc.get("rootfs") or {}).get("diff_ids") or [])


#: layers already read, by content-addressed member name and the model files looked for:
#: images that share their base (control and treatment) read its big layers once
_layer_cache: dict[tuple[str, tuple[tuple[str, int], ...]], _Layer] = {}


def _walk(stream: IO[bytes], model_files: set[tuple[str, int]], *,
          seekable: bool = False, shown: logs.Progress | None = None) -> _Archive:
    """Read an image archive; a seekable file skips cached layers without reading them. Each
    layer read is a step on *shown*."""
    archive = _Archive()
    known = tuple(sorted(model_files))
    with tarfile.open(fileobj=stream, mode="r:" if seekable else "r|") as outer:
        for m in outer:
            if not m.isfile():
                continue
            cached = _layer_cache.get((m.name, known)) if "sha256" in m.name else None
            if cached is not None:
                archive.layers[m.name] = cached  # its bytes are skipped unread
                continue
            listed = _listed_layer(m.name, model_files)
            if listed is not None:
                archive.layers[m.name] = _layer_cache[(m.name, known)] = listed
                continue
            f = outer.extractfile(m)
            if f is None:
                continue
            head = f.peek(1)[:1] if isinstance(f, io.BufferedReader) else b""
            if m.name.endswith(".json") or head in (b"{", b"["):
                _read_json(f, archive)
                continue
            if shown is not None:
                shown.step(f"layer {m.name.rpartition('/')[2][:12]} ({logs.size(m.size)})")
            with member_layer(f, m.name, m.size) as data:  # verified, decompression capped
                layer = _read_layer(data, model_files)
            if shown is not None:
                shown.advance(m.size)
            if layer is None:
                continue
            archive.layers[m.name] = layer
            if "sha256" in m.name:
                _layer_cache[(m.name, known)] = layer
    return archive


def _deleted_by(path: str, later: Iterable[_Layer]) -> bool:
    for layer in later:
        for d in layer.deleted:
            if path == d or (d.endswith("/") and path.startswith(d)) or path.startswith(d + "/"):
                return True
    return False


def _assemble(archive: _Archive) -> list[WeightFile]:
    names = archive.order or list(archive.layers)
    layers = [archive.layers.get(n, _Layer()) for n in names]
    out: list[WeightFile] = []
    for i, (name, layer) in enumerate(zip(names, layers, strict=True)):
        for cached in layer.candidates:
            wf = replace(cached)  # layers are cached and shared between images: copy
            wf.layer_index = i
            wf.layer_digest = (archive.diff_ids[i] if i < len(archive.diff_ids)
                               else "sha256:" + PurePosixPath(name).name.split(".")[0])
            wf.created_by = archive.history[i] if i < len(archive.history) else None
            wf.deleted_later = _deleted_by(wf.path, layers[i + 1:])
            out.append(wf)
    return out


def _cache_file() -> Path:
    return cache_dir() / "weights-layers.json"


def _load_disk_cache() -> None:
    try:
        doc = json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return
    for key, value in (doc if isinstance(doc, dict) else {}).items():
        name, _, known = key.partition("|")
        try:
            files = tuple((str(a), int(b)) for a, b in json.loads(known))
            layer = _Layer([WeightFile(str(c["path"]), int(c["size"]), str(c["reason"]))
                            for c in value.get("candidates", [])],
                           [str(d) for d in value.get("deleted", [])])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        _layer_cache.setdefault((name, files), layer)


def _save_disk_cache() -> None:
    doc = {f"{name}|{json.dumps(list(known))}": {
        "candidates": [{"path": c.path, "size": c.size, "reason": c.reason}
                       for c in layer.candidates],
        "deleted": layer.deleted} for (name, known), layer in _layer_cache.items()}
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(doc))
    except (OSError, ServelabError):
        pass  # a cache that cannot be written (a full disk, too) only costs time


def scan_archive(
    archive_path: Path, *, model_files: Iterable[tuple[str, int]] = ()
) -> WeightsReport:
    """Report files that look like model weights in an OCI archive (a tar, e.g. from buildx)."""
    known = set(model_files)
    start = time.monotonic()
    if not _layer_cache:
        _load_disk_cache()
    try:
        with archive_path.open("rb") as f, logs.progress("weights scan", quiet=True) as shown:
            archive = _walk(f, known, seekable=True, shown=shown)
    except (OSError, tarfile.TarError, ServelabError) as e:
        return WeightsReport(False, error=f"cannot read {archive_path}: {e}",
                             seconds=time.monotonic() - start)
    _save_disk_cache()
    return WeightsReport(True, _assemble(archive), len(archive.order or archive.layers),
                         time.monotonic() - start)


def scan_image(
    client: Any, image_id: str, *, model_files: Iterable[tuple[str, int]] = ()
) -> WeightsReport:
    """Stream *image_id* from the engine and report files that look like model weights."""
    known = set(model_files)
    key = (image_id, tuple(sorted(known)))
    if key in _cache:
        return _cache[key]
    start = time.monotonic()
    try:
        raw = _IterReader(client.api.get_image(image_id, chunk_size=1 << 20))
        with logs.progress("weights scan", quiet=True) as shown:
            archive = _walk(io.BufferedReader(raw, 1 << 20), known, shown=shown)
    except Exception as e:
        return WeightsReport(False, error=f"image export failed: {str(e).splitlines()[0][:200]}",
                             seconds=time.monotonic() - start)
    report = WeightsReport(True, _assemble(archive), len(archive.order or archive.layers),
                           time.monotonic() - start)
    _cache[key] = report
    return report
