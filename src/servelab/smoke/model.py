"""The model the smoke stage mounts: where it is, how it is mounted, and its sha256.

API: :func:`model_info(model, client) -> ModelInfo` and :func:`digest_path(path)`.

The sha256 of a file is the sha256 of its bytes. The sha256 of a directory is the sha256 of
its manifest: one line ``<sha256 hex>  <relative path>\\n`` per regular file (symlinks to files
followed), sorted by relative path (``/``-separated, byte order), the same as::

    cd DIR && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum

A named volume is hashed from its mount point on the host when this process can read it (a
local volume, as root); otherwise the sha256 is not recorded and a note says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from servelab.errors import InputError
from servelab.hashing import TreeTooLarge, manifest_digest, sha256_file, tree_files
from servelab.spec import Model
from servelab.textio import Limit


@dataclass(frozen=True)
class ModelFile:
    relpath: str
    size: int
    sha256: str


@dataclass
class ModelInfo:
    """The mounted model and what was measured about it."""

    source: str
    kind: str  # "file", "dir" or "volume"
    mount_source: str  # host path or volume name given to the engine
    mount_target: str  # where it appears in the container
    mount_path: str  # the spec's mountPath (the directory the server reads)
    expected_sha256: str | None
    sha256: str | None = None
    files: list[ModelFile] = field(default_factory=list)
    note: str | None = None

    @property
    def match(self) -> bool | None:
        """True/False when both sha256 are known, None otherwise."""
        if self.expected_sha256 is None or self.sha256 is None:
            return None
        return self.expected_sha256 == self.sha256

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "mount_path": self.mount_path,
            "mount_target": self.mount_target,
            "read_only": True,
            "sha256": self.sha256,
            "expected_sha256": self.expected_sha256,
            "match": self.match,
            "file_count": len(self.files),
            "bytes": self.total_bytes,
            "note": self.note,
        }


#: How much of a model directory is hashed at most (docs/limits.md): a model tree is a few
#: hundred files; ``--model /`` (the whole host) stops here, before any file is read.
MODEL_ENTRIES = Limit("SERVELAB_MAX_MODEL_FILES", 50_000,
                      "files and directories in a model directory")
MODEL_BYTES = Limit("SERVELAB_MAX_MODEL_BYTES", 2048 << 30, "bytes of a model")


def digest_path(path: Path) -> tuple[str, list[ModelFile]]:
    """(sha256, files) of a model file or directory, as described in the module docstring;
    InputError past :data:`MODEL_ENTRIES` or :data:`MODEL_BYTES`."""
    if path.is_file():
        size = path.stat().st_size
        if size > MODEL_BYTES.value():
            raise _too_large(path, MODEL_BYTES)
        f = ModelFile(path.name, size, sha256_file(path))
        return f.sha256, [f]
    try:
        entries = tree_files(path, max_entries=MODEL_ENTRIES.value(),
                             max_bytes=MODEL_BYTES.value())
    except TreeTooLarge as e:
        raise _too_large(path, MODEL_BYTES if e.what == "bytes" else MODEL_ENTRIES) from e
    return manifest_digest(entries), [ModelFile(*e) for e in entries]


def _too_large(path: Path, limit: Limit) -> InputError:
    return InputError(
        f"the model at {path} holds more than {limit.value()} {limit.what}: not hashed "
        "(is it the model's own directory?)",
        hint=f"point model.path (or --model) at the model's directory; {limit.raise_hint()}")


def model_info(model: Model | None, client: Any = None) -> ModelInfo | None:
    """Resolve, and hash, the model of the spec. InputError when it does not exist."""
    if model is None or (model.path is None and model.volume is None):
        return None
    expected = model.sha256.removeprefix("sha256:").lower() if model.sha256 else None
    if model.path is not None:
        return _path_info(model.path, model.mount_path, expected)
    return _volume_info(str(model.volume), model.mount_path, expected, client)


def _path_info(path: Path, mount_path: str, expected: str | None) -> ModelInfo:
    p = path.resolve()
    if not p.exists():
        raise InputError(
            f"the model path {path} does not exist",
            hint="point model.path (or --model) at the directory or file holding the model",
        )
    try:
        sha, files = digest_path(p)
    except OSError as e:
        raise InputError(f"the model at {path} cannot be read: {e}") from e
    if p.is_file():
        target = str(PurePosixPath(mount_path) / p.name)
        return ModelInfo(str(path), "file", str(p), target, mount_path, expected, sha, files)
    return ModelInfo(str(path), "dir", str(p), mount_path, mount_path, expected, sha, files)


def _volume_info(name: str, mount_path: str, expected: str | None, client: Any) -> ModelInfo:
    info = ModelInfo(f"volume:{name}", "volume", name, mount_path, mount_path, expected)
    try:
        attrs = client.api.inspect_volume(name)
    except Exception as e:
        raise InputError(
            f"the model volume {name!r} does not exist: {str(e).splitlines()[0][:200]}",
            hint="create it (docker volume create) and copy the model in, or use model.path",
        ) from e
    mountpoint = Path(str(attrs.get("Mountpoint") or ""))
    try:
        if not mountpoint.is_dir() or not os.access(mountpoint, os.R_OK | os.X_OK):
            raise PermissionError(f"{mountpoint} is not readable here")
        info.sha256, info.files = digest_path(mountpoint)
    except OSError as e:
        info.note = f"sha256 not recorded: the volume's mount point cannot be read ({e})"
    return info
