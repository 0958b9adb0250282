"""One run's node measurements (:class:`NodeStarts`): each tested image pushed once to the
registry, pulled cold and warm-base every repeat, and removed at the end unless kept."""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab import proc
from servelab.errors import CapabilityError, CommandError, InputError, ServelabError
from servelab.image.oci import OciArchive
from servelab.image.ref import ImageRef, is_digest
from servelab.image.registry import RegistryClient
from servelab.node import containerd
from servelab.node.coldpull import ColdSettings, containerd_cold_pull, prepare_cache
from servelab.node.engine import engine_pull, pull_quietly, push_archive
from servelab.node.fetch import fetch_cold
from servelab.node.layers import ImageLayers, NodeCost, read_layers
from servelab.node.lazypull import (
    LazyRecord,
    LazySettings,
    SociIndex,
    account_bytes,
    build_index,
    lazy_not_measured,
    lazy_pull,
)
from servelab.node.ownregistry import Parking
from servelab.node.pull import PullRecord
from servelab.node.soci import LazyRegistry, SociContainerd, lazy_unavailable
from servelab.node.start import NodeStart

if TYPE_CHECKING:
    from servelab.node.ctrstart import CtrStart, CtrStartSpec
    from servelab.node.readbytes import ReadBeforeReady

REPOSITORY = "servelab-coldstart"
#: what a start from the private containerd may take beyond the readiness timeout
START_MARGIN_S = 60.0
#: lines of the server's output kept when its start on the lazy node was not ready
LAZY_LOG_LINES = 20


@dataclass
class NodeSettings:
    """``registry``: ``host[:port][/path]`` the tested images are pushed to; ``node_has``:
    images a node is assumed to hold (a named base), compared by layer; ``cold``: what the
    cold pull may use (the registry's data dir and log, the global cache drop)."""

    registry: str
    node_has: list[str] = field(default_factory=list)
    cold: ColdSettings = field(default_factory=ColdSettings)
    #: the lazy arm (``--lazy soci``; :mod:`servelab.node.lazypull`), None: not measured
    lazy: LazySettings | None = None
    #: the storage of a registry this run owns (``--cold-start-registry private``): its
    #: layer blobs are parked between repeats (:class:`~servelab.node.ownregistry.Parking`)
    own_storage: Path | None = None

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
        #: why the cold pulls cannot go through a private containerd (None: they do)
        self.cold_fallback = containerd.unavailable() or _needs_credentials(settings.registry)
        #: what the sweep of killed runs' private containerds removed, in words
        self.swept = containerd.sweep()
        #: the lazy arm's registry, and why it cannot be measured (None: it can, or it was
        #: not asked for); the SOCI index built per image (manifest digest)
        self.lazy_registry, self.lazy_fallback = self._lazy_setup()
        self._indexes: dict[str, SociIndex] = {}
        #: manifest digest -> the build's OCI archive of it (the lazy index is built from it)
        self._archives: dict[str, Path] = {}
        #: the repositories pushed to, in order: a later push mounts the layers they share
        self._repositories: list[str] = []
        #: what each push took, in words (taken into the next measured node's notes)
        self.push_notes: list[str] = []
        #: the run's own registry's layer blobs, out of its storage between repeats
        self.parking = Parking(settings.own_storage) if settings.own_storage else None

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
        built = archive is not None and digest is not None
        if archive is None or digest is None:
            archive, digest = self._save(image)
        result = push_archive(archive, digest, arm, f"{repo}:{digest.partition(':')[2][:16]}",
                              self.reg, mount_from=tuple(self._repositories))
        pushed = ImageRef.parse(result.ref)
        self.push_notes.append(
            f"pushed {key[:19]}: {result.blobs_uploaded} blob(s) sent ({result.bytes_uploaded}"
            f" bytes), {result.blobs_mounted} mounted from this run's other repositories, "
            f"{result.blobs_present} already there")
        img = read_layers(self.reg, pushed)
        self._repositories.append(pushed.repository)
        if built:
            self._archives[img.manifest.digest] = archive
        if not self.keep:
            self.cleanup.callback(lambda: self._unpublish(result.ref),
                                  f"registry manifest {result.ref}")
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
                digest: str | None = None, start: CtrStartSpec | None = None,
                no_start: str | None = None) -> NodeStart:
        """Both pulls of *image* (the arm's tested image; *archive* and *digest* as for
        :meth:`publish`) and what other nodes would pull; afterwards *image* is in the engine
        again, under the same name. With *start*, the server is started from the private
        containerd right after its cold pull (:func:`~servelab.node.ctrstart.start_in`);
        *no_start* says why it is not (a GPU arm)."""
        back = self._unpark(archive, digest)
        img = self.publish(image, arm, archive, digest)
        held = [*bases, *self.settings.node_has]
        node = NodeStart(self.settings.registry, img, None, None, self.costs(arm, img, bases),
                         cold_fallback=self.cold_fallback)
        node.notes += [*back, *self.push_notes]
        self.push_notes = []
        name = self._out_of_engine(image, img)
        try:
            node.cold = self._cold(img, start, node)
            if node.cold_start is None and node.cold_start_skipped is None:
                node.cold_start_skipped = (no_start or "no start spec given")
            node.lazy = self._lazy(img, start, node, no_start)
        except Exception:
            if name is not None:  # not on Ctrl-C/SIGTERM: the run ends
                self._bring_back([(name, img.ref)])
            raise
        node.warm = self._warm_base(img, image, held, node.notes)
        self.arms[arm] = img
        self._park(img, node.notes)
        return node

    def _unpark(self, archive: Path | None, digest: str | None) -> list[str]:
        """The parked layers of the image about to be pulled, back in the registry (copied
        from *archive*, which holds them); a note saying so, when any were."""
        if self.parking is None or not self.parking.parked or archive is None or not digest:
            return []
        with OciArchive(archive) as src:
            wanted = {layer.digest for pm in src.platform_manifests() if pm.digest == digest
                      for layer in pm.layers}
        if not wanted & self.parking.parked.keys():
            return []
        self.progress(f"  cold start: the registry's layers back from {archive.name}")
        t0 = time.monotonic()
        wrote = self.parking.restore(wanted, archive)
        return [f"the run's registry got {wrote} bytes of parked layers back from "
                f"{archive.name} in {time.monotonic() - t0:.1f} s (checked by digest)"]

    def _park(self, img: ImageLayers, notes: list[str]) -> None:
        """The image's layers out of the run's own registry until its next pull."""
        archive = self._archives.get(img.manifest.digest)
        if self.parking is None or archive is None:
            return
        freed = self.parking.park([(b.digest, b.size) for b in img.layers], archive)
        if freed:
            notes.append(f"the run's registry parked {freed} bytes of layers until the next "
                         f"pull (put back from {archive.name}, checked by digest)")

    def _cold(self, img: ImageLayers, start: CtrStartSpec | None, node: NodeStart
              ) -> PullRecord:
        """Through a fresh private containerd (and the start from it, with *start*);
        servelab's own fetch where none can run."""
        if self.cold_fallback is None:
            self.progress(f"  cold start: private containerd pull of {len(img.layers)} layers "
                          f"({img.total_bytes} bytes)")

            def then(pc: containerd.PrivateContainerd) -> None:
                if start is not None:
                    node.cold_start = self._start_in(pc, img, start, node)
                    node.read_before_ready = self._read_before_ready(pc, img, start, node)

            return containerd_cold_pull(img, self.settings.cold, self.run_id, self.cleanup,
                                        then=then)
        node.cold_start_skipped = ("the cold pull was servelab's own fetch, not a private "
                                   "containerd")
        work = Path(tempfile.mkdtemp(prefix="servelab-cold-"))
        self.cleanup.path(work)
        self.progress(f"  cold start: fetching {len(img.layers)} layers "
                      f"({img.total_bytes} bytes) into an empty directory")
        cache = prepare_cache(self.settings.cold, [b.digest for b in (img.config, *img.layers)])
        try:
            rec = fetch_cold(self.reg, img, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rec.notes.append(f"page cache before the fetch: {cache}")
        return rec

    # -- the lazy arm
    def _lazy_setup(self) -> tuple[LazyRegistry | None, str | None]:
        lazy = self.settings.lazy
        if lazy is None:
            return None, None
        reg, why = lazy.resolve(self.settings.registry)
        why = why or lazy_unavailable()
        if why is not None and lazy.required:
            raise CapabilityError(f"lazy pulling (--require-lazy) cannot be measured here: {why}",
                                  hint="run `servelab doctor` (lazy pulling (SOCI)); or leave "
                                  "--require-lazy out to record it as not measured")
        return reg, why

    def lazy_node(self, img: ImageLayers
                  ) -> contextlib.AbstractContextManager[tuple[SociContainerd, LazyRecord]]:
        """One lazy pull of *img* (its SOCI index built and pushed first, once per image): a
        context yielding the running instance, with the image's snapshots prepared by the
        snapshotter ``soci``, and the pull's record. CapabilityError when it cannot run."""
        if self.settings.lazy is None or self.lazy_registry is None:
            raise CapabilityError(f"lazy pulling cannot be measured: {self.lazy_fallback}")
        index = self._indexes.get(img.manifest.digest)
        if index is None:
            self.progress(f"  cold start: building the SOCI index of {img.ref}")
            index = build_index(img, self.lazy_registry, self.run_id, self.cleanup,
                                min_layer_size=self.settings.lazy.min_layer_size,
                                keep=self.keep, archive=self._archives.get(img.manifest.digest))
            self._indexes[img.manifest.digest] = index
        if index.unusable is not None:
            raise CapabilityError(f"lazy pulling cannot be measured: {index.unusable}",
                                  hint="see docs/run.md, \"Lazy pulling (SOCI)\"")
        self.progress(f"  cold start: lazy pull (SOCI) of {len(index.ztocs)} indexed layers")
        return lazy_pull(img, self.lazy_registry, index, self.run_id, self.cleanup,
                         drop_caches=self.settings.cold.drop_caches)

    def _lazy(self, img: ImageLayers, start: CtrStartSpec | None = None,
              node: NodeStart | None = None, no_start: str | None = None
              ) -> dict[str, Any] | None:
        """``metrics.coldstart.lazy``: the lazy pull and, with *start* (the same spec as the
        cold start's), the server started on the lazy node (snapshotter ``soci``), its phases
        in *node*'s ``lazy_start``, and the bytes fetched and read up to ready; or why it was
        not measured."""
        if self.settings.lazy is None:
            return None
        if self.lazy_fallback is not None:
            return lazy_not_measured(self.lazy_fallback)
        try:
            with self.lazy_node(img) as (pc, rec):
                started = self._lazy_start(pc, rec, img, start, no_start)
        except (CapabilityError, CommandError) as e:  # CommandError: a soci call timed out
            if self.settings.lazy.required:
                raise
            return lazy_not_measured(e.message)
        index = self._indexes[img.manifest.digest]
        out = {**rec.to_dict(), "index": index.to_dict()}
        if index.coverage_unchecked:
            out["notes"] = [*out.get("notes", []), index.coverage_unchecked]
        if started is not None:
            out["start_outcome"] = started.outcome
            if not started.ready:
                out["start_log_tail"] = started.log_tail[-LAZY_LOG_LINES:]
            if node is not None:
                node.with_lazy_start(started.phases())
        return out

    def _lazy_start(self, pc: SociContainerd, rec: LazyRecord, img: ImageLayers,
                    spec: CtrStartSpec | None, no_start: str | None) -> CtrStart | None:
        """The server started on the lazy node right after the lazy pull, with the cold
        start's spec and the snapshotter ``soci``; the bytes fetched and read are counted at
        ready (at the end of the start when it never was). None: not started (a note says
        why; the bytes are then the pull's own)."""
        from servelab.node.ctrstart import start_in

        why = (no_start or "no start spec given") if spec is None else (
            "the lazy pull failed" if rec.pull_s is None else None)
        if spec is None or why is not None:
            account_bytes(pc, rec, img)
            rec.notes.append(f"pull only: the server was not started on the lazy node ({why}), "
                             "so bytes fetched and read are the pull's own, not those read "
                             "before ready")
            return None
        self.progress("  cold start: starting the server on the lazy node (snapshotter soci)")
        counted: list[bool] = []

        def at_ready(_started: CtrStart) -> None:
            account_bytes(pc, rec, img)
            counted.append(True)

        try:
            started = start_in(pc, rec.ref, spec, snapshotter="soci", cleanup=self.cleanup,
                               timeout_s=spec.readiness_timeout_s + START_MARGIN_S,
                               on_ready=at_ready)
        except ServelabError as e:
            account_bytes(pc, rec, img)
            rec.notes.append(f"the start on the lazy node failed: {e.message}; bytes fetched "
                             "and read are the pull's own")
            return None
        if not counted:
            account_bytes(pc, rec, img)
            last = f"; its last line: {started.log_tail[-1][:200]}" if started.log_tail else ""
            rec.notes.append("the server on the lazy node was not ready ("
                             + ("; ".join(started.notes[-2:]) or started.outcome) + last
                             + "): bytes fetched and read are those up to the end of its start")
        return started

    def _start_in(self, pc: containerd.PrivateContainerd, img: ImageLayers,
                  spec: CtrStartSpec, node: NodeStart) -> CtrStart | None:
        """The server started in *pc* right after its pull; None (and why, in the node's
        notes) when the start could not be made."""
        from servelab.node.ctrstart import start_in

        try:
            return start_in(pc, img.ref, spec, cleanup=self.cleanup,
                            timeout_s=spec.readiness_timeout_s + START_MARGIN_S)
        except ServelabError as e:
            node.cold_start_skipped = f"the start from the private containerd failed: {e.message}"
            return None

    def _read_before_ready(self, pc: containerd.PrivateContainerd, img: ImageLayers,
                           spec: CtrStartSpec, node: NodeStart) -> ReadBeforeReady:
        """The untimed start after the timed one: what the server read of the unpacked image
        before it was ready (:mod:`servelab.node.readbytes`)."""
        from servelab.node.readbytes import ReadBeforeReady, read_before_ready

        if node.cold_start is None or not node.cold_start.ready:
            return ReadBeforeReady(False, img.total_bytes, notes=[
                "not measured: the timed start from the private containerd was not ready"])
        return read_before_ready(pc, img.ref, spec, bytes_pulled=img.total_bytes,
                                 cleanup=self.cleanup,
                                 timeout_s=spec.readiness_timeout_s + START_MARGIN_S)

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

    def release(self, digest: str) -> bool:
        """The repeat of *digest* is done: the name its warm-base pull left in the engine goes
        (the run's own name goes with the build's release), so that the next repeat's build
        does not run beside a second unpacked copy of the image (a 2.1 GB image's peak moved
        by 3.3 GB with it; docs/run.md, "Disk"). Kept with ``keep``; True when a name went."""
        if self.keep:  # kept: still set aside for another image's warm-base pull
            return False
        entry = self._in_engine.pop(digest, None)
        if entry is None:
            return False
        try:
            self._untag(entry[1])
        except CapabilityError:
            return False  # still in use: removed at the run's end
        return True

    def _out_of_engine(self, image: str, img: ImageLayers) -> str | None:
        """servelab's names of *image* out of the engine before the node pulls, so that the
        disk holds one copy of the image at the cold pull (the private node's), not two (docs/
        run.md, "Disk"): the warm-base pull takes them out anyway and gives the image back,
        pulled, under the same name. The name taken out, or None (no warm-base pull)."""
        name = _name_of(image)
        if name is None:
            return None
        try:
            self._take_out(name, img.ref)
        except CapabilityError:
            return None  # still in use: the warm-base pull tries again, and says why
        return name

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
            pull_quietly(self.client, source)
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
                    pull_quietly(self.client, ref)
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


def _needs_credentials(registry: str) -> str | None:
    """Why a private containerd's pull cannot reach *registry*: ``ctr`` takes credentials only
    on its command line, where every process on the machine could read them."""
    from servelab.image.registry import credentials_for

    host = registry.partition("/")[0]
    if credentials_for(host) is None:
        return None
    return (f"the registry {host} has credentials (Docker config or SERVELAB_REGISTRY_USER), "
            "which `ctr` would take only on its command line, visible to every process: "
            "use a registry that allows anonymous pulls for cold starts")


def _name_of(image: str) -> str | None:
    """``name:tag`` of a reference (``name:tag@sha256:...`` included); None for an ID or a
    digest-only reference."""
    name, tag, _digest = ImageRef.split(image)
    if not tag or is_digest(image) or image.startswith("sha256:"):
        return None
    return f"{name}:{tag}"
