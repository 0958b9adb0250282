"""An image given as a path or a reference, made ready for a tool that reads OCI layouts.

API::

    inp = classify(target)            # ImageInput: oci-dir, oci-archive, docker-archive or image
    with prepared_input(target, run_id, platform) as inp:
        ...                           # inp.path: an OCI layout dir (an archive unpacked to a
                                      # temporary dir, a multi-platform layout narrowed to one
                                      # platform), a docker archive, or inp.image: a reference
    target_digest(target, platform)   # the digest that names what is scanned

Trivy's ``--input`` takes an OCI layout directory or a docker archive, not a buildx OCI tarball,
and reads a layout's first image manifest whatever ``--platform`` says: so an OCI archive is
unpacked (member paths checked, nothing written outside the temporary directory) and a
multi-platform image is narrowed to one platform (see :mod:`servelab.image.platforms`).
Temporary directories are removed when the block ends, however it ends. Files are opened only
when they are regular files (a FIFO is refused, never waited on).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from servelab import logs, proc
from servelab.errors import CommandError, InputError, ToolMissingError
from servelab.image import platforms
from servelab.image.blob import digest_of_path, layer_stream, open_regular, path_kind, read_all
from servelab.image.oci import (
    INDEX_TYPES,
    MAX_JSON_BYTES,
    EngineImage,
    OciArchive,
    OciLayout,
    check_config,
    engine_has,
    looks_like_path,
    parse_object,
)
from servelab.image.ref import check_digest

log = logs.get("servelab.image.layout")


@dataclass(frozen=True)
class ImageInput:
    """What a tool is pointed at: ``--input PATH`` (OCI dir, docker tar) or an image ref."""

    target: str
    kind: str  # "oci-dir", "oci-archive", "docker-archive" or "image"
    path: Path | None = None
    image: str | None = None
    #: the platform chosen, and all the image has (OCI inputs; set by prepared_input)
    platform: str | None = None
    platforms: tuple[str, ...] = ()


def _tar_names(path: Path) -> set[str]:
    try:
        with open_regular(path, "the archive", str(path)) as f, \
                tarfile.open(fileobj=f, mode="r:") as tf:
            return {m.name.removeprefix("./") for m in tf.getmembers()}
    except (tarfile.TarError, OSError, EOFError) as e:
        raise InputError(f"{path} is not a readable tar archive: {e}", file=str(path)) from e


def _archive_kind(path: Path) -> str:
    names = _tar_names(path)
    if "index.json" in names and "oci-layout" in names:
        return "oci-archive"
    if "manifest.json" in names:
        return "docker-archive"
    raise InputError(
        f"{path} is neither an OCI archive (index.json, oci-layout) nor a docker archive "
        "(manifest.json)",
        file=str(path),
        hint="build with --output type=oci,dest=FILE.tar or save with 'docker save -o'",
    )


def classify(target: str) -> ImageInput:
    """Decide how *target* is read: a directory, a tar archive, or an image reference."""
    p = Path(target)
    kind = path_kind(target)
    if kind == "dir":
        if path_kind(str(p / "index.json")) is None:
            raise InputError(
                f"{target} is a directory but not an OCI image layout (no index.json)",
                file=target,
                hint="pass an OCI layout directory, an OCI/docker tar archive or an image name",
            )
        return ImageInput(target, "oci-dir", path=p)
    if kind == "file":
        return ImageInput(target, _archive_kind(p), path=p)
    if kind is not None:
        raise InputError(f"{target} is {kind}, not a regular file", file=target,
                         hint="save the image to a file first")
    if looks_like_path(target):
        raise InputError(f"{target} does not exist", file=target)
    return ImageInput(target, "image", image=target)


def unpack_oci_archive(archive: Path, dest: Path) -> None:
    """Extract an OCI archive into *dest* (member paths checked: nothing outside dest)."""
    try:
        with open_regular(archive, "the archive", str(archive)) as f, \
                tarfile.open(fileobj=f, mode="r:") as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")
            else:  # Python < 3.11.4: refuse what the data filter would refuse
                for m in tf.getmembers():
                    if (m.name.startswith("/") or ".." in Path(m.name).parts
                            or not (m.isfile() or m.isdir())):
                        raise tarfile.TarError(f"unsafe member {m.name!r}")
                tf.extractall(dest)  # noqa: S202 (members checked above)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise InputError(f"cannot unpack OCI archive {archive}: {e}", file=str(archive)) from e


@contextlib.contextmanager
def prepared_input(target: str | Path, run_id: str = "scan",
                   platform: str | None = None) -> Iterator[ImageInput]:
    """The input ready for the tool: an OCI archive unpacked to a temporary directory, and a
    multi-platform OCI image narrowed to one platform (see :mod:`servelab.image.platforms`);
    temporary directories are removed on exit. *platform* picks it (default: the host's)."""
    inp = classify(str(target))
    if inp.kind == "image":
        with _engine_saved(inp, run_id, platform) as ready:
            yield ready
        return
    if inp.kind == "docker-archive" and inp.path is not None:
        verify_docker_archive(inp.path)
    if inp.kind not in ("oci-archive", "oci-dir") or inp.path is None:
        yield inp
        return
    tmp = Path(tempfile.mkdtemp(prefix=f"servelab-{run_id}-oci-"))
    try:
        layout = inp.path
        if inp.kind == "oci-archive":
            unpack_oci_archive(inp.path, tmp)
            layout = tmp
        verify_layout(layout, platform)
        if platform or _layout_nested(layout):
            yield _narrowed(inp, layout, tmp, platform)
        else:
            yield ImageInput(inp.target, "oci-dir", path=layout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _engine_saved(inp: ImageInput, run_id: str, platform: str | None) -> Iterator[ImageInput]:
    """An image in the local engine, saved once (``docker save``) and then read like an
    archive: verified (digests, sizes, diff_ids, tars), unpacked and narrowed, and the tool
    reads that verified copy, not the engine again. A corrupt engine image is exit 2, as in
    ``servelab diff``. An image the engine lacks is left to the tool (a registry's blobs are
    checked against their digests by whoever pulls them)."""
    if inp.image is None or not engine_has(inp.image):
        yield replace(inp, platform=platform)
        return
    with contextlib.closing(EngineImage(inp.image)) as saved, contextlib.ExitStack() as stack:
        try:
            ready = stack.enter_context(prepared_input(saved.path, run_id, platform))
        except InputError as e:  # docker save ends its archive early, exit 0, at a bad blob
            raise InputError(
                f"the engine's image {inp.image} is corrupt: what docker save gave is not a "
                f"sound image ({e.message})", file=inp.target,
                hint="remove it (docker rmi) and pull or build it again") from e
        yield replace(ready, target=inp.target)


def verify_layout(layout: Path, platform: str | None = None) -> None:
    """Read the config and every layer of the image a tool will be pointed at through the
    verified reader (digest, declared size, the config's diff_id, decompression caps) and
    as a tar: a corrupt input image is an InputError (exit 2), as in ``servelab diff``,
    never a tool failure (exit 3) nor a scan of something other than what the digest names."""
    with OciLayout(layout) as source:
        chosen = platforms.choose(source.platform_manifests(), platform)
        config = source.read_config(chosen.config)
        diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
        ids = [str(d) for d in diff_ids] if len(diff_ids) == len(chosen.layers) else []
        for n, layer in enumerate(chosen.layers):
            with source.open_layer(layer, diff_id=ids[n] if ids else None) as data:
                _read_tar(data, f"{source.name}: layer {layer.digest}")


#: a docker archive's config member: named by the sha256 of its bytes (the image ID)
_CONFIG_NAME = re.compile(r"(?:\./)?([a-f0-9]{64})\.json")
_NOT_DOCKER = "save the image again with 'docker save -o FILE', or scan an OCI archive"


def verify_docker_archive(path: Path) -> None:
    """A docker archive (``docker save`` before Docker 25: manifest.json, a config named by
    its sha256, a tar per layer) read through the verified reader like an OCI layout: each
    config against its name's digest, each layer (gzip, zstd or plain) against the config's
    diff_id and as a tar. A corrupt archive is an InputError (exit 2), never a Trivy failure
    (exit 3) nor a scan of something other than what its config names."""
    with contextlib.closing(OciArchive(path)) as source:
        for n, entry in enumerate(_docker_manifest(source)):
            _verify_docker_image(source, entry, f"{source.name}: manifest.json[{n}]")


def _docker_manifest(source: OciArchive) -> list[dict[str, Any]]:
    with source.open_member("manifest.json") as f:
        raw = read_all(f, MAX_JSON_BYTES, f"{source.name}: manifest.json")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{source.name}: manifest.json is not JSON ({e})", file=source.name,
                         hint=_NOT_DOCKER) from e
    if not isinstance(doc, list) or not doc or not all(map(_docker_entry, doc)):
        raise InputError(f"{source.name}: manifest.json is not a docker archive's manifest "
                         "(a list of {\"Config\": ..., \"Layers\": [...]})", file=source.name,
                         hint=_NOT_DOCKER)
    return doc


def _docker_entry(entry: Any) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("Config"), str)
            and isinstance(entry.get("Layers"), list)
            and all(isinstance(x, str) for x in entry["Layers"]))


def _verify_docker_image(source: OciArchive, entry: dict[str, Any], where: str) -> None:
    name = entry["Config"]
    m = _CONFIG_NAME.fullmatch(name)
    digest = digest_of_path(name) or (f"sha256:{m.group(1)}" if m else None)
    with source.open_member(name, digest) as f:
        raw = read_all(f, MAX_JSON_BYTES, f"{where}: config {name}")
    config = check_config(parse_object(raw, f"{where}: config {name}"), f"{where}: config")
    diff_ids = [str(d) for d in (config.get("rootfs") or {}).get("diff_ids") or []]
    layers = entry["Layers"]
    if len(diff_ids) != len(layers):
        raise InputError(f"{where}: {len(layers)} layers, but its config lists "
                         f"{len(diff_ids)} diff_ids", file=source.name, hint=_NOT_DOCKER)
    for layer, diff_id in zip(layers, diff_ids, strict=True):
        label = f"{source.name}: layer {layer}"
        with source.open_member(layer, digest_of_path(layer)) as blob, \
                layer_stream(blob, name=label, diff_id=diff_id) as data:
            _read_tar(data, label)


def _read_tar(stream: Any, name: str) -> None:
    """Walk a layer's tar members (their data is read past, nothing is kept)."""
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tf:
            for _member in tf:
                pass
    except (tarfile.TarError, EOFError) as e:
        raise InputError(f"not a readable tar archive ({e})", file=name,
                         hint="rebuild or re-export the image; the layer is damaged") from e


def _narrowed(inp: ImageInput, layout: Path, tmp: Path, platform: str | None) -> ImageInput:
    """*layout* as the tool's input, narrowed to one platform when it has several."""
    with OciLayout(layout) as source:
        manifests = source.platform_manifests()
    names = tuple(m.platform for m in manifests)
    chosen = platforms.choose(manifests, platform)
    if len(manifests) == 1:
        return ImageInput(inp.target, "oci-dir", path=layout, platform=chosen.platform,
                          platforms=names)
    dest = tmp if layout == tmp else tmp / "layout"
    platforms.single_platform_layout(layout, dest, chosen)
    return ImageInput(inp.target, "oci-dir", path=dest, platform=chosen.platform,
                      platforms=names)


# ---------------------------------------------------------------------------- digests


def _index_digest(index: dict[str, Any], raw: bytes) -> str:
    """The image's digest from an OCI index.json: its one image manifest, else the index."""
    manifests = _image_entries(index)
    if len(manifests) == 1 and isinstance(manifests[0].get("digest"), str):
        return check_digest(manifests[0]["digest"], "index.json: manifests[0]")
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _image_entries(index: Any) -> list[dict[str, Any]]:
    """The entries of an index.json that are not attestation manifests."""
    if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
        return []
    return [m for m in index["manifests"] if isinstance(m, dict) and not _attestation(m)]


def _attestation(entry: dict[str, Any]) -> bool:
    ann = entry.get("annotations")
    return isinstance(ann, dict) and ann.get("vnd.docker.reference.type") == "attestation-manifest"


def _read_index(inp: ImageInput) -> bytes | None:
    if inp.path is None:
        return None
    if inp.kind == "oci-dir":
        with open_regular(inp.path / "index.json", "index.json", str(inp.path)) as f:
            return read_all(f, MAX_JSON_BYTES, f"{inp.path}: index.json")
    with open_regular(inp.path, "the archive", str(inp.path)) as f, \
            tarfile.open(fileobj=f, mode="r:") as tf:
        for member in tf:
            if member.name.removeprefix("./") in ("index.json", "manifest.json"):
                fh = tf.extractfile(member)
                return read_all(fh, MAX_JSON_BYTES, f"{inp.path}: {member.name}") if fh else None
    return None


def target_digest(target: str | Path, platform: str | None = None) -> str:
    """The content digest of *target*: repeats with the same digest are scanned once.

    OCI layouts and archives: the manifest digest in index.json; for a multi-platform image,
    the manifest digest of the platform that is chosen (*platform*, default the host's).
    Docker archives: sha256 of manifest.json. Image references: the engine's image ID (the
    manifest digest with the containerd image store), or the digest pinned in the reference.
    """
    inp = classify(str(target))
    if inp.kind == "image":
        return _image_digest(str(target))
    try:
        raw = _read_index(inp)
    except (OSError, tarfile.TarError, EOFError) as e:
        raise InputError(f"cannot read {target}: {e}", file=str(target)) from e
    if raw is None:
        raise InputError(f"{target} has no index.json or manifest.json", file=str(target))
    if inp.kind == "docker-archive":
        return "sha256:" + hashlib.sha256(raw).hexdigest()
    try:
        index = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{target}: index.json is not JSON: {e}", file=str(target)) from e
    if (platform or _is_nested(index)) and inp.path is not None:
        source = OciArchive(inp.path) if inp.kind == "oci-archive" else OciLayout(inp.path)
        with source:
            return platforms.choose(source.platform_manifests(), platform).digest
    return _index_digest(index if isinstance(index, dict) else {}, raw)


def _is_nested(index: Any) -> bool:
    """Whether an index.json points at an index (a multi-platform image) or at several
    images, rather than at one image manifest (then read from index.json alone)."""
    entries = _image_entries(index)
    return len(entries) > 1 or any(isinstance(m.get("mediaType"), str)
                                   and m["mediaType"] in INDEX_TYPES for m in entries)


def _layout_nested(layout: Path) -> bool:
    try:
        with open_regular(layout / "index.json", "index.json", str(layout)) as f:
            return _is_nested(json.loads(read_all(f, MAX_JSON_BYTES)))
    except (OSError, ValueError, RecursionError, InputError):
        return False  # the tool reports the unreadable layout


def _image_digest(ref: str) -> str:
    seconds = proc.deadline(proc.ENGINE_TIMEOUT_ENV, proc.ENGINE_TIMEOUT_S)
    try:
        out = proc.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                       timeout=seconds)
        ident = out.stdout.strip()
        if ident.startswith("sha256:"):
            return ident
    except (CommandError, ToolMissingError) as e:
        if isinstance(e, CommandError) and e.timed_out:
            raise proc.engine_silent(seconds) from e
        log.debug("no local image %s: %s", ref, e)
    if "@sha256:" in ref:
        return ref.split("@", 1)[1]
    raise InputError(
        f"cannot tell the digest of image {ref!r}: it is not in the local engine and the "
        "reference is not pinned by digest",
        hint="pull or build it first, pin it as NAME@sha256:..., or scan an OCI archive",
    )
