"""The build stage: independent no-cache rebuilds, exported as OCI, recorded, and judged.

API::

    with Builds(run_id, store_dir=OUT / "images", cleanup=cu) as builds:   # probes the builder
        rec = builds.build(arm, settings, repeat=1, out_dir=OUT / "treatment" / "repeat-1")
        ...                                                  # -> BuildRecord (.to_dict())
    rep = verdict([rec1, rec2, rec3])                        # -> Reproducibility (.to_dict())

    build_arm(arm, settings, repeat=1, out_dir=..., run_id=...)   # one build, its own Builds

``servelab build`` loops over repeats and arms in the runner
(:func:`servelab.run.runner.build_experiment`, only the build stage), which hands back an
:class:`ExperimentBuilds`.

Each build runs ``docker buildx build --no-cache --provenance=false --sbom=false`` with
``--output type=oci,dest=...,compression=zstd`` (servelab clamps the timestamps itself while
it re-gzips: :mod:`servelab.build.clamp`), ``SOURCE_DATE_EPOCH``
from the spec or from the commit time of the context's last commit, and ``--network`` when the
spec asks for ``none`` or ``host``. That archive is an intermediate, never on disk: BuildKit
writes it into a named pipe (:mod:`servelab.build.streamed`) and it is turned into the
registry-shaped (gzip) archive by :mod:`servelab.build.export` as it comes; the shaped one is
read back (per-platform manifests, config, layers, sizes) and loaded with ``docker load``; with
the containerd image store the loaded image's ID is its manifest digest. One archive
(``<store>/<hex>.oci.tar``) and one loaded image (``servelab/<run id>/<arm>:<hex 16>``) are
kept per distinct manifest digest; loaded images are registered with the caller's
:class:`~servelab.cleanup.Cleanup` (removed at its end unless it keeps them). Images carry no
run-id label: a label would change the digest under test; they are found by their
``servelab/<run id>/`` name instead.

Refusals: an unpinned base (``base-unpinned``, exit 1) unless the arm allows it; less free disk
than :func:`servelab.build.export.disk_needed` says for the last image's size (exit 3); no
builder able to export OCI with rewritten timestamps (exit 3, see :mod:`servelab.build.builder`).
A failed or timed out build is :class:`BuildFailed` (exit 1) with the log's tail; the whole log is
``build.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from servelab import logs, proc
from servelab.build import builder as builder_mod
from servelab.build import buildkit, cache, export, streamed
from servelab.errors import (
    CapabilityError,
    CommandError,
    GateFailed,
    InputError,
    ServelabError,
)
from servelab.image.ref import pinned_digest
from servelab.spec import Arm, BuildSettings
from servelab.textio import cache_dir, write_file, write_text_atomic

DEFAULT_MIN_FREE_BYTES = 1024**3
LOG_FILE = "build.log"
RECORD_FILE = "build.json"


class BuildFailed(GateFailed):
    """docker buildx build failed or timed out (exit 1): the Dockerfile does not build."""


class BaseUnpinned(GateFailed):
    """The build refuses a base image that is not pinned by digest (rule base-unpinned)."""


# ---------------------------------------------------------------------------- the record


@dataclass
class LayerRecord:
    digest: str
    media_type: str
    size: int
    uncompressed_size: int | None
    diff_id: str | None
    instruction: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PlatformRecord:
    platform: str
    manifest_digest: str
    manifest_size: int
    config_digest: str
    config_size: int
    layers: list[LayerRecord]

    @property
    def layers_size(self) -> int:
        return sum(x.size for x in self.layers)

    @property
    def compressed_size(self) -> int:
        """Manifest + config + compressed layers: what a node pulls for this platform, and what
        ``docker image inspect`` reports as Size with the containerd image store."""
        return self.manifest_size + self.config_size + self.layers_size

    @property
    def uncompressed_size(self) -> int | None:
        sizes = [x.uncompressed_size for x in self.layers]
        if any(s is None for s in sizes):
            return None
        return sum(s for s in sizes if s is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "manifest_digest": self.manifest_digest,
                "manifest_size": self.manifest_size, "config_digest": self.config_digest,
                "config_size": self.config_size, "layers_size": self.layers_size,
                "compressed_size": self.compressed_size,
                "uncompressed_size": self.uncompressed_size,
                "layers": [x.to_dict() for x in self.layers]}


@dataclass
class BaseImage:
    ref: str
    digest: str | None
    stage: str
    pinned: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BuildRecord:
    """Everything one build produced and how (see to_dict for the JSON keys)."""

    arm: str
    repeat: int
    run_id: str
    dockerfile: str
    context: str
    target: str | None
    requested_platform: str | None
    network: str
    build_args: dict[str, str]
    source_date_epoch: int
    source_date_epoch_from: str
    rewrite_timestamp: bool
    platforms: list[PlatformRecord]
    index_digest: str | None
    base_images: list[BaseImage]
    builder: builder_mod.BuilderFacts
    archive: str
    image_ref: str | None
    image_id: str | None
    loaded_now: bool
    wall_s: float
    build_s: float
    load_s: float
    log: str
    notes: list[str] = field(default_factory=list)
    #: making the registry-shaped archive (servelab.build.export): the seconds it went on
    #: after buildx had exited (it runs while BuildKit exports: export["seconds"] is its whole
    #: time), and what it did
    shape_s: float = 0.0
    export: dict[str, Any] = field(default_factory=dict)
    #: the build's BuildKit cache, pruned before the record is written (build.cache)
    cache: dict[str, Any] = field(default_factory=dict)
    #: of build_s, BuildKit's export (its ``exporting ...`` steps: the layers compressed and
    #: the archive written); None where buildx gave no step times
    buildkit_export_s: float | None = None

    @property
    def primary(self) -> PlatformRecord:
        return self.platforms[0]

    @property
    def manifest_digest(self) -> str:
        return self.primary.manifest_digest

    @property
    def digest_key(self) -> tuple[str, ...]:
        """What must be equal across repeats: every platform's manifest digest."""
        return tuple(sorted(f"{p.platform}={p.manifest_digest}" for p in self.platforms))

    @property
    def overhead_s(self) -> float:
        """servelab's own time: wall time minus docker buildx build, docker load and the
        gzip compression of the registry-shaped layers (shape_s)."""
        return max(0.0, self.wall_s - self.build_s - self.load_s - self.shape_s)

    def tested_ref(self) -> str | None:
        return f"{self.image_ref}@{self.manifest_digest}" if self.image_ref else None

    def to_dict(self) -> dict[str, Any]:
        p = self.primary
        return {
            "arm": self.arm, "repeat": self.repeat, "run_id": self.run_id,
            "dockerfile": self.dockerfile, "context": self.context, "target": self.target,
            "platform": p.platform, "requested_platform": self.requested_platform,
            "network": self.network, "build_args": dict(self.build_args),
            "source_date_epoch": self.source_date_epoch,
            "source_date_epoch_from": self.source_date_epoch_from,
            "rewrite_timestamp": self.rewrite_timestamp,
            "manifest_digest": p.manifest_digest, "config_digest": p.config_digest,
            "index_digest": self.index_digest,
            "compressed_size": p.compressed_size, "uncompressed_size": p.uncompressed_size,
            "layers": [x.to_dict() for x in p.layers],
            "platforms": [x.to_dict() for x in self.platforms],
            "base_images": [b.to_dict() for b in self.base_images],
            "builder": self.builder.to_dict(),
            "archive": self.archive, "image_ref": self.image_ref, "image_id": self.image_id,
            "tested_ref": self.tested_ref(), "loaded_now": self.loaded_now,
            "wall_s": round(self.wall_s, 3), "build_s": round(self.build_s, 3),
            "load_s": round(self.load_s, 3), "shape_s": round(self.shape_s, 3),
            "buildkit_export_s": self.buildkit_export_s,
            "overhead_s": round(self.overhead_s, 3), "export": dict(self.export),
            "cache": dict(self.cache),
            "log": self.log, "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------- the verdict


@dataclass
class Reproducibility:
    reproducible: bool | None
    digests: list[str]
    distinct: list[str]
    pair: tuple[int, int] | None = None
    diff: Any = None  # servelab.image.diff.DiffResult of the first differing pair
    note: str | None = None

    @property
    def explanation(self) -> list[str]:
        return list(self.diff.explanation()) if self.diff is not None else []

    @property
    def summary(self) -> str:
        if self.reproducible is None:
            return "not judged: fewer than two builds"
        if self.reproducible:
            return f"reproducible: {len(self.digests)} builds, one manifest digest"
        return (f"not reproducible: {len(self.distinct)} distinct digests over "
                f"{len(self.digests)} builds ({self.diff.verdict if self.diff else 'unexplained'})")

    def to_dict(self) -> dict[str, Any]:
        return {"reproducible": self.reproducible, "summary": self.summary,
                "digests": list(self.digests), "distinct": list(self.distinct),
                "pair": list(self.pair) if self.pair else None,
                "verdict": self.diff.verdict if self.diff is not None else None,
                "explanation": self.explanation,
                "diff": self.diff.to_dict() if self.diff is not None else None,
                "note": self.note}


def verdict(records: list[BuildRecord]) -> Reproducibility:
    """Reproducible when every build has the same per-platform manifest digests; otherwise
    the explainer's account of the first build against the first one that differs."""
    from servelab.image.diff import diff_images

    digests = [r.manifest_digest for r in records]
    distinct = list(dict.fromkeys(digests))
    if len(records) < 2:
        return Reproducibility(None, digests, distinct)
    first = records[0]
    other = next((r for r in records[1:] if r.digest_key != first.digest_key), None)
    if other is None:
        return Reproducibility(True, digests, distinct)
    rep = Reproducibility(False, digests, distinct, (first.repeat, other.repeat))
    if not (Path(first.archive).is_file() and Path(other.archive).is_file()):
        rep.note = "the archives of the differing builds are gone: no explanation"
        return rep
    platform = first.primary.platform if len(first.platforms) > 1 else None
    rep.diff = diff_images(first.archive, other.archive, platform=platform)
    return rep


# ---------------------------------------------------------------------------- inputs


def source_date_epoch(arm: Arm, settings: BuildSettings) -> tuple[int, str]:
    """(SOURCE_DATE_EPOCH, where it came from): the spec's value, or the commit time of the
    last commit touching the build context."""
    if isinstance(settings.source_date_epoch, int):
        return settings.source_date_epoch, "spec"
    hint = ("commit the build context, or set build.sourceDateEpoch in the experiment to a "
            "fixed unix time")
    try:
        res = proc.run(["git", "log", "-1", "--format=%ct", "--", "."], cwd=arm.context,
                       timeout=60, check=False)
    except ServelabError as e:
        raise InputError(f"cannot read the commit time of {arm.context}: {e.message}",
                         hint=hint) from e
    text = res.stdout.strip()
    if res.returncode != 0 or not text.isdigit():
        why = res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "no commit"
        raise InputError(f"no commit time for the build context {arm.context}: {why}",
                         hint=hint)
    return int(text), "commit"


def base_images(arm: Arm) -> list[BaseImage]:
    """The external bases of every stage, resolved with the arm's build arguments."""
    from servelab.lint import parse

    df = parse.load(arm.dockerfile, str(arm.dockerfile), arm.build_args)
    out: list[BaseImage] = []
    for st in df.stages:
        if st.parent is not None or (st.base or "").lower() == "scratch":
            continue
        ref = st.base if st.base is not None else st.base_raw
        digest = pinned_digest(ref)
        out.append(BaseImage(ref, digest, st.label, digest is not None))
    return out


def check_pinned(arm: Arm, bases: list[BaseImage]) -> list[str]:
    """Raise BaseUnpinned for unpinned bases, unless the arm allows them (then: notes)."""
    from servelab.image.pin import base_unpinned_rule

    bad = [b for b in bases if not b.pinned]
    if not bad:
        return []
    rule = base_unpinned_rule()
    lines = [f"FROM {b.ref} (stage {b.stage}) is not pinned by digest" for b in bad]
    if arm.allow_unpinned_base:
        return [f"[{rule.id}] allowed for arm {arm.name}: {x}" for x in lines]
    raise BaseUnpinned(
        f"{arm.dockerfile}: refusing to build arm {arm.name} [{rule.id}]: "
        + "; ".join(lines) + f". {rule.rationale}",
        hint=f"{rule.fix}; `servelab pin {arm.dockerfile}` rewrites the FROM lines, or set "
        f"allowUnpinnedBase: true for a control arm that shows the unpinned way",
    )


def _resolve_unpinned(bases: list[BaseImage]) -> None:
    """Best effort: the digest the registry reports now for an allowed unpinned base."""
    from servelab.image.pin import resolve_digest

    for b in bases:
        if b.digest is None and "$" not in b.ref:
            with contextlib.suppress(ServelabError):
                b.digest = resolve_digest(b.ref)


def free_bytes(path: Path) -> int:
    p = path
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def check_disk(paths: list[Path], need: int, why: str = "the floor") -> None:
    """CapabilityError (exit 3) when any of *paths* has less than *need* bytes free."""
    for p in paths:
        free = free_bytes(p)
        if free < need:
            raise CapabilityError(
                f"not enough free disk at {p}: {free / 2**30:.1f} GiB free, "
                f"{need / 2**30:.1f} GiB needed ({why})",
                hint="free disk space (docker system prune, remove old output dirs) or lower "
                "the floor with SERVELAB_MIN_FREE_BYTES",
            )


def build_command(arm: Arm, settings: BuildSettings, *, dest: Path, builder_args: list[str],
                  metadata: Path, rewrite_timestamp: bool = True,
                  progress: str = buildkit.PLAIN) -> list[str]:
    """The docker buildx build command line of one build (*progress*: rawjson or plain)."""
    out = export.output_option(dest, rewrite_timestamp=rewrite_timestamp)
    argv = ["docker", "buildx", "build", *builder_args, "--no-cache", "--provenance=false",
            "--sbom=false", f"--progress={progress}", "--file", str(arm.dockerfile),
            "--metadata-file", str(metadata), "--output", out]
    if arm.target:
        argv += ["--target", arm.target]
    if settings.platform:
        argv += ["--platform", settings.platform]
    if settings.network in ("none", "host"):
        argv += ["--network", settings.network]
    for k, v in sorted(arm.build_args.items()):
        argv += ["--build-arg", f"{k}={v}"]
    return [*argv, str(arm.context)]


def image_name(run_id: str, arm: str, digest: str) -> str:
    def part(x: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", x.lower()).strip("-") or "x"

    return f"servelab/{part(run_id)}/{part(arm)}:{digest.partition(':')[2][:16]}"


# ---------------------------------------------------------------------------- reading back


def read_archive(archive: Path, sizes: dict[str, int | None]) -> tuple[
        list[PlatformRecord], str | None, list[tuple[str, Any]]]:
    """Per-platform records of an OCI archive, its nested index digest, and the layers whose
    uncompressed size is not in *sizes* yet (to count)."""
    from servelab.image.diff import layer_instructions
    from servelab.image.oci import OciArchive

    with OciArchive(archive) as img:
        pms = img.platform_manifests()
        records: list[PlatformRecord] = []
        todo: list[tuple[str, Any]] = []
        for pm in pms:
            cfg = img.read_json(pm.config.digest)
            instr = layer_instructions(cfg, len(pm.layers))
            diff_ids = (cfg.get("rootfs") or {}).get("diff_ids") or []
            layers = []
            for i, d in enumerate(pm.layers):
                if d.digest not in sizes:
                    sizes[d.digest] = None
                    todo.append((d.digest, archive))
                layers.append(LayerRecord(d.digest, d.media_type, d.size, None,
                                          diff_ids[i] if i < len(diff_ids) else None, instr[i]))
            records.append(PlatformRecord(pm.platform, pm.digest, pm.descriptor.size,
                                          pm.config.digest, pm.config.size, layers))
        index = pms[0].parents[0] if pms[0].parents else None
    return records, index, todo


def count_sizes(todo: list[tuple[str, Any]], sizes: dict[str, int | None]) -> None:
    """Fill *sizes* with the uncompressed size of each layer in *todo* (streamed)."""
    from servelab.image import listing
    from servelab.image.oci import OciArchive

    for digest, archive in todo:
        try:
            with OciArchive(archive) as img, img.open_blob(digest) as raw:
                sizes[digest], files = listing.size_and_listing(raw, name=digest)
        except (ServelabError, OSError):
            sizes[digest] = None  # reported as unknown rather than failing the build
            continue
        if files is not None:  # verified against its digest: the weights scan may use it
            listing.remember(digest, files)


SIZES_FILE = "layer-sizes.json"
MAX_CACHED_SIZES = 20_000


def load_sizes() -> dict[str, int | None]:
    """Uncompressed sizes by compressed layer digest (content-addressed, so never stale)."""
    try:
        doc = json.loads((cache_dir() / SIZES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, int) and isinstance(k, str)}


def save_sizes(sizes: dict[str, int | None]) -> None:
    known = {k: v for k, v in sizes.items() if v is not None}
    if not known:
        return
    merged = {**load_sizes(), **known}
    items = list(merged.items())[-MAX_CACHED_SIZES:]
    d = cache_dir()
    with contextlib.suppress(OSError, ServelabError):  # a cache: a full disk costs only time
        d.mkdir(parents=True, exist_ok=True)
        write_text_atomic(d / SIZES_FILE, json.dumps(dict(items)))


# ---------------------------------------------------------------------------- the session


class Builds:
    """One run's builds: one builder (probed once, a fallback created once), one archive and
    one loaded image per distinct digest, and the disk check before each build."""

    def __init__(self, run_id: str, *, store_dir: Path, cleanup: Any = None,
                 keep: bool = False, min_free_bytes: int | None = None,
                 allow_fallback: bool = True, keep_builder: bool = False) -> None:
        self.run_id = run_id
        self.store_dir = store_dir
        self.cleanup = cleanup
        self.keep = keep
        env_floor = os.environ.get("SERVELAB_MIN_FREE_BYTES", "")
        self.min_free_bytes = (min_free_bytes if min_free_bytes is not None
                               else int(env_floor) if env_floor.isdigit()
                               else DEFAULT_MIN_FREE_BYTES)
        self.allow_fallback = allow_fallback
        self.keep_builder = keep_builder
        self.facts: builder_mod.BuilderFacts | None = None
        self.last_primary: PlatformRecord | None = None
        self._stack = contextlib.ExitStack()
        self._sizes: dict[str, int | None] = load_sizes()
        self._loaded: dict[str, tuple[str, str | None]] = {}
        self._docker_root: Path | None = None
        self._client: Any = None
        self._shaper = export.Shaper(store_dir)
        #: the step names BuildKit reported for the build under way (build.cache)
        self._steps: list[str] = []
        #: BuildKit's export seconds of the last build (its ``exporting`` steps)
        self._export_s: float | None = None
        #: the builder's records before this run's first build (the transfers that appear
        #: after it go after each build and at the end: build.cache.prune_transfers)
        self._before_run: set[str] | None = None
        self._built = False
        #: this run's records BuildKit still held when their build's prune ran (tried again
        #: after each build and at the end: build.cache.prune_left)
        self._in_use: set[str] = set()

    def __enter__(self) -> Builds:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.facts = self._stack.enter_context(builder_mod.ensure_builder(
                self.run_id, allow_fallback=self.allow_fallback, keep=self.keep_builder))
        except BaseException:
            self._stack.close()
            raise
        self._docker_root = _docker_root()
        self._warm_up()
        return self

    def _warm_up(self) -> None:
        """Once per session: the engine API client and the Dockerfile parser's library."""
        from servelab.cleanup import docker_client
        from servelab.lint import parse

        try:
            self._client = docker_client()
            parse.parse_text("FROM scratch\n", "warm-up")
        except BaseException:
            self._stack.close()
            raise

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            save_sizes(self._sizes)
            if self._client is not None:
                self._client.close()
            if self._built and self.facts is not None:
                cache.prune_transfers(self._before_run, self.facts.builder_args())
                cache.prune_left(self._in_use, self.facts.builder_args())
        finally:
            self._stack.close()

    # -- one build
    def build(self, arm: Arm, settings: BuildSettings, *, repeat: int, out_dir: Path,
              rewrite_timestamp: bool = True) -> BuildRecord:
        """Build *arm* once, no cache; write build.log and build.json into *out_dir*."""
        if self.facts is None:
            raise RuntimeError("use Builds as a context manager")
        t0 = time.monotonic()
        out_dir.mkdir(parents=True, exist_ok=True)
        bases = base_images(arm)
        notes = check_pinned(arm, bases)
        if notes:
            _resolve_unpinned(bases)
        epoch, epoch_from = source_date_epoch(arm, settings)
        self._check_disk()
        before = cache.cache_ids(self.facts.builder_args())
        if not self._built:
            self._before_run, self._built = before, True
        self._steps = []
        self._export_s = None
        pruned: cache.Pruned | None = None
        try:
            # servelab clamps the times itself while it re-gzips (export.py: one compressed
            # copy in BuildKit's store, not two), as BuildKit's export streams in
            with streamed.Streamed(self._shaper, self.store_dir,
                                   epoch=epoch if rewrite_timestamp else None) as stream:
                build_s = self._buildx(arm, settings, stream=stream, out_dir=out_dir,
                                       epoch=epoch, repeat=repeat)
                shaped = stream.result()
            self._sizes.update(shaped.sizes)
            # the image is in the archive now: BuildKit's copy (U + C) goes before the load
            # adds its own (docs/run.md, "Disk")
            pruned = cache.prune_new(before, self.facts.builder_args(), self._steps)
            # and the context's transfer: BuildKit may make a new one for the next build of
            # the same directory, so kept ones add up with the repeats (X each); and what
            # earlier builds left in use
            cache.prune_transfers(self._before_run, self.facts.builder_args())
            self._in_use = (cache.prune_left(self._in_use, self.facts.builder_args()).left_ids
                            | pruned.left_ids)
            archive = shaped.archive
            platforms, index, todo = read_archive(archive, self._sizes)
            ref, image_id, load_s, loaded = self._load_counting(arm, archive, platforms, todo)
        finally:
            if pruned is None:  # the build failed or was interrupted: its cache goes too
                self._in_use |= cache.prune_new(before, self.facts.builder_args(),
                                                self._steps).left_ids
        for p in platforms:
            for layer in p.layers:
                layer.uncompressed_size = self._sizes.get(layer.digest)
        rec = BuildRecord(
            arm=arm.name, repeat=repeat, run_id=self.run_id, dockerfile=str(arm.dockerfile),
            context=str(arm.context), target=arm.target, requested_platform=settings.platform,
            network=settings.network, build_args=dict(arm.build_args), source_date_epoch=epoch,
            source_date_epoch_from=epoch_from, rewrite_timestamp=rewrite_timestamp,
            platforms=platforms, index_digest=index, base_images=bases, builder=self.facts,
            archive=str(archive), image_ref=ref, image_id=image_id, loaded_now=loaded,
            wall_s=0.0, build_s=build_s, load_s=load_s, log=str(out_dir / LOG_FILE),
            notes=notes + pruned.notes, shape_s=stream.after_s, export=shaped.to_dict(),
            cache=pruned.to_dict(), buildkit_export_s=self._export_s)
        self.last_primary = rec.primary
        rec.wall_s = time.monotonic() - t0
        write_file(out_dir / RECORD_FILE, json.dumps(rec.to_dict(), indent=2) + "\n",
                   what="the build record")
        return rec

    def _check_disk(self) -> None:
        last = self.last_primary
        for path, need, why in export.disk_needed(
                self.store_dir, self._docker_root, (last.uncompressed_size or 0) if last else 0,
                last.compressed_size if last else 0, self.min_free_bytes):
            check_disk([path], need, why)

    def _buildx(self, arm: Arm, settings: BuildSettings, *, stream: streamed.Streamed,
                out_dir: Path, epoch: int, repeat: int) -> float:
        """docker buildx build, its progress shown as it runs (rawjson where buildx has it,
        else plain: :mod:`servelab.build.buildkit`); build.log written either way."""
        for mode in buildkit.modes():
            argv = build_command(
                arm, settings, dest=stream.path,
                builder_args=self.facts.builder_args() if self.facts else [],
                metadata=out_dir / "metadata.json", rewrite_timestamp=False,
                progress=mode)
            with logs.progress(f"build {arm.name} #{repeat}") as shown:
                reader = buildkit.Reader(mode, shown)
                try:
                    seconds = self._buildx_once(argv, reader, settings, stream, epoch=epoch,
                                                log=out_dir / LOG_FILE,
                                                what=f"arm {arm.name} (repeat {repeat})")
                finally:  # what the build made in BuildKit's cache is pruned by these
                    self._steps += [v.name for v in reader.vertices.values()]
                    self._export_s = reader.seconds_of("exporting")
            if seconds is not None:
                return seconds
            buildkit.refuse(mode)
        raise CapabilityError("docker buildx build knows no progress mode servelab can read",
                              hint="install a Docker buildx plugin (0.10 or newer)")

    @staticmethod
    def _buildx_once(argv: list[str], reader: buildkit.Reader, settings: BuildSettings,
                     stream: streamed.Streamed, *, epoch: int, log: Path, what: str
                     ) -> float | None:
        """One try; None when buildx refused the progress mode (nothing was built). A
        shaping that fails stops buildx (it would wait on the pipe) with the shaping's error.
        """
        try:
            res = proc.run(argv, timeout=settings.timeout_s, on_stderr=reader.feed,
                           env={"SOURCE_DATE_EPOCH": str(epoch)}, cancel=stream.failed)
        except proc.Cancelled as e:
            reader.close()
            write_file(log, reader.log_text(), what="the build log")
            if stream.error is None:  # pragma: no cover - cancel is only set with an error
                raise
            raise stream.error from e
        except CommandError as e:
            reader.close()
            if reader.refused() and len(buildkit.modes()) > 1:
                return None
            write_file(log, reader.log_text(), what="the build log")
            if e.returncode is None and not e.timed_out:
                raise
            why = (f"timed out after {settings.timeout_s}s" if e.timed_out
                   else f"exit code {e.returncode}")
            raise BuildFailed(
                f"the build of {what} failed: {why}\n{proc.tail(reader.error_tail(), 15)}",
                hint=f"see {log}; raise build.timeoutSeconds if it needs longer"
                if e.timed_out else f"see {log} for the whole build output") from e
        stream.writer_done()
        reader.close()
        write_file(log, reader.log_text() + res.stdout, what="the build log")
        return res.seconds

    def _load_counting(self, arm: Arm, archive: Path, platforms: list[PlatformRecord],
                       todo: list[tuple[str, Any]]) -> tuple[str | None, str | None, float, bool]:
        """docker load (once per digest) while the layer sizes are counted alongside."""
        counter = threading.Thread(target=count_sizes, args=(todo, self._sizes),
                                   name="servelab-sizes", daemon=True)
        counter.start()
        try:
            return self._load(arm, archive, platforms[0].manifest_digest)
        finally:
            counter.join()

    def _load(self, arm: Arm, archive: Path, digest: str
              ) -> tuple[str | None, str | None, float, bool]:
        if digest in self._loaded:
            ref, image_id = self._loaded[digest]
            return ref, image_id, 0.0, False
        name = image_name(self.run_id, arm.name, digest)
        self._guard(digest, name)
        with logs.progress(f"docker load ({logs.size(archive.stat().st_size)})",
                                   quiet=True):
            res = proc.run(["docker", "load", "-i", str(archive)], timeout=1800,
                           hint="the engine could not load the OCI archive")
        loaded = _loaded_ref(res.stdout)
        if loaded is None:
            raise CapabilityError(f"docker load did not report the image it loaded: "
                                  f"{res.stdout.strip()[:200]!r}",
                                  hint="check the engine can load OCI archives (Docker 25+)")
        ref = name
        image_id = self._tag(loaded, name)
        if self.cleanup is not None:
            self.cleanup.image(ref)
        self._loaded[digest] = (ref, image_id)
        return ref, image_id, res.seconds, True

    def _guard(self, digest: str, name: str) -> None:
        """If the run stops between docker load and the tag (Ctrl-C, SIGTERM), the image
        would be left unnamed: remove it then, unless it was in the engine before or has
        other names now."""
        if self.cleanup is None or self.keep or self._client is None:
            return
        client = self._client
        try:
            client.api.inspect_image(digest)
            return  # already there before this build: not ours
        except Exception as e:
            if type(e).__name__ != "ImageNotFound":
                return

        def remove_if_ours() -> None:
            try:
                tags = client.api.inspect_image(digest).get("RepoTags") or []
            except Exception:
                return
            if all(t in (name, f"docker.io/{name}") for t in tags):
                client.api.remove_image(digest, force=True)

        self.cleanup.callback(remove_if_ours, f"image {digest[:19]} if left unnamed")

    def _tag(self, loaded: str, name: str) -> str | None:
        """Tag the loaded image as *name* (API calls: no child process); its image ID."""
        repo, _, tag = name.rpartition(":")
        try:
            self._client.api.tag(loaded, repo, tag)
            return str(self._client.api.inspect_image(name)["Id"])
        except Exception as e:
            raise CapabilityError(f"could not tag the loaded image {loaded} as {name}: {e}",
                                  hint="check the engine answers (docker info)") from e

    def release(self, digest: str) -> bool:
        """Remove the engine's image of *digest* once its repeat's stages are done (the
        next repeat that needs it loads it again from its archive): the engine never holds
        more than the image under test (docs/run.md, "Disk"). Kept with ``keep``."""
        if self.keep or digest not in self._loaded or self._client is None:
            return False
        from servelab.cleanup import remove_image

        ref, _ = self._loaded.pop(digest)
        errors: list[str] = []
        remove_image(self._client, ref, errors)
        return not errors

    @property
    def loaded_refs(self) -> list[str]:
        return [ref for ref, _ in self._loaded.values()]


def _loaded_ref(stdout: str) -> str | None:
    """The name or ID from ``docker load``: "Loaded image: NAME" / "Loaded image ID: ID"."""
    for line in stdout.splitlines():
        for prefix in ("Loaded image ID: ", "Loaded image: "):
            if line.startswith(prefix):
                return line[len(prefix):].strip()
    return None


def _docker_root() -> Path | None:
    """The engine's data root when it is on this machine's filesystem."""
    try:
        res = proc.run(["docker", "info", "--format", "{{.DockerRootDir}}"], timeout=60,
                       check=False)
    except ServelabError:
        return None
    p = Path(res.stdout.strip())
    return p if res.returncode == 0 and p.is_absolute() and p.exists() else None


def build_arm(arm: Arm, settings: BuildSettings, *, repeat: int, out_dir: Path, run_id: str,
              keep: bool = False, cleanup: Any = None) -> BuildRecord:
    """One build in its own :class:`Builds` (probe included); the archive goes to *out_dir*.
    With *cleanup*, the loaded image is registered there; otherwise it stays loaded."""
    with Builds(run_id, store_dir=out_dir, cleanup=cleanup, keep=keep) as b:
        return b.build(arm, settings, repeat=repeat, out_dir=out_dir)


# ---------------------------------------------------------------------------- an experiment


@dataclass
class ArmBuilds:
    arm: str
    records: list[BuildRecord]
    reproducibility: Reproducibility

    def to_dict(self) -> dict[str, Any]:
        return {"arm": self.arm, "records": [r.to_dict() for r in self.records],
                "reproducibility": self.reproducibility.to_dict()}


@dataclass
class ExperimentBuilds:
    """What ``servelab build`` did: every arm's builds and verdict (made by
    :func:`servelab.run.runner.build_experiment`, the runner with only the build stage)."""

    run_id: str
    out_dir: Path
    arms: list[ArmBuilds]
    gate_reproducible: bool
    skipped: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when the treatment is not reproducible and the gate asks for it, else 0."""
        for a in self.arms:
            if (a.arm == "treatment" and self.gate_reproducible
                    and a.reproducibility.reproducible is False):
                return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "out_dir": str(self.out_dir),
                "gate_reproducible": self.gate_reproducible, "exit_code": self.exit_code,
                "skipped": list(self.skipped), "arms": [a.to_dict() for a in self.arms]}
