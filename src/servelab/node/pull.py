"""One pull as a node pays it: per-layer phases (queued, download, unpack) on the run's timeline,
from servelab's own fetch or from the engine's progress events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from servelab.node.layers import Blob, ImageLayers

COLD = "cold"
WARM_BASE = "warm-base"

#: engine progress status -> the phase it starts (first occurrence per layer counts)
_PHASES = {
    "Pulling fs layer": "queued", "Waiting": "queued", "Downloading": "download",
    "Verifying Checksum": "downloaded", "Download complete": "downloaded",
    "Extracting": "extract", "Pull complete": "unpacked", "Already exists": "present",
}


@dataclass
class LayerPull:
    """One layer of one pull; times in seconds from the pull's start."""

    digest: str
    size: int
    pulled: bool
    started_s: float | None = None
    downloaded_s: float | None = None
    unpacked_s: float | None = None
    #: the engine fetched it, but its blob was in the content store before the pull (kept by
    #: a lease of an earlier operation, a killed run's leftovers): unpacked, not downloaded
    in_store: bool = False

    @property
    def state(self) -> str:
        return "in-store" if self.in_store else "downloaded" if self.pulled else "present"

    def to_dict(self) -> dict[str, Any]:
        r = round6
        return {"digest": self.digest, "size": self.size, "state": self.state,
                "pulled": self.pulled, "bytes_pulled": self.size if self.pulled else 0,
                "started_s": r(self.started_s), "downloaded_s": r(self.downloaded_s),
                "unpacked_s": r(self.unpacked_s)}


def round6(x: float | None) -> float | None:
    """Seconds as result.json carries them (6 decimals), None kept."""
    return round(x, 6) if x is not None else None


@dataclass
class PullRecord:
    """One pull of one image: what was fetched, and how long fetching and unpacking took."""

    variant: str
    method: str
    ref: str
    holds: list[str]
    started_mono: float
    started_wall: float
    manifest_bytes: int
    config_bytes: int
    layers: list[LayerPull]
    #: from the start until every layer it fetched was downloaded
    download_s: float
    #: the unpack after that (see ``unpack_basis``)
    unpack_s: float | None
    total_s: float
    unpack_basis: str
    notes: list[str] = field(default_factory=list)
    #: a cold pull's own check that it was cold (:class:`servelab.node.coldpull.ColdCheck`)
    check: dict[str, Any] | None = None
    #: the runtime's limit on parallel layer downloads, where servelab set it
    max_concurrent_downloads: int | None = None
    #: CPU seconds the runtime used for the pull (private containerd), where measured
    runtime_cpu_s: float | None = None

    @property
    def bytes_pulled(self) -> int:
        return self.manifest_bytes + self.config_bytes + sum(
            x.size for x in self.layers if x.pulled)

    @property
    def bytes_present(self) -> int:
        """Layers the node did not download: held (snapshot) or already in the store."""
        return sum(x.size for x in self.layers if not x.pulled)

    @property
    def bytes_in_store(self) -> int:
        return sum(x.size for x in self.layers if x.in_store)

    @property
    def done_mono(self) -> float:
        return self.started_mono + self.total_s

    @property
    def downloaded_mono(self) -> float:
        return self.started_mono + self.download_s

    def summary(self) -> dict[str, Any]:
        """The figures result.json keeps (``metrics.coldstart.<variant>``)."""
        return {"method": self.method, "holds": list(self.holds),
                "bytes_pulled": self.bytes_pulled, "bytes_present": self.bytes_present,
                "bytes_in_store": self.bytes_in_store,
                "layers_pulled": sum(1 for x in self.layers if x.pulled),
                "layers_present": sum(1 for x in self.layers if not x.pulled),
                "pull_s": round6(self.download_s), "unpack_s": round6(self.unpack_s),
                "total_s": round6(self.total_s), "unpack_basis": self.unpack_basis,
                "notes": list(self.notes),
                **({"cold_check": dict(self.check)} if self.check is not None else {}),
                **({"max_concurrent_downloads": self.max_concurrent_downloads}
                   if self.max_concurrent_downloads is not None else {}),
                **({"runtime_cpu_s": self.runtime_cpu_s}
                   if self.runtime_cpu_s is not None else {})}

    @property
    def not_cold(self) -> bool:
        """The pull's own check says it was not cold."""
        return self.check is not None and self.check.get("cold") is False

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "ref": self.ref, **self.summary(),
                "started_wall": self.started_wall, "manifest_bytes": self.manifest_bytes,
                "config_bytes": self.config_bytes, "layers": [x.to_dict() for x in self.layers]}


def short_digest(digest: str) -> str:
    """The first 12 hex digits of a digest, for notes."""
    return digest.partition(":")[2][:12]


def layer_pulls(events: Iterable[tuple[float, dict[str, Any]]], layers: Iterable[Blob],
                t0: float) -> list[LayerPull]:
    """Per layer, from the engine's progress events (monotonic arrival time, event): whether
    it was downloaded and when each phase began, in seconds from *t0*."""
    seen: dict[str, dict[str, float]] = {}
    for mono, ev in events:
        phase = _PHASES.get(str(ev.get("status") or ""))
        if phase is not None and ev.get("id"):
            seen.setdefault(str(ev["id"]), {}).setdefault(phase, mono - t0)
    out = []
    for b in layers:
        ph = seen.get(short_digest(b.digest), {})
        pulled = ("download" in ph or "downloaded" in ph) and "present" not in ph
        out.append(LayerPull(
            b.digest, b.size, pulled,
            started_s=ph.get("download", ph.get("queued")) if pulled else None,
            downloaded_s=ph.get("downloaded", ph.get("download")) if pulled else None,
            unpacked_s=ph.get("unpacked") if pulled else None))
    return out


def pull_record(variant: str, ref: str, img: ImageLayers, holds: list[str], *, t0: float,
                w0: float, t_end: float, events: list[tuple[float, dict[str, Any]]],
                in_store: frozenset[str] = frozenset()) -> PullRecord:
    """A :class:`PullRecord` of an engine pull from its progress events; *in_store*: layer
    blobs the engine's content store held before the pull (fetched, not downloaded)."""
    layers = layer_pulls(events, img.layers, t0)
    for x in layers:
        if x.pulled and x.digest in in_store:
            x.pulled, x.in_store = False, True
    total = t_end - t0
    done = [x.downloaded_s for x in layers
            if (x.pulled or x.in_store) and x.downloaded_s is not None]
    download = max(done) if done else total
    per_layer = any(x.unpacked_s is not None for x in layers)
    basis = ("no layer was downloaded: the whole pull (manifest, config, the image record) "
             "counts as pull" if not done else
             "the engine's Extracting/Pull complete events: from the last download to the "
             "pull's end" if per_layer else
             "this engine reports no unpack events: from the last layer's download until the "
             "pull returned")
    return PullRecord(variant, "engine pull", ref, holds, t0, w0, img.manifest.size,
                      img.config.size, layers, download, max(0.0, total - download), total,
                      basis)
