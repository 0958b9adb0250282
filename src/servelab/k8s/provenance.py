"""Whether the checked image (``k8s-check --image``) was built, not made by hand.

The image config's ``history`` has one entry per build step; the entries that made a layer
(``empty_layer`` not true) match the manifest's layers in order. A layer whose entry names no
build instruction (an empty ``created_by``, as ``docker commit`` of a container writes it) or
names only a shell (``/bin/bash``: a ``docker commit`` of an interactive session) holds
changes made inside a running container: nothing rebuilds it. The image's source annotations
(``org.opencontainers.image.source`` and ``revision``, on the manifest, its index entry or as
config labels) are what traces it to the commit it was built from.

The config is read through the same verified reader as the image's scripts
(:mod:`servelab.k8s.imagefiles`: every blob checked against its digest); no layer is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from servelab.image.oci import PlatformManifest
from servelab.k8s.imagefiles import as_dict, as_list, open_source, pick_platform

#: The annotations (or labels) that say which repository and commit the image was built from.
SOURCE_KEYS = ("org.opencontainers.image.source", "org.opencontainers.image.revision")
#: ``created_by`` of an interactive shell: what ``docker commit`` writes for a container that
#: ran one (``/bin/bash``, ``sh -l``).
SHELL_SESSION = re.compile(r"^\s*(/usr)?(/bin/)?(ba|da|z|a|k|fi)?sh(\s+-[a-z]+)*\s*$")


@dataclass(frozen=True)
class HandLayer:
    """A layer no build instruction made."""

    index: int
    count: int
    digest: str
    size: int
    created_by: str
    comment: str

    def describe(self) -> str:
        how = (f"created_by {self.created_by.strip()!r}, a shell session" if self.created_by.strip()
               else "no created_by")
        note = f", comment {self.comment[:60]!r}" if self.comment else ""
        return (f"layer {self.index + 1} of {self.count} ({self.digest[:19]}…, "
                f"{_size(self.size)}; {how}{note})")


@dataclass
class ImageHistory:
    """What the checked image's config says about how it was made."""

    name: str
    hand_layers: list[HandLayer] = field(default_factory=list)
    #: Source annotations found (key -> value); both missing: not traceable to a commit
    sources: dict[str, str] = field(default_factory=dict)
    #: The config carries no history at all (some tools write none): not judged
    no_history: bool = False
    #: History and layers do not line up (entries missing): judged as far as they do
    mismatch: str = ""


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


def hand_made(entry: dict[str, Any]) -> bool:
    """A layer's history entry that names no build instruction."""
    created_by = str(entry.get("created_by") or "")
    return not created_by.strip() or bool(SHELL_SESSION.match(created_by))


def _sources(pm: PlatformManifest, cfg: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    labels = as_dict(as_dict(cfg.get("config")).get("Labels"))
    places = (labels, as_dict(pm.descriptor.annotations), as_dict(pm.manifest.get("annotations")))
    for place in places:
        for key in SOURCE_KEYS:
            value = place.get(key)
            if isinstance(value, str) and value.strip():
                found[key] = value.strip()
    return found


def judge(name: str, pm: PlatformManifest, cfg: dict[str, Any]) -> ImageHistory:
    """The history of one platform's config, matched to its layers."""
    out = ImageHistory(name, sources=_sources(pm, cfg))
    history = [as_dict(h) for h in as_list(cfg.get("history"))]
    if not history:
        out.no_history = True
        return out
    made = [h for h in history if h.get("empty_layer") is not True]
    if len(made) != len(pm.layers):
        out.mismatch = (f"{len(made)} history entries make layers but the manifest has "
                        f"{len(pm.layers)} layers")
    for i, (entry, layer) in enumerate(zip(made, pm.layers, strict=False)):
        if hand_made(entry):
            out.hand_layers.append(HandLayer(i, len(pm.layers), layer.digest, layer.size,
                                             str(entry.get("created_by") or ""),
                                             str(entry.get("comment") or "")))
    return out


def read_history(text: str) -> ImageHistory:
    """Read the checked image's config (the platform k8s-check reads) and judge its history."""
    source, _ = open_source(text)
    with source:
        pm = pick_platform(source.platform_manifests())
        return judge(source.name, pm, source.read_config(pm.config))
