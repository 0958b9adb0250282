"""One repeat's start-up cost on a node (:class:`NodeStart`): both pulls, what other nodes
would pull, and the start phases that followed, as ``metrics.coldstart`` of result.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servelab.node.layers import ImageLayers, NodeCost
from servelab.node.pull import COLD, WARM_BASE, PullRecord, round6

if TYPE_CHECKING:
    from servelab.node.ctrstart import CtrStart
    from servelab.node.readbytes import ReadBeforeReady

#: where the cold figures' start phases come from
COLD_START_CTR = "containerd"
COLD_START_DOCKER = "docker"

#: the start phases a record keeps (from the prober's timeline durations)
START_KEYS = ("create_s", "start_call_s", "start_to_tcp_accept_s", "start_to_ready_s",
              "start_to_first_good_request_s")


@dataclass
class NodeStart:
    """One repeat's start-up cost on a node: both pulls, what other nodes would pull, and
    (after :meth:`with_start`) the start phases that followed the warm-base pull."""

    registry: str
    image: ImageLayers
    cold: PullRecord | None
    warm: PullRecord | None
    holds: list[NodeCost]
    start: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: why the cold pull was servelab's fetch, not a private containerd (None: it was not)
    cold_fallback: str | None = None
    #: the lazy pull (``--lazy soci``): :meth:`servelab.node.lazypull.LazyRecord.to_dict`,
    #: or why it was not measured; None: not asked for
    lazy: dict[str, Any] | None = None
    #: the start on the lazy node (the keys of :meth:`with_start`); empty until it exists
    lazy_start: dict[str, float | None] = field(default_factory=dict)
    #: the start from the private containerd right after the cold pull (None: not started
    #: there, and ``cold_start_skipped`` says why)
    cold_start: CtrStart | None = None
    cold_start_skipped: str | None = None
    #: what an untimed second start read of the unpacked image before ready (full pull)
    read_before_ready: ReadBeforeReady | None = None

    def with_start(self, durations: dict[str, Any]) -> NodeStart:
        """Take create, start -> ready and start -> first good request from the timeline's
        durations of the start after the warm-base pull."""
        self.start = {k: durations.get(k) for k in START_KEYS}
        return self

    def with_lazy_start(self, durations: dict[str, Any]) -> NodeStart:
        """Take the phases of the start on the lazy node (after the lazy pull)."""
        self.lazy_start = {k: durations.get(k) for k in START_KEYS}
        return self

    def _to_lazy(self, key: str) -> float | None:
        """Lazy pull + create + the start call + started -> *key* on the lazy node: None
        until that start exists, or when the pull was not lazy (a fallback, not measured)."""
        lazy = self.lazy or {}
        parts = [self.lazy_start.get(k) for k in ("create_s", "start_call_s", key)]
        pull = lazy.get("pull_s")
        if lazy.get("lazy") is not True or not isinstance(pull, (int, float)) \
                or any(p is None for p in parts):
            return None
        return round(float(pull) + sum(float(p) for p in parts if p is not None), 6)

    @property
    def cold_basis(self) -> str:
        """Whose start phases follow the cold pull: the start from the private containerd
        that pulled it, or (no such start) the Docker start after the warm-base pull."""
        return COLD_START_CTR if self.cold_start is not None else COLD_START_DOCKER

    def _phases(self, variant: str) -> dict[str, float | None]:
        if variant == COLD and self.cold_start is not None:
            return self.cold_start.phases()
        return self.start

    def _to(self, pull: PullRecord | None, key: str, variant: str) -> float | None:
        """Pull + unpack + create + the start call + started -> *key*: the phases laid end
        to end (servelab's own work between the pull and the create is left out). The cold
        variant's start phases are those of the start from the private containerd that
        pulled it, where it ran."""
        phases = self._phases(variant)
        parts = [phases.get(k) for k in ("create_s", "start_call_s", key)]
        if pull is None or pull.not_cold or any(p is None for p in parts):
            return None
        return round(pull.download_s + (pull.unpack_s or 0.0)
                     + sum(float(p) for p in parts if p is not None), 6)

    def to_dict(self) -> dict[str, Any]:
        """``metrics.coldstart`` of result.json."""
        variants = {COLD: self.cold, WARM_BASE: self.warm}
        to_ready: dict[str, float | None] = {
            k.replace("-", "_"): self._to(p, "start_to_ready_s", k) for k, p in variants.items()}
        to_first: dict[str, float | None] = {
            k.replace("-", "_"): self._to(p, "start_to_first_good_request_s", k)
            for k, p in variants.items()}
        if self.lazy is not None:
            to_ready["lazy"] = self._to_lazy("start_to_ready_s")
            to_first["lazy"] = self._to_lazy("start_to_first_good_request_s")
        return {
            "registry": self.registry, "ref": self.image.ref,
            "image_bytes": self.image.total_bytes, "layers": len(self.image.layers),
            "cold": self.cold.summary() if self.cold else None,
            "warm_base": self.warm.summary() if self.warm else None,
            "node_holds": [c.to_dict() for c in self.holds],
            "start": {k: round6(v) for k, v in self.start.items()},
            "to_ready_s": to_ready, "to_first_request_s": to_first,
            "cold_runtime": {"private_containerd": self.cold_fallback is None,
                             "fallback_reason": self.cold_fallback},
            **({"lazy": self._lazy_dict()} if self.lazy is not None else {}),
            "cold_start": self.cold_start.to_dict() if self.cold_start else None,
            "cold_start_basis": self.cold_basis,
            "read_before_ready": (self.read_before_ready.to_dict()
                                  if self.read_before_ready else None),
            "notes": [*self.notes, *self._cold_notes()],
        }

    def _lazy_dict(self) -> dict[str, Any]:
        """``lazy`` with the lazy node's start phases (``start``) once that start exists."""
        lazy = dict(self.lazy or {})
        if self.lazy_start:
            lazy["start"] = {k: round6(v) for k, v in self.lazy_start.items()}
        return lazy

    def _cold_notes(self) -> list[str]:
        out = []
        if self.cold_start is None:
            out.append("cold figures: the start phases are the Docker start's after the "
                       "warm-base pull, laid after the cold pull ("
                       + (self.cold_start_skipped or "no start from the private containerd")
                       + ")")
        elif not self.cold_start.ready:
            out.append("cold figures: the start from the private containerd did not become "
                       "ready (" + "; ".join(self.cold_start.notes[-2:]) + ")")
        if self.cold_fallback is not None:
            out.append("cold pull: servelab's own fetch, not a private containerd: "
                       + self.cold_fallback)
        if self.cold is not None and self.cold.not_cold:
            why = "; ".join((self.cold.check or {}).get("detail") or []) or "see cold_check"
            out.append(f"the cold pull was not cold ({why}): it is left out of the cold "
                       "figures")
        return out
