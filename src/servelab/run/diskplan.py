"""Will the run fit? Its peak disk per filesystem, estimated before any build.

API::

    plan = estimate(exp, opts, engine_root)     # -> Plan (.needs per filesystem, .sizes)
    plan.check()                                # DiskShort (exit 3) when it cannot fit
    plan = replan(plan, uncompressed, compressed)   # after the first build: the real sizes
    plan = unreproduced(plan, arm)              # an arm's builds gave two digests

The model (docs/run.md, "Disk"). With U the image's uncompressed size and C its compressed
size, the run goes through two phases that hold the most:

* **build** (each repeat): the engine's data root holds the build's snapshots and BuildKit's
  blobs (U + C, :func:`servelab.build.export.engine_peak`) and the context's transfer;
  ``--out`` the archives of the distinct images (one per arm at most, the one being written
  included: BuildKit's own archive streams through a pipe, and a repeat that reproduces
  writes nothing); the registry's storage the pushed blobs of the images built before (C
  each), none with the run's own registry (``private``), which parks its layers between
  pulls. The last build of the run is the fullest.
* **cold pull** (each repeat, with a cold-start registry): TMPDIR holds the private
  containerd's content and snapshots (U + C), ``--out`` both arms' archives (2C), the registry
  both arms' blobs (2C; the run's own registry the pulled image's only, C); the engine's copy
  of the image was taken out before the pull and comes back with the **warm-base pull**
  (U + C in the engine) once the private root is gone.
* **the context's transfer** (X, the build context's bytes): BuildKit holds one build's at a
  time (each is pruned after its build); counted in the build phase, and in the pulls' as a
  margin.

Nothing grows with the repeats: each build's cache is pruned once its record is written
(:mod:`servelab.build.cache`), the engine's image goes when the repeat is done, one archive
per distinct digest, blobs are pushed once, every cold and lazy root is removed after its
pull. What does grow: ``--keep`` holds every distinct image in the engine (+ U + C each), and
an arm that does not reproduce keeps one archive and one set of pushed blobs per distinct
digest (+ 2C each; the diff of two digests reads two archives): once an arm's builds give two
digests, the plan counts one image per build and is checked again before the next build.

Before the first build, U and C are estimated from the bases (their size in the engine, when
there) and the build context: an install multiplies what the context brings
(:data:`INSTALL_FACTOR`: wheels of 4.3 GB installed to 9.3 GB for vLLM), and C is taken as the
base's compressed size plus the context (wheels and models hardly compress). The first build
gives the real sizes, and the plan is checked again before the next build.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.errors import CapabilityError, ServelabError

if TYPE_CHECKING:
    from servelab.run.options import RunOptions
    from servelab.spec import Arm, Experiment

#: installed bytes per byte of build context (pip wheels -> site-packages: the vLLM image's
#: 10.08 GB from a 4.3 GB wheelhouse on a 0.17 GB base)
INSTALL_FACTOR = 2.3
#: uncompressed bytes of a base per compressed byte the engine reports for it
BASE_RATIO = 2.5
#: files walked in a context before the estimate stops counting (and says so)
MAX_CONTEXT_FILES = 200_000
#: free bytes every filesystem keeps beyond the estimate (SERVELAB_MIN_FREE_BYTES, as the
#: build's own check before each build)
FLOOR = (int(os.environ["SERVELAB_MIN_FREE_BYTES"])
         if os.environ.get("SERVELAB_MIN_FREE_BYTES", "").isdigit() else 1024**3)


class DiskShort(CapabilityError):
    """The run's peak would not fit on a filesystem (exit 3)."""


@dataclass
class Need:
    """What one filesystem must hold at the run's peak."""

    path: Path
    label: str
    bytes: int
    free: int
    why: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.free >= self.bytes + FLOOR

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "label": self.label, "bytes": self.bytes,
                "free": self.free, "fits": self.fits, "why": list(self.why)}


@dataclass
class Plan:
    uncompressed: int
    compressed: int
    #: where the sizes came from: "estimate" (bases and context) or "first build"
    source: str
    paths: dict[str, Path]
    arms: int
    cold: bool
    keep: bool
    build: bool
    notes: list[str] = field(default_factory=list)
    #: bytes already on each filesystem label that the peak counts (after the first build)
    held: dict[str, int] = field(default_factory=dict)
    #: the build context's bytes: BuildKit holds its transfer (one record per context
    #: directory) while a build runs; pruned after it (build.cache.prune_transfers), it is
    #: still counted in the pulls' phases, a margin
    context: int = 0
    #: the estimate made before building (its :meth:`to_dict`), once the first build
    #: replaced it: what a reader compares with the run's real peak
    before: dict[str, Any] | None = None
    #: builds per arm (1 for a shard): how many archives and pushed images the last build
    #: finds on the disk
    repeats: int = 1
    #: False once an arm's builds gave two digests: from then on every build may be a new
    #: image, with its own archive and pushed blobs (:func:`unreproduced`)
    reproduces: bool = True
    #: the run's own registry (``--cold-start-registry private``): it holds the layers of the
    #: image being pulled only, parked between pulls (:class:`servelab.node.ownregistry.Parking`)
    parks: bool = False

    @property
    def images(self) -> int:
        """Distinct images the run may hold at once: one per arm, or one per build once the
        builds do not reproduce."""
        return self.arms if self.reproduces else self.arms * max(1, self.repeats)

    @property
    def prior(self) -> int:
        """Distinct images built before the run's last build (one per arm at most, while the
        builds reproduce)."""
        return min(self.images, self.arms * max(1, self.repeats) - 1)

    @property
    def needs(self) -> list[Need]:
        return needs(self)

    def check(self) -> None:
        short = [n for n in self.needs if not n.fits]
        if short:
            raise DiskShort(refusal(self, short), hint=how_to_fit(self))

    def to_dict(self) -> dict[str, Any]:
        return {"uncompressed_bytes": self.uncompressed, "compressed_bytes": self.compressed,
                "source": self.source, "needs": [n.to_dict() for n in self.needs],
                "held_bytes": dict(self.held), "notes": list(self.notes),
                **({"before_building": self.before} if self.before is not None else {})}


def gib(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def phases(p: Plan) -> dict[str, list[tuple[str, float, str]]]:
    """(filesystem label, bytes, why) held at once in each phase."""
    from servelab.build.export import BUILDKIT_BLOBS_PER_COMPRESSED_BYTE, engine_peak

    u, c = p.uncompressed, p.compressed
    kept = p.arms * (u + c) if p.keep else 0
    out: dict[str, list[tuple[str, float, str]]] = {}
    if p.build:
        n = p.prior
        # the archives on --out at the fullest build: the distinct images built before and
        # the one being written; a repeat that gives an image built before writes nothing
        # (its layers are matched as BuildKit's export streams in), so while the builds
        # reproduce that is one per arm
        k = min(n + 1, p.images)
        out["build"] = [
            ("engine", engine_peak(u, c) + kept + p.context,
             f"build: U + {BUILDKIT_BLOBS_PER_COMPRESSED_BYTE:g} x C in the engine (the "
             "snapshots, BuildKit's blobs)" + (", + U + C per kept image" if kept else "")
             + (", + the context's transfer" if p.context else "")),
            ("out", k * c,
             f"build: {k} x C in --out (the archives of the distinct images, the one being "
             "written included; a repeat that reproduces writes none)"),
        ]
        if p.cold and n and not p.parks:
            out["build"].append(("registry", n * c,
                                 f"build: {n} x C, the blobs pushed in an earlier repeat"))
    if p.cold:
        pushed = c if p.parks else p.images * c
        held = ("the pulled image's blobs (the run's own registry parks the layers between "
                "pulls)" if p.parks else "each distinct image's blobs, pushed once")
        transfer = p.context if p.build else 0
        # the engine's copy is taken out before the node pulls (node.session) and comes
        # back with the warm-base pull, after the private node's root is gone
        out["cold pull"] = [
            ("engine", kept + transfer,
             "cold pull: the tested image out of the engine"
             + (", the context's transfer" if transfer else "")),
            ("tmp", u + c, "cold pull: the private containerd's content and snapshots "
                           "(U + C)"),
            ("out", p.images * c, "cold pull: one archive per distinct image"),
            ("registry", pushed, f"cold pull: {held}"),
        ]
        out["warm-base pull"] = [
            ("engine", u + c + kept + transfer,
             "warm-base pull: the image back in the engine (U + C)"
             + (" and the context's transfer" if transfer else "")),
            ("out", p.images * c, "warm-base pull: one archive per distinct image"),
            ("registry", pushed, f"warm-base pull: {held}"),
        ]
    return out


def needs(p: Plan) -> list[Need]:
    """Per filesystem (paths on one device are summed), the largest phase's bytes."""
    devs: dict[int, tuple[Path, list[str]]] = {}
    for label, path in p.paths.items():
        d = _device(path)
        if d in devs:
            devs[d][1].append(label)
        else:
            devs[d] = (path, [label])
    result: list[Need] = []
    for path, labels in devs.values():
        best, why = 0.0, list[str]()
        for parts in phases(p).values():
            total = sum(b for lbl, b, _ in parts if lbl in labels)
            if total > best:
                best, why = total, [w for lbl, b, w in parts if lbl in labels and b]
        held = sum(p.held.get(lbl, 0) for lbl in labels)
        result.append(Need(path, "/".join(labels), max(0, int(best) - held), _free(path), why))
    return result


def refusal(p: Plan, short: list[Need]) -> str:
    parts = [f"needs ~{gib(n.bytes + FLOOR)} on {n.path} ({n.label}), {gib(n.free)} free"
             for n in short]
    return ("the run will not fit on this machine's disk: " + "; ".join(parts)
            + f" (image estimated at U={gib(p.uncompressed)} uncompressed, "
              f"C={gib(p.compressed)} compressed, from the {p.source}"
            + "; peak = the largest of: " + "; ".join(
                w for n in short for w in n.why) + f"; with a {gib(FLOOR)} floor)")


def how_to_fit(p: Plan) -> str:
    tips = ["free disk on those filesystems (remove old output dirs, docker image prune)"]
    if p.cold:
        tips.append("--stages lint,build,scan (no cold pull: U + C less in TMPDIR and the "
                    "engine's loaded image is the peak)")
    if p.arms > 1:
        tips.append("shards: one (arm, repeat) per runner (servelab run --shard ARM:N, then "
                    "servelab report on the shard directories; "
                    "workflows-examples/big-image-shards.yml)")
    tips.append("lazy pulls (--lazy soci) measure the start without the full pull's root on "
                "the node, where the full cold pull is what does not fit")
    tips.append("point TMPDIR or --out at a filesystem with room")
    if p.keep:
        tips.append("drop --keep (it holds every image in the engine)")
    return "; ".join(tips)


# ---------------------------------------------------------------------------- estimate


def estimate(bases: list[str], contexts: list[Path], *, paths: dict[str, Path], arms: int,
             cold: bool, keep: bool, build: bool, client: Any = None,
             repeats: int = 1, parks: bool = False) -> Plan:
    """The plan from the bases' sizes in the engine and the contexts' bytes."""
    notes: list[str] = []
    base_c = 0
    for ref in dict.fromkeys(bases):
        size = _base_size(ref, client)
        if size is None:
            notes.append(f"base {ref}: not in the engine, its size is not counted")
        else:
            base_c = max(base_c, size)
    ctx = 0
    for c in dict.fromkeys(contexts):
        n, complete = context_bytes(c)
        ctx = max(ctx, n)
        if not complete:
            notes.append(f"not fully checked: the context {c}, more than "
                         f"{MAX_CONTEXT_FILES} files (counted up to there)")
    u = int(BASE_RATIO * base_c + INSTALL_FACTOR * ctx)
    # one context's transfer at a time: each build's is pruned after it
    return Plan(u, base_c + ctx, "estimate (bases and context)", paths, arms, cold, keep,
                build, notes, context=ctx if build else 0, repeats=repeats, parks=parks)


def replan(p: Plan, uncompressed: int, compressed: int) -> Plan:
    """The plan with the first build's real sizes; what that build left is already on disk
    (its archive in --out, its loaded image in the engine)."""
    held = {"out": compressed, "engine": uncompressed + compressed}
    held["engine"] += p.context  # the first build's context transfer
    return Plan(uncompressed, compressed, "first build", p.paths, p.arms, p.cold, p.keep,
                p.build, list(p.notes), held, p.context, p.to_dict(), p.repeats,
                p.reproduces, p.parks)


def unreproduced(p: Plan, arm: str, built: int = 2) -> Plan:
    """The plan once *arm*'s builds gave a second digest: each later build may be another
    image, kept as an archive and pushed (+ 2C per build at worst), which the plan made while
    builds reproduce did not count; checked again before the next build. *built*: the
    distinct images on the disk now (their archives, all but the last one pushed), which the
    peak counts and the free space already lacks."""
    if not p.reproduces:
        return p
    note = (f"arm {arm}: its builds do not reproduce, so each may keep its own archive and "
            "pushed blobs: the plan counts one image per build from now on")
    c = p.compressed
    held = {**p.held, "out": built * c, "registry": 0 if p.parks else max(0, built - 1) * c}
    return dataclasses.replace(p, reproduces=False, notes=[*p.notes, note], held=held)


def context_bytes(path: Path) -> tuple[int, bool]:
    """Bytes of the regular files under *path* (links not followed); False when the walk
    stopped at :data:`MAX_CONTEXT_FILES`."""
    total, files = 0, 0
    for top, _dirs, names in os.walk(path):
        for name in names:
            files += 1
            if files > MAX_CONTEXT_FILES:
                return total, False
            try:
                st = (Path(top) / name).lstat()
            except OSError:
                continue
            total += st.st_size
    return total, True


def _base_size(ref: str, client: Any) -> int | None:
    if client is None:
        return None
    try:
        return int(client.api.inspect_image(ref).get("Size") or 0)
    except Exception:
        return None


def _existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _device(path: Path) -> int:
    return _existing(path).stat().st_dev


def _free(path: Path) -> int:
    return shutil.disk_usage(_existing(path)).free


# ---------------------------------------------------------------------------- a run's plan


def plan_for(exp: Experiment, opts: RunOptions, arms: list[Arm]) -> Plan:
    """The plan of ``servelab run``/``build`` with *opts* over *arms*."""
    from servelab.build.stage import _docker_root, base_images
    from servelab.errors import InputError
    from servelab.node.ownregistry import PRIVATE

    build = "build" in opts.stages and any(a.image is None for a in arms)
    cold = "smoke" in opts.stages and opts.cold_start_registry is not None
    paths = {"out": opts.out_dir, "tmp": Path(tempfile.gettempdir())}
    root = _docker_root()
    if root is not None:
        paths["engine"] = root
    if cold and opts.cold_start_registry == PRIVATE:  # its storage is under TMPDIR
        paths["registry"] = paths["tmp"]
    elif cold and opts.registry_data is not None:
        paths["registry"] = opts.registry_data
    bases: list[str] = [a.image for a in arms if a.image]
    for a in arms:
        if a.image is None:
            try:
                bases += [b.ref for b in base_images(a)]
            except (InputError, OSError):
                continue
    client = _client()
    try:
        plan = estimate(bases, [a.context for a in arms if a.image is None and
                                a.context.is_dir()], paths=paths, arms=len(arms), cold=cold,
                        keep=opts.keep, build=build, client=client,
                        repeats=1 if opts.shard else (opts.repeats or exp.repeats),
                        parks=cold and opts.cold_start_registry == PRIVATE)
    finally:
        if client is not None:
            client.close()
    if root is None:
        plan.notes.append("disk plan: the engine's data root is not on this machine, "
                          "not checked")
    return plan


def _client() -> Any:
    from servelab.cleanup import docker_client

    try:
        return docker_client()
    except (ServelabError, Exception):
        return None


# ---------------------------------------------------------------------------- a full disk

NO_SPACE = "no space left on device"
STOPPED_FILE = "stopped.json"


def is_disk_full(e: BaseException) -> bool:
    """ENOSPC, raised here or reported by a tool (buildx, docker load, containerd)."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(e) + " " + str(getattr(e, "stderr", "") or "")
    return NO_SPACE in text.lower() or "disk quota exceeded" in text.lower()


class DiskFull(CapabilityError):
    """A filesystem filled up mid-run (exit 3)."""


def stop_disk_full(out_dir: Path, e: BaseException, results: list[dict[str, Any]]) -> DiskFull:
    """What the run leaves when a disk filled: the archives removed (what the run made in
    the engine, TMPDIR and the registry went with the stages' exit), the results written so
    far kept, and ``stopped.json`` with the reason. The error to raise."""
    from servelab.textio import write_text_atomic

    shutil.rmtree(out_dir / "images", ignore_errors=True)
    for partial in out_dir.glob("*/repeat-*/.partial*"):
        partial.unlink(missing_ok=True)
    why = (e.message if isinstance(e, ServelabError) else str(e)).strip().splitlines()
    reason = "a disk filled up mid-run: " + (why[-1] if why else NO_SPACE)
    doc = {"stopped": True, "reason": reason,
           "finished": [{"arm": r.get("arm"), "repeat": r.get("repeat")} for r in results]}
    note = ""
    try:
        write_text_atomic(out_dir / STOPPED_FILE, json.dumps(doc, indent=2) + "\n")
    except (OSError, ServelabError) as err:
        note = f" (and {STOPPED_FILE} could not be written: {err})"
    return DiskFull(
        f"{reason}; everything the run made was removed; {out_dir} keeps the "
        f"{len(results)} result(s) measured and {STOPPED_FILE}{note}",
        hint="free disk or point TMPDIR/--out at a larger filesystem; servelab run checks "
        "the run's peak before building, but a build that writes more than its context "
        "suggests can still fill a disk (docs/run.md, \"Disk\")")
