"""Start-up cost as a node pays it: the pull (bytes and seconds), the unpack, then the start.

API::

    with Cleanup(run_id) as cu:
        nodes = NodeStarts(NodeSettings(registry="127.0.0.1:5000"), run_id=run_id, cleanup=cu)
        node = nodes.measure("treatment", "servelab/run/treatment:abc@sha256:...",
                             bases=["127.0.0.1:5000/base:1@sha256:..."])
        node.cold        # PullRecord: a node holding none of the image's layers
        node.warm        # PullRecord: the engine's own pull with the base's layers held
        node.holds       # [NodeCost]: what a node holding the control / a base would pull
        smoke_image(image, settings, ..., node=node)   # the start, on the warm pull's timeline

Each distinct tested image is pushed once to the registry (``<registry>/servelab-coldstart/
<run>/<arm>``, its manifest deleted again at the end unless kept). Every layer's size comes
from the registry's manifest, so bytes are exact anywhere; seconds are this machine's (over
loopback they are not WAN seconds). Per repeat:

* **cold**: servelab fetches every blob of the image from the registry into an empty
  directory (sha256 checked) and unpacks each layer there with ``tar``, in order: what a node
  with an empty image store does, timed download and unpack apart. It is servelab's fetch,
  not the engine's: on a shared engine the base's layers are held by other images and cannot
  be removed, so the engine could never pull it cold. Layers are fetched one after the other
  (containerd fetches three at once and unpacks while fetching).
* **warm-base**: the engine's own pull (Docker API, streamed progress) after servelab removed
  its names of the image, with the base images (``FROM``, or ``--node-has``) in the engine
  (pulled first when missing, removed at the end then). This run's other images (the other
  arm's, which may share layers) are set aside for the pull and pulled back after it. The
  progress events say, per layer, what was fetched (``Downloading``/``Download complete``) and
  what the engine already had (``Already exists``, or not listed when its snapshot existed); a
  fetched layer whose blob the content store still kept (``ctr content ls`` before the pull;
  a lease of an earlier operation keeps one) is counted as in the store, not downloaded. The
  unpack is taken from
  ``Extracting``/``Pull complete`` where the engine reports them (Docker 26's containerd
  store does not: then it is the time after the last download until the pull returned).

With the containerd image store, ``docker image rm`` of the last name of an image deletes it,
and the content and snapshots nothing else references are garbage collected at once; what is
still held (another image's layers, a running container's, blobs a lease keeps) is reported
as present or in the store, never as downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab import proc
from servelab.errors import CapabilityError, InputError, ServelabError
from servelab.image.ref import ImageRef, is_digest
from servelab.image.registry import RegistryClient

COLD = "cold"
WARM_BASE = "warm-base"
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")
REPOSITORY = "servelab-coldstart"
CHUNK = 1 << 20

#: engine progress status -> the phase it starts (first occurrence per layer counts)
_PHASES = {
    "Pulling fs layer": "queued", "Waiting": "queued", "Downloading": "download",
    "Verifying Checksum": "downloaded", "Download complete": "downloaded",
    "Extracting": "extract", "Pull complete": "unpacked", "Already exists": "present",
}


# ---------------------------------------------------------------------------- what is pulled


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


# ---------------------------------------------------------------------------- one pull


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
        r = _r
        return {"digest": self.digest, "size": self.size, "state": self.state,
                "pulled": self.pulled, "bytes_pulled": self.size if self.pulled else 0,
                "started_s": r(self.started_s), "downloaded_s": r(self.downloaded_s),
                "unpacked_s": r(self.unpacked_s)}


def _r(x: float | None) -> float | None:
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
                "pull_s": _r(self.download_s), "unpack_s": _r(self.unpack_s),
                "total_s": _r(self.total_s), "unpack_basis": self.unpack_basis,
                "notes": list(self.notes)}

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "ref": self.ref, **self.summary(),
                "started_wall": self.started_wall, "manifest_bytes": self.manifest_bytes,
                "config_bytes": self.config_bytes, "layers": [x.to_dict() for x in self.layers]}


def _short(digest: str) -> str:
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
        ph = seen.get(_short(b.digest), {})
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


# ---------------------------------------------------------------------------- cold fetch


def _download(reg: RegistryClient, ref: ImageRef, blob: Blob, dest: Path) -> None:
    h = hashlib.sha256()
    n = 0
    with reg.open_blob(ref, blob.digest) as r, dest.open("wb") as f:
        while chunk := r.read(CHUNK):
            h.update(chunk)
            f.write(chunk)
            n += len(chunk)
    if f"sha256:{h.hexdigest()}" != blob.digest or n != blob.size:
        raise CapabilityError(f"the registry served other bytes for {blob.digest} "
                              f"({n} bytes, sha256:{h.hexdigest()[:12]}...)",
                              hint="check the registry's storage")


def _untar(blob: Path, root: Path) -> str | None:
    """Unpack one layer into *root*; the first error line of tar, or None."""
    res = proc.run(["tar", "-x", "-f", str(blob), "-C", str(root), "--no-same-owner",
                    "--delay-directory-restore"], check=False, timeout=3600)
    if res.returncode == 0:
        return None
    return (res.stderr.strip().splitlines() or [f"tar exit code {res.returncode}"])[0][:300]


def fetch_cold(reg: RegistryClient, img: ImageLayers, work: Path) -> PullRecord:
    """Fetch every blob of *img* into *work* (which must be empty) and unpack its layers in
    order: a node with nothing of the image, timed by servelab."""
    ref = ImageRef.parse(img.ref)
    blobs, root = work / "blobs", work / "rootfs"
    blobs.mkdir(parents=True)
    root.mkdir()
    t0, w0 = time.monotonic(), time.time()
    reg.get_manifest(ref)
    _download(reg, ref, img.config, blobs / "config")
    layers: list[LayerPull] = []
    for i, b in enumerate(img.layers):
        lp = LayerPull(b.digest, b.size, True, started_s=time.monotonic() - t0)
        _download(reg, ref, b, blobs / str(i))
        lp.downloaded_s = time.monotonic() - t0
        layers.append(lp)
    downloaded = time.monotonic() - t0
    notes: list[str] = []
    for i, lp in enumerate(layers):
        err = _untar(blobs / str(i), root)
        lp.unpacked_s = time.monotonic() - t0
        if err:
            notes.append(f"layer {i} ({_short(lp.digest)}): tar: {err}")
    total = time.monotonic() - t0
    return PullRecord(COLD, "servelab fetch + tar", img.ref, [], t0, w0, img.manifest.size,
                      img.config.size, layers, downloaded, total - downloaded, total,
                      "tar -x of each layer into one empty directory, after every download",
                      notes)


# ---------------------------------------------------------------------------- the start


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

    def with_start(self, durations: dict[str, Any]) -> NodeStart:
        """Take create, start -> ready and start -> first good request from the timeline's
        durations of the start after the warm-base pull."""
        self.start = {k: durations.get(k) for k in (
            "create_s", "start_call_s", "start_to_tcp_accept_s", "start_to_ready_s",
            "start_to_first_good_request_s")}
        return self

    def _to(self, pull: PullRecord | None, key: str) -> float | None:
        """Pull + unpack + create + the start call + started -> *key*: the phases laid end
        to end (servelab's own work between the pull and the create is left out)."""
        parts = [self.start.get(k) for k in ("create_s", "start_call_s", key)]
        if pull is None or any(p is None for p in parts):
            return None
        return round(pull.download_s + (pull.unpack_s or 0.0)
                     + sum(float(p) for p in parts if p is not None), 6)

    def to_dict(self) -> dict[str, Any]:
        """``metrics.coldstart`` of result.json."""
        variants = {COLD: self.cold, WARM_BASE: self.warm}
        return {
            "registry": self.registry, "ref": self.image.ref,
            "image_bytes": self.image.total_bytes, "layers": len(self.image.layers),
            "cold": self.cold.summary() if self.cold else None,
            "warm_base": self.warm.summary() if self.warm else None,
            "node_holds": [c.to_dict() for c in self.holds],
            "start": {k: _r(v) for k, v in self.start.items()},
            "to_ready_s": {k.replace("-", "_"): self._to(p, "start_to_ready_s")
                           for k, p in variants.items()},
            "to_first_request_s": {k.replace("-", "_"):
                                   self._to(p, "start_to_first_good_request_s")
                                   for k, p in variants.items()},
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------- the session


@dataclass
class NodeSettings:
    """``registry``: ``host[:port][/path]`` the tested images are pushed to; ``node_has``:
    images a node is assumed to hold (a named base), compared by layer."""

    registry: str
    node_has: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        reg = self.registry.strip().rstrip("/")
        if not reg or "://" in reg or not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+(/[a-z0-9._/-]+)?",
                                                         reg):
            raise InputError(f"invalid cold-start registry {self.registry!r}",
                             hint="give host[:port][/path], e.g. 127.0.0.1:5000 or "
                             "ghcr.io/acme/servelab")
        self.registry = reg


def _part(x: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", x.lower()).strip("-") or "x"


class NodeStarts:
    """One run's cold-start measurements: each image pushed once, pulled every repeat."""

    def __init__(self, settings: NodeSettings, *, run_id: str, cleanup: Any,
                 client: Any = None, keep: bool = False,
                 progress: Callable[[str], None] | None = None,
                 registry_client: RegistryClient | None = None) -> None:
        from servelab import cleanup as cleanup_mod

        self.settings = settings
        self.run_id = run_id
        self.cleanup = cleanup
        self.client = client or cleanup_mod.shared_client()
        self.keep = keep
        self.progress = progress or (lambda _m: None)
        self.reg = registry_client or RegistryClient(timeout=120)
        #: manifest digest (image ID for a prebuilt image) -> what the registry serves for it
        self.published: dict[str, ImageLayers] = {}
        #: arm -> its image's layers (the last one measured)
        self.arms: dict[str, ImageLayers] = {}
        self._layers_of: dict[str, frozenset[str] | str] = {}
        self._registered: set[str] = set()
        #: manifest digest -> (servelab's name of it, the name it was pulled under): the
        #: images this run measured, set aside during another image's warm-base pull
        self._in_engine: dict[str, tuple[str, str]] = {}

    # -- push once
    def repository(self, arm: str) -> str:
        return f"{self.settings.registry}/{REPOSITORY}/{_part(self.run_id)}/{_part(arm)}"

    def publish(self, image: str, arm: str, archive: Path | None = None,
                digest: str | None = None) -> ImageLayers:
        """Push *image* once, byte for byte, and read its manifest back from the registry.

        *archive* and *digest*: the build's OCI archive and manifest digest (what the engine
        loaded); without them (a prebuilt image) the engine's copy is saved to one first.
        Pushed with :func:`servelab.image.push.push_tested`."""
        key = digest or str(self._inspect(image)["Id"])
        if key in self.published:
            return self.published[key]
        repo = self.repository(arm)
        self.progress(f"  cold start: pushing {key[:19]} to {repo}")
        if archive is None or digest is None:
            archive, digest = self._save(image)
        pushed = _push(archive, digest, arm, f"{repo}:{digest.partition(':')[2][:16]}",
                       self.reg)
        img = read_layers(self.reg, ImageRef.parse(pushed))
        if not self.keep:
            self.cleanup.callback(lambda: self._unpublish(pushed), f"registry manifest {pushed}")
        self.published[key] = img
        return img

    def _save(self, image: str) -> tuple[Path, str]:
        """``docker save`` of a prebuilt image into a temporary OCI archive; its top digest."""
        from servelab.image.oci import OciArchive

        work = Path(tempfile.mkdtemp(prefix="servelab-save-"))
        self.cleanup.path(work)
        path = work / "image.oci.tar"
        proc.run(["docker", "save", "-o", str(path), image], timeout=3600,
                 hint="the engine could not save the image to push it")
        with OciArchive(path) as saved:
            entries = saved.top()[1].get("manifests") or [{}]
        digest = str(entries[0].get("digest") or "")
        if not is_digest(digest):
            raise CapabilityError(f"docker save of {image} gave no OCI index.json",
                                  hint="use a Docker engine of version 25 or newer")
        return path, digest

    def _unpublish(self, ref: str) -> None:
        with contextlib.suppress(ServelabError):
            self.reg.delete_manifest(ImageRef.parse(ref))

    def _inspect(self, image: str) -> dict[str, Any]:
        try:
            return dict(self.client.api.inspect_image(image))
        except Exception as e:
            raise InputError(f"image {image!r} is not in the engine's image store",
                             hint="build or pull it first") from e

    # -- one repeat
    def measure(self, arm: str, image: str, bases: list[str], *, archive: Path | None = None,
                digest: str | None = None) -> NodeStart:
        """Both pulls of *image* (the arm's tested image; *archive* and *digest* as for
        :meth:`publish`) and what other nodes would pull; afterwards *image* is in the engine
        again, under the same name."""
        img = self.publish(image, arm, archive, digest)
        held = [*bases, *self.settings.node_has]
        node = NodeStart(self.settings.registry, img, None, None, self.costs(arm, img, bases))
        node.cold = self._cold(img)
        node.warm = self._warm_base(img, image, held, node.notes)
        self.arms[arm] = img
        return node

    def _cold(self, img: ImageLayers) -> PullRecord:
        work = Path(tempfile.mkdtemp(prefix="servelab-cold-"))
        self.cleanup.path(work)
        self.progress(f"  cold start: fetching {len(img.layers)} layers "
                      f"({img.total_bytes} bytes) into an empty directory")
        try:
            return fetch_cold(self.reg, img, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _warm_base(self, img: ImageLayers, image: str, held: list[str],
                   notes: list[str]) -> PullRecord | None:
        name = _name_of(image)
        if name is None:
            notes.append(f"warm-base pull not measured: {image!r} has no name servelab can "
                         "remove and restore")
            return None
        holds = self._ensure_present(held, notes)
        aside = self._set_aside(img)
        self._take_out(name, img.ref)
        others = self._other_names(img)
        if others:
            notes.append("the engine holds this image under other names too ("
                         + ", ".join(others[:5]) + "): its layers stayed and show as present")
        source = img.ref
        self.progress(f"  cold start: engine pull of {source} (holding "
                      f"{', '.join(holds) or 'no base'})")
        self._remove_at_end(source)
        try:
            rec = engine_pull(self.client, source, img, holds)
        except Exception:
            self._bring_back([*aside, (name, source)])  # not on Ctrl-C/SIGTERM: the run ends
            raise
        self._bring_back([*aside, (name, source)])
        self._in_engine[img.manifest.digest] = (name, source)
        rec.notes += self._held_elsewhere(rec, holds)
        return rec

    def _take_out(self, name: str, pulled: str) -> None:
        """Remove servelab's names of an image: the build's (or the arm's) and, after an
        earlier repeat, the name it was pulled under."""
        self._untag(name)
        if pulled in self._registered:
            self._untag(pulled)

    def _set_aside(self, img: ImageLayers) -> list[tuple[str, str]]:
        """This run's other images (the other arm's, measured before) out of the engine, so
        that the warm-base node holds the base and nothing else; what to bring back."""
        aside = [(name, ref) for digest, (name, ref) in self._in_engine.items()
                 if digest != img.manifest.digest]
        for name, ref in aside:
            self.progress(f"  cold start: setting {name} aside for the pull")
            self._take_out(name, ref)
        return aside

    def _bring_back(self, images: list[tuple[str, str]]) -> None:
        for name, ref in images:
            self._restore(name, ref)

    def _held_elsewhere(self, rec: PullRecord, holds: list[str]) -> list[str]:
        """A note when the engine already had layers the held images do not explain (another
        image in the engine holds them, e.g. the other arm's): a node holding only those
        images would pull them too."""
        known: set[str] = set()
        for ref in holds:
            digests = self._digests(ref)
            if isinstance(digests, str):
                return []  # the held images' layers are unknown: nothing to tell apart
            known |= digests
        extra = [x for x in rec.layers
                 if not x.pulled and not x.in_store and x.digest not in known]
        if not extra:
            return []
        size = sum(x.size for x in extra)
        return [f"{len(extra)} layer(s), {size} bytes, were already in the engine though no "
                "held image has them (something else there holds them: an image that is not "
                "this run's, or a lease of an earlier operation): the engine did not pull "
                "them, a node holding only "
                f"{', '.join(holds) or 'nothing'} would (node_holds gives its exact bytes)"]

    def _untag(self, name: str) -> None:
        try:
            self.client.api.remove_image(name)
        except Exception as e:
            if type(e).__name__ in ("ImageNotFound", "NotFound"):
                return
            raise CapabilityError(f"could not remove {name} from the engine to pull it: {e}",
                                  hint="is a container still using it?") from e

    def _other_names(self, img: ImageLayers) -> list[str]:
        try:
            attrs = self.client.api.inspect_image(img.manifest.digest)
        except Exception:
            return []
        return [str(t) for t in (attrs.get("RepoTags") or []) + (attrs.get("RepoDigests") or [])]

    def _restore(self, name: str, source: str) -> None:
        """Give the pulled image *name* back (pull it again when the measured pull failed)."""
        try:
            self.client.api.inspect_image(source)
        except Exception:
            _pull_quietly(self.client, source)
        repo, _, tag = name.rpartition(":")
        try:
            self.client.api.tag(source, repo, tag)
        except Exception as e:
            raise CapabilityError(f"could not give the pulled image its name {name} back: {e}",
                                  hint=f"docker pull {source} && docker tag {source} "
                                  f"{name}") from e

    def _ensure_present(self, refs: list[str], notes: list[str]) -> list[str]:
        """The images a warm-base node holds, pulled into the engine when missing."""
        holds = []
        for ref in refs:
            try:
                self.client.api.inspect_image(ref)
            except Exception:
                try:
                    _pull_quietly(self.client, ref)
                except CapabilityError as e:
                    notes.append(f"warm-base: {ref} could not be pulled, so the node does not "
                                 f"hold it: {e.message}")
                    continue
                self._remove_at_end(ref)
            holds.append(ref)
        return holds

    def _remove_at_end(self, ref: str) -> None:
        if ref not in self._registered:
            self._registered.add(ref)
            self.cleanup.image(ref)

    # -- what other nodes would pull
    def costs(self, arm: str, img: ImageLayers, bases: list[str]) -> list[NodeCost]:
        """What a node pulls holding nothing, the control (for another arm), the base images
        (all of them together), and each ``node_has`` image ("named")."""
        out = [NodeCost("nothing", None, img.total_bytes, len(img.layers))]
        control = self.arms.get("control")
        if arm != "control" and control is not None:
            out.append(NodeCost("control", control.ref,
                                *img.bytes_without(control.layer_digests)))
        if bases:
            out.append(self._cost("base", bases, img))
        out += [self._cost("named", [ref], img) for ref in self.settings.node_has]
        return out

    def _cost(self, kind: str, refs: list[str], img: ImageLayers) -> NodeCost:
        held: set[str] = set()
        for ref in refs:
            digests = self._digests(ref)
            if isinstance(digests, str):
                return NodeCost(kind, ", ".join(refs), None, None, f"{ref}: {digests}")
            held |= digests
        return NodeCost(kind, ", ".join(refs), *img.bytes_without(frozenset(held)))

    def _digests(self, ref: str) -> frozenset[str] | str:
        """The layer digests of *ref* from its registry, or why they are not known."""
        if ref not in self._layers_of:
            try:
                self._layers_of[ref] = read_layers(self.reg, ImageRef.parse(ref)).layer_digests
            except ServelabError as e:
                self._layers_of[ref] = f"layers not known: {e.message}"
        return self._layers_of[ref]


def _name_of(image: str) -> str | None:
    """``name:tag`` of a reference (``name:tag@sha256:...`` included); None for an ID or a
    digest-only reference."""
    name, tag, _digest = ImageRef.split(image)
    if not tag or is_digest(image) or image.startswith("sha256:"):
        return None
    return f"{name}:{tag}"


# ---------------------------------------------------------------------------- engine calls


def _event_error(ev: dict[str, Any]) -> str | None:
    err = ev.get("error") or (ev.get("errorDetail") or {}).get("message")
    return str(err) if err else None


def _push(archive: Path, digest: str, arm: str, target: str, reg: RegistryClient) -> str:
    """Push manifest *digest* of the OCI *archive* to *target*; ``repository@digest``."""
    from servelab.image.push import TestedImage, push_tested

    return push_tested(TestedImage(arm, digest, archive, 1), target, client=reg).ref


def _pull_events(client: Any, ref: str) -> list[tuple[float, dict[str, Any]]]:
    events: list[tuple[float, dict[str, Any]]] = []
    try:
        for ev in client.api.pull(ref, stream=True, decode=True):
            events.append((time.monotonic(), ev))
            err = _event_error(ev)
            if err:
                raise CapabilityError(f"the engine could not pull {ref}: {err}",
                                      hint="check the registry runs and the engine may "
                                      "pull from it (insecure-registries for plain http)")
    except ServelabError:
        raise
    except Exception as e:
        raise CapabilityError(f"the engine could not pull {ref}: {e}") from e
    return events


def _pull_quietly(client: Any, ref: str) -> None:
    _pull_events(client, ref)


#: where a Docker engine's containerd listens (its own, then a system one); namespace "moby"
CONTAINERD_SOCKETS = ("/var/run/docker/containerd/containerd.sock",
                      "/run/containerd/containerd.sock")


def content_store() -> frozenset[str] | None:
    """The blob digests in the engine's containerd content store (``ctr content ls``), or
    None when it cannot be read here (no ctr, no socket, not root, the classic store)."""
    if proc.which("ctr") is None:
        return None
    for sock in CONTAINERD_SOCKETS:
        if not Path(sock).exists():
            continue
        res = proc.run(["ctr", "--address", sock, "--namespace", "moby", "content", "ls",
                        "--quiet"], check=False, timeout=60)
        if res.returncode == 0:
            return frozenset(x for x in res.stdout.split() if is_digest(x))
    return None


def engine_pull(client: Any, ref: str, img: ImageLayers, holds: list[str]) -> PullRecord:
    """Pull *ref* (``host/repo@sha256:...``) through the engine and time it per layer; the
    content store is looked at first, so that a blob it kept is not counted as downloaded."""
    store = content_store()
    t0, w0 = time.monotonic(), time.time()
    events = _pull_events(client, ref)
    rec = pull_record(WARM_BASE, ref, img, holds, t0=t0, w0=w0, t_end=time.monotonic(),
                      events=events, in_store=store or frozenset())
    if store is None:
        rec.notes.append("the engine's content store could not be read (ctr): a layer whose "
                         "blob it still kept would count as downloaded")
    elif rec.bytes_in_store:
        n = sum(1 for x in rec.layers if x.in_store)
        rec.notes.append(f"{n} layer(s), {rec.bytes_in_store} bytes, were still in the "
                         "engine's content store though no image held them (a lease of an "
                         "earlier operation keeps them): the engine unpacked them without "
                         "downloading them; a node would download them")
    return rec
