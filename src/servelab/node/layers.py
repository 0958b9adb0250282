"""What a node pulls for an image: its manifest, config and layers with exact sizes as the
registry serves them, and what a node already holding other layers would pull."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from servelab.errors import InputError
from servelab.image.ref import ImageRef, is_digest
from servelab.image.registry import RegistryClient

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int
    media_type: str = ""


@dataclass(frozen=True)
class ImageLayers:
    """An image as the registry serves it: manifest, config and layers with exact sizes."""

    ref: str
    manifest: Blob
    config: Blob
    layers: tuple[Blob, ...]

    @property
    def total_bytes(self) -> int:
        return self.manifest.size + self.config.size + sum(b.size for b in self.layers)

    @property
    def layer_digests(self) -> frozenset[str]:
        return frozenset(b.digest for b in self.layers)

    def bytes_without(self, held: frozenset[str]) -> tuple[int, int]:
        """(bytes, layers) a node holding the layers *held* pulls: manifest, config and
        every layer it lacks."""
        missing = [b for b in self.layers if b.digest not in held]
        return self.manifest.size + self.config.size + sum(b.size for b in missing), len(missing)


def _blob(d: Any, what: str) -> Blob:
    if not isinstance(d, dict) or not is_digest(str(d.get("digest"))) \
            or not isinstance(d.get("size"), int):
        raise InputError(f"the registry's manifest has a malformed {what} descriptor")
    return Blob(str(d["digest"]), int(d["size"]), str(d.get("mediaType") or ""))


def _platform_entry(index: dict[str, Any], wanted: str) -> dict[str, Any]:
    entries = [m for m in index.get("manifests") or [] if isinstance(m, dict)]
    for m in entries:
        p = m.get("platform") or {}
        if f"{p.get('os')}/{p.get('architecture')}" == wanted:
            return m
    if not entries:
        raise InputError("the registry's image index lists no manifest")
    return entries[0]


def read_layers(reg: RegistryClient, ref: ImageRef, platform: str | None = None) -> ImageLayers:
    """The manifest of *ref* (an index resolved to *platform*, by default the host's)."""
    from servelab.image.platforms import host_platform

    got = reg.get_manifest(ref)
    doc = json.loads(got.body)
    if got.media_type in INDEX_TYPES or doc.get("mediaType") in INDEX_TYPES:
        entry = _blob(_platform_entry(doc, platform or host_platform()), "manifest")
        return read_layers(reg, ref.with_digest(entry.digest), platform)
    layers = tuple(_blob(x, "layer") for x in doc.get("layers") or [])
    pinned = ImageRef(ref.registry, ref.repository, None, got.digest)
    return ImageLayers(str(pinned), Blob(got.digest, len(got.body), got.media_type),
                       _blob(doc.get("config"), "config"), layers)


@dataclass(frozen=True)
class NodeCost:
    """What a node that already holds *holds* pulls for this image (exact bytes)."""

    holds: str
    ref: str | None
    bytes: int | None
    layers: int | None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"holds": self.holds, "ref": self.ref, "bytes": self.bytes,
                "layers": self.layers, "note": self.note}
