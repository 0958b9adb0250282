"""Lazy pulling (SOCI) as a node does it, measured and checked lazy.

* :func:`build_index`: in a THROW-AWAY :class:`~servelab.node.soci.SociContainerd` (never a
  timed one), the image is imported from the build's OCI archive (``ctr images import
  --no-unpack``; pulled from the lazy registry for a prebuilt image, or when the archive cannot
  be imported: the index's ``source`` says which), ``soci create --min-layer-size N``
  builds its SOCI index (a separate artifact: the image digest does not change) and ``soci
  push`` stores it beside the image; the index manifest and its referrers tag are deleted at
  the end of the run (:func:`unpublish_index`) unless kept.
* :func:`lazy_pull`: per repeat a FRESH instance (empty containerd and snapshotter roots),
  ``sync`` and the registry's blob files evicted as for the cold pull (the image's and the SOCI
  artifacts the index build just wrote), then ``soci image
  rpull`` WITHOUT ``--soci-index-digest``: the snapshotter discovers the index through the
  registry's referrers API (or its fallback tag) as a node does, timed from the call to its
  return. It yields the running instance (with the image's snapshots prepared, ready for a
  start with ``snapshotter="soci"``) and a :class:`LazyRecord`; the instance is stopped and
  removed when the block ends, on every exit path.
* The check that it really was lazy: the snapshotter's log says "remote snapshot successfully
  prepared" for every layer the index covers, and the registry's access log (when known) shows
  partial (206) requests and no full GET (200) of those layers during the pull. Otherwise the
  record says "silent fallback to a full pull" and its figure is not a lazy one.
* :func:`account_bytes` (after the start): bytes fetched from the registry's access log since
  the pull began (the image's layers, full and partial apart, and SOCI's own artifacts apart),
  and bytes read lazily from the snapshotter's metrics (``synchronous_bytes_served``: the
  uncompressed bytes the FUSE mounts served on demand; background fetching is disabled).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab import proc
from servelab.errors import CapabilityError, CommandError, InputError, ServelabError
from servelab.image.ref import DIGEST_PATTERN, ImageRef
from servelab.image.registry import RegistryClient, scheme_for
from servelab.node.coldpull import ColdSettings, log_size, prepare_cache, read_log_from
from servelab.node.layers import ImageLayers
from servelab.node.soci import LazyRegistry, SociContainerd, metric_sum

METHOD = "soci image rpull (private containerd + soci-snapshotter-grpc, index discovered)"
#: SOCI's own default: smaller layers get no zTOC and are fetched whole
DEFAULT_MIN_LAYER_SIZE = 10 << 20
RPULL_TIMEOUT_S = 1800.0
LOG_WAIT_S = 2.0
REMOTE_OK = "remote snapshot successfully prepared"
LOCAL_FALLBACK = "preparing snapshot as local snapshot"
DISCOVERED = "fetching SOCI artifacts using index descriptor"
_ZTOC = re.compile(rf"layer (?P<layer>{DIGEST_PATTERN}) -> ztoc (?P<ztoc>{DIGEST_PATTERN})")
_PUSHED = re.compile(rf"pushing soci index with digest: (?P<d>{DIGEST_PATTERN})")
_REQUEST = re.compile(rf'"(?P<method>GET|HEAD) /v2/(?P<repo>\S+)/(?P<kind>blobs|manifests)/'
                      rf'(?P<what>{DIGEST_PATTERN}|[^\s?]+)\S* HTTP/[0-9.]+" (?P<status>[0-9]{{3}})'
                      r" (?P<bytes>[0-9]+|-)")


def lazy_ref(img: ImageLayers, registry: LazyRegistry) -> str:
    """*img*'s reference on the lazy registry (same repository, tag and digest)."""
    ref = ImageRef.parse(img.ref)
    return str(ImageRef(registry.host, ref.repository, ref.tag, ref.digest))


# ---------------------------------------------------------------------------- the index


#: the largest min layer size taken (1 TiB): the spec's schema states the same maximum
MAX_MIN_LAYER_SIZE = 1 << 40


def check_min_layer_size(size: int) -> None:
    """The one check of a SOCI min layer size, the CLI's (--lazy-min-layer-size) and the
    spec's (coldStart.lazyMinLayerSize) alike."""
    if not 0 <= size <= MAX_MIN_LAYER_SIZE:
        raise InputError(f"--lazy-min-layer-size / coldStart.lazyMinLayerSize {size}: must be "
                         f"0 to {MAX_MIN_LAYER_SIZE} bytes",
                         hint="give a size in bytes, e.g. 10485760 (SOCI's default)")


@dataclass
class SociIndex:
    """The SOCI index built and pushed for one image."""

    ref: str
    digest: str
    min_layer_size: int
    #: layer digest -> its zTOC digest (layers under the min size have none: fetched whole)
    ztocs: dict[str, str]
    build_s: float
    #: where the throw-away instance got the image: the build's OCI archive or the registry
    source: str = "registry"
    #: why the archive was not used, when one was given
    source_note: str | None = None
    #: why the index cannot serve the image (a layer it covers only in part), or None
    unusable: str | None = None
    #: the layers whose coverage soci could not report, and why (None: all were checked)
    coverage_unchecked: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "min_layer_size": self.min_layer_size,
                "indexed_layers": len(self.ztocs), "build_s": round(self.build_s, 3),
                "source": self.source,
                **({"source_note": self.source_note} if self.source_note else {}),
                **({"unusable": self.unusable} if self.unusable else {}),
                **({"coverage_unchecked": self.coverage_unchecked}
                   if self.coverage_unchecked else {})}


def coverage(pc: SociContainerd, img: ImageLayers,
             ztocs: dict[str, str]) -> tuple[str | None, str | None]:
    """``(unusable, unchecked)``. *unusable*: why *ztocs* cannot serve *img*, a layer whose
    zTOC spans less than half of it (``soci ztoc info``: ``num_spans`` x ``span_size``).
    soci before v0.13 indexes a gzip layer of several members only up to the end of the first
    (awslabs/soci-snapshotter#1834): every file maps to span 0, and a lazy node serves zeros
    past that member. *unchecked*: the layers whose coverage soci could not report, and why
    (the lazy figure is then kept, with that said beside it)."""
    sizes = {b.digest: b.size for b in img.layers}
    unchecked: list[str] = []
    for layer, ztoc in ztocs.items():
        res = pc.soci("ztoc", "info", ztoc, check=False, timeout=RPULL_TIMEOUT_S)
        try:
            if res.returncode != 0:
                raise ValueError(proc.tail(res.stderr or res.stdout, 1, inline=True)
                                 or f"exit {res.returncode}")
            info = json.loads(res.stdout)
            spans, span = int(info.get("num_spans") or 0), int(info.get("span_size") or 0)
        except (ValueError, TypeError, AttributeError) as e:
            unchecked.append(f"{layer[7:19]} ({str(e)[:160] or type(e).__name__})")
            continue
        size = sizes.get(layer, 0)
        if spans and span and spans * span < size // 2:
            return (f"the SOCI index covers {spans} span(s) of {span >> 20} MiB of layer "
                    f"{layer[7:19]} ({size / 1e6:.0f} MB compressed): the layer is several "
                    "gzip members, which this soci indexes only up to the first "
                    "(awslabs/soci-snapshotter#1834, fixed in soci v0.13), so a lazy node "
                    "would serve zeros past it; recompress the layer as one gzip member "
                    "(BuildKit, pigz and servelab's own builds do) or use a newer soci"), None
    if not unchecked:
        return None, None
    return None, (f"the index's coverage was not checked for {len(unchecked)} layer(s): "
                  f"`soci ztoc info` gave no span count for {', '.join(unchecked[:3])}; a "
                  "layer of several gzip members would read as zeros past its first")


#: what the private mount namespace covers (a tmpfs on /var/lib): an archive there is hidden
_HIDDEN = (Path("/var/lib"),)


def _archive_unusable(archive: Path) -> str | None:
    """Why the throw-away instance cannot import *archive* (None: it can)."""
    path = archive.resolve()
    if not path.is_file():
        return f"the build's archive {archive} is gone"
    if any(path.is_relative_to(h) for h in _HIDDEN):
        return (f"the build's archive {archive} is under /var/lib, hidden in the instance's "
                "mount namespace")
    return None


def _get_image(pc: SociContainerd, ref: str, archive: Path | None) -> tuple[str, str | None]:
    """Put the image in the throw-away instance as *ref*: imported from the build's *archive*
    (no unpack: ``soci create`` reads the layer blobs), else pulled from the lazy registry.
    ``(source, why the archive was not used)``."""
    why = None if archive is None else _archive_unusable(archive)
    if archive is not None and why is None:
        res = pc.ctr("images", "import", "--no-unpack", "--index-name", ref,
                     str(archive.resolve()), check=False, timeout=RPULL_TIMEOUT_S)
        if res.returncode == 0:
            return "archive", None
        why = ("ctr images import of the build's archive failed: "
               f"{proc.tail(res.stderr or res.stdout, 2, inline=True) or res.returncode}")
    pc.ctr("images", "pull", *pc.registry.tls_args(), ref, timeout=RPULL_TIMEOUT_S)
    return "registry", why


def build_index(img: ImageLayers, registry: LazyRegistry, run_id: str, cleanup: Any, *,
                min_layer_size: int = DEFAULT_MIN_LAYER_SIZE, keep: bool = False,
                archive: Path | None = None) -> SociIndex:
    """Build *img*'s SOCI index in a throw-away instance and push it beside the image; its
    manifest is deleted at the end of the run (*cleanup*) unless *keep*. *archive*: the build's
    OCI archive of *img* (what was pushed, byte for byte), imported instead of a pull."""
    ref = lazy_ref(img, registry)
    t0 = time.monotonic()
    pc = SociContainerd(f"{run_id}-index", registry)
    cleanup.callback(pc.stop, f"private containerd {pc.work}")
    with pc:
        try:
            source, source_note = _get_image(pc, ref, archive)
            made = pc.soci("create", "--min-layer-size", str(min_layer_size), ref)
            ztocs = {m.group("layer"): m.group("ztoc") for m in _ZTOC.finditer(made.stdout)}
            unusable, unchecked = coverage(pc, img, ztocs)
            pushed = pc.soci("push", *registry.tls_args(), ref)
        except CommandError as e:
            raise CapabilityError(f"the SOCI index of {ref} could not be built and pushed: "
                                  f"{proc.tail(e.stderr, 3, inline=True) or e.message}",
                                  hint="run `servelab doctor` (lazy pulling (SOCI)); the "
                                  "registry must accept OCI artifacts") from e
    index = _PUSHED.findall(pushed.stdout)
    if not index:
        raise CapabilityError(f"soci push named no index for {ref}: "
                              f"{pushed.stdout.strip()[-300:] or 'no output'}",
                              hint="run `servelab doctor` (lazy pulling (SOCI))")
    out = SociIndex(ref, index[-1], min_layer_size, ztocs, time.monotonic() - t0, source,
                    source_note, unusable, unchecked)
    if not keep:
        cleanup.callback(lambda: unpublish_index(img, out.digest),
                         f"SOCI index {out.digest} of {img.ref}")
    return out


def unpublish_index(img: ImageLayers, digest: str) -> None:
    """Delete the SOCI index manifest and the referrers fallback tag of *img* (through the
    registry servelab pushed the image to, which serves the same storage)."""
    reg = RegistryClient()
    ref = ImageRef.parse(img.ref)
    base = ImageRef(ref.registry, ref.repository)
    with contextlib.suppress(ServelabError):
        reg.delete_manifest(base.with_digest(digest))
    if ref.digest is None:
        return
    tag = ImageRef(ref.registry, ref.repository, ref.digest.replace(":", "-"))
    with contextlib.suppress(ServelabError):
        reg.delete_manifest(base.with_digest(reg.head_manifest(tag).digest))


# ---------------------------------------------------------------------------- the pull


@dataclass
class LazyRecord:
    """One lazy pull: timed, checked lazy, and (after :func:`account_bytes`) its bytes."""

    ref: str
    pull_s: float | None
    index_digest: str | None
    discovered: bool
    #: layers the index covers (>= min_layer_size), and how many were remote snapshots
    indexed_layers: int
    remote_layers: int
    fell_back: bool
    min_layer_size: int
    root_empty: bool
    page_cache: str
    #: the registry's log of this pull: layer digest -> [(status, bytes)]
    requests: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    bytes_fetched: dict[str, int] | None = None
    bytes_read: dict[str, int] | None = None
    notes: list[str] = field(default_factory=list)
    method: str = METHOD
    background_fetch: str = "disabled"
    _log_offset: int = 0
    _t0: float = 0.0

    @property
    def lazy(self) -> bool:
        """A figure that may be reported as lazy."""
        return self.pull_s is not None and self.discovered and not self.fell_back

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "ref": self.ref,
                "pull_s": round(self.pull_s, 3) if self.pull_s is not None else None,
                "lazy": self.lazy, "index_digest": self.index_digest,
                "discovered": self.discovered, "indexed_layers": self.indexed_layers,
                "remote_layers": self.remote_layers, "fell_back": self.fell_back,
                "min_layer_size": self.min_layer_size, "root_empty": self.root_empty,
                "page_cache": self.page_cache, "background_fetch": self.background_fetch,
                "bytes_fetched": self.bytes_fetched, "bytes_read": self.bytes_read,
                "notes": list(self.notes)}


@contextlib.contextmanager
def lazy_pull(img: ImageLayers, registry: LazyRegistry, index: SociIndex, run_id: str,
              cleanup: Any, *, drop_caches: bool = False
              ) -> Iterator[tuple[SociContainerd, LazyRecord]]:
    """One lazy pull of *img* in a fresh instance; yields ``(instance, record)`` with the
    image's snapshots prepared in the running instance; it is stopped when the block ends."""
    settings = ColdSettings(registry.data, registry.log, drop_caches)
    pc = SociContainerd(run_id, registry)
    cleanup.callback(pc.stop, f"private containerd {pc.work}")
    with pc:
        empty = pc.root_empty()
        cache = prepare_cache(settings, [*(b.digest for b in (img.config, *img.layers)),
                                         index.digest, *(z for z in index.ztocs.values() if z)])
        rec = LazyRecord(lazy_ref(img, registry), None, None, False, len(index.ztocs), 0,
                         True, index.min_layer_size, empty, cache,
                         _log_offset=log_size(registry.log), _t0=time.monotonic())
        res = pc.soci("image", "rpull", *registry.tls_args(), rec.ref, check=False,
                      timeout=RPULL_TIMEOUT_S)
        if res.returncode == 0:
            rec.pull_s = time.monotonic() - rec._t0
        else:
            rec.notes.append("lazy not measured: soci image rpull failed: "
                             f"{(res.stderr or res.stdout).strip()[-300:]}")
        assess(rec, img, index, pc.soci_log(), registry)
        yield pc, rec


def assess(rec: LazyRecord, img: ImageLayers, index: SociIndex, soci_log: str,
           registry: LazyRegistry) -> None:
    """Fill *rec*'s check from the snapshotter's log and the registry's access log."""
    events = _log_events(soci_log)
    found = [e.get("digest") for e in events if e.get("msg") == DISCOVERED]
    rec.discovered = bool(found)
    rec.index_digest = str(found[0]) if found else None
    rec.remote_layers = sum(1 for e in events if str(e.get("msg", "")).startswith(REMOTE_OK))
    local = [str(e.get("layerDigest")) for e in events if e.get("msg") == LOCAL_FALLBACK]
    if not rec.discovered:
        rec.notes.append(f"lazy not measured: index not discovered on {registry.host}: "
                         f"{_discovery_error(events)}")
    if not rec.root_empty:
        rec.notes.append("the instance's roots held content before the pull")
    rec.requests = _layer_requests(rec, img, registry)
    why = _fallback_reasons(rec, index, local)
    rec.fell_back = bool(why)
    if why:
        rec.notes.append("silent fallback to a full pull: " + "; ".join(why))


def _fallback_reasons(rec: LazyRecord, index: SociIndex, local: list[str]) -> list[str]:
    why = []
    if rec.remote_layers < len(index.ztocs):
        why.append(f"{rec.remote_layers} of {len(index.ztocs)} indexed layers were remote "
                   "snapshots")
    why += [f"{d[:19]} prepared as a local snapshot" for d in local if d in index.ztocs]
    for d in index.ztocs:
        if any(status == 200 for status, _ in rec.requests.get(d, [])):
            why.append(f"{d[:19]} fetched in full (200) during the pull")
    if not index.ztocs:
        why.append(f"no layer is >= {index.min_layer_size} bytes: nothing was indexed")
    return why


def _log_events(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                out.append(event)
    return out


def _discovery_error(events: list[dict[str, Any]]) -> str:
    for e in events:
        err = str(e.get("error") or "")
        if err and any(w in (err + str(e.get("msg", ""))).lower()
                       for w in ("index", "referrer", "soci")):
            return err[-300:]
    return "the snapshotter's log names no index"


def _layer_requests(rec: LazyRecord, img: ImageLayers, registry: LazyRegistry
                    ) -> dict[str, list[tuple[int, int]]]:
    """layer digest -> [(status, bytes)] of the GETs the registry logged for it since the
    pull began ({} when its log is unknown)."""
    if registry.log is None:
        rec.notes.append("the registry's access log was not checked (no --lazy-registry-log)")
        return {}
    repo = ImageRef.parse(img.ref).repository
    layers = {b.digest for b in img.layers}
    deadline = time.monotonic() + LOG_WAIT_S
    while True:  # the registry writes a request's line when it ends
        out: dict[str, list[tuple[int, int]]] = {}
        for kind, what, status, n in _requests(registry, rec._log_offset, repo):
            if kind == "blobs" and what in layers:
                out.setdefault(what, []).append((status, n))
        if out or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def _requests(registry: LazyRegistry, offset: int, repo: str
              ) -> Iterator[tuple[str, str, int, int]]:
    """(kind, digest or tag, status, bytes) of every GET the registry logged for *repo*."""
    if registry.log is None:
        return
    try:
        text = read_log_from(registry.log, offset)
    except OSError:
        return
    for m in _REQUEST.finditer(text):
        if m.group("repo") == repo and m.group("method") == "GET":
            n = int(m.group("bytes")) if m.group("bytes") != "-" else 0
            yield m.group("kind"), m.group("what"), int(m.group("status")), n


# ---------------------------------------------------------------------------- bytes


def account_bytes(pc: SociContainerd, rec: LazyRecord, img: ImageLayers) -> LazyRecord:
    """Bytes fetched (the registry's log since the pull began) and bytes read lazily (the
    snapshotter's metrics), up to now: call it when the server is ready."""
    rec.bytes_fetched = fetched_bytes(pc.registry, rec._log_offset, img)
    if rec.bytes_fetched is None:
        rec.notes.append("bytes fetched not counted: the registry's access log is unknown")
    rec.bytes_read = _bytes_read(pc)
    if rec.bytes_read is None:
        rec.notes.append("bytes read not counted: the snapshotter's metrics did not answer")
    return rec


def fetched_bytes(registry: LazyRegistry, offset: int, img: ImageLayers
                  ) -> dict[str, int] | None:
    """What the registry's log says it sent for *img*'s repository since *offset*: its
    layers whole (200) and in parts (206), and the rest (manifests, config, SOCI's index and
    zTOCs) apart. None when the log is unknown."""
    if registry.log is None:
        return None
    layers = {b.digest for b in img.layers}
    fetched = {"layers_full": 0, "layers_partial": 0, "partial_requests": 0, "other": 0}
    for kind, what, status, n in _requests(registry, offset, ImageRef.parse(img.ref).repository):
        if kind == "blobs" and what in layers and status == 200:
            fetched["layers_full"] += n
        elif kind == "blobs" and what in layers and status == 206:
            fetched["layers_partial"] += n
            fetched["partial_requests"] += 1
        elif status in (200, 206):
            fetched["other"] += n
    fetched["total"] = fetched["layers_full"] + fetched["layers_partial"] + fetched["other"]
    return fetched


def _bytes_read(pc: SociContainerd) -> dict[str, int] | None:
    metrics = pc.metrics()
    if not metrics:
        return None
    served = metric_sum(metrics, "soci_fs_bytes_served",
                        operation_type="synchronous_bytes_served") or 0.0
    background = metric_sum(metrics, "soci_fs_bytes_served",
                            operation_type="background_bytes_served") or 0.0
    fetched = metric_sum(metrics, "soci_fs_layer_fetched_size_bytes") or 0.0
    return {"synchronous_bytes_served": int(served), "background_bytes_served": int(background),
            "layer_bytes_fetched": int(fetched)}


# ---------------------------------------------------------------------------- the option


#: the lazy-pulling formats servelab measures (eStargz is a second image: out of scope)
FORMATS = ("soci",)


@dataclass
class LazySettings:
    """The lazy arm of the cold start (``--lazy soci``): the HTTPS registry it pulls from
    (None: the cold-start registry itself), whether it is required (exit 3 when it cannot be
    measured), and the index's min layer size."""

    formats: tuple[str, ...] = FORMATS
    registry: LazyRegistry | None = None
    required: bool = False
    min_layer_size: int = DEFAULT_MIN_LAYER_SIZE

    def __post_init__(self) -> None:
        bad = [f for f in self.formats if f not in FORMATS]
        if bad or not self.formats:
            raise InputError(f"--lazy {','.join(bad) or '(none)'}: unknown lazy-pulling format",
                             hint=f"choose from {', '.join(FORMATS)}")
        check_min_layer_size(self.min_layer_size)

    def resolve(self, cold_registry: str) -> tuple[LazyRegistry | None, str | None]:
        """The registry the lazy pulls use, or why there is none: soci-snapshotter discovers
        an index only over HTTPS."""
        if self.registry is not None:
            return self.registry, None
        host = cold_registry.split("/", 1)[0]
        if scheme_for(host) == "http":
            return None, (f"the cold-start registry {host} is plain HTTP and soci-snapshotter "
                          "discovers an index only over HTTPS (give --lazy-registry HOST:PORT, "
                          "the same storage served over TLS, and --registry-ca)")
        return LazyRegistry(host), None


def lazy_not_measured(reason: str) -> dict[str, Any]:
    """``metrics.coldstart.lazy`` of a repeat whose lazy arm could not be measured."""
    return {"method": METHOD, "lazy": False, "pull_s": None, "fell_back": None,
            "notes": [f"lazy not measured: {reason}"]}
