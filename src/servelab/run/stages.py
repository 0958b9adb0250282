"""Adapters from the stage modules (lint, build, scan, smoke) to the runner.

Each method returns the stage's typed outcome (:mod:`servelab.run.outcomes`); a later stage gets
an earlier one's outcome object (the scan and smoke adapters get the
:class:`~servelab.run.outcomes.BuildOutcome` and read its ``BuildRecord``), never the result
dict, which only :func:`servelab.run.results.assemble` writes. Failures of the image under
test (a failed build, a finding that fails the gate, a server that never gets ready) are
outcomes; a missing tool or capability (exit 3) and bad input (exit 2) abort the run, and
everything created so far is removed on the way out.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from servelab import proc
from servelab.errors import CapabilityError, GateFailed, InputError, ServelabError
from servelab.findings import FindingsReport, Severity
from servelab.image.ref import pinned_digest
from servelab.run.options import Progress, RunOptions
from servelab.run.outcomes import (
    BuildOutcome,
    HostGpus,
    LatencyMetrics,
    ScanOutcome,
    SmokeOutcome,
    StageOutcome,
    StartupMetrics,
    TrivyFacts,
    Verdict,
)
from servelab.run.results import write_json
from servelab.smoke.gpuphases import GpuPhases
from servelab.spec import Arm, Experiment, GpuNeeds
from servelab.textio import write_file

if TYPE_CHECKING:
    from servelab.build.stage import BuildRecord, Builds, Reproducibility
    from servelab.node import CtrStartSpec, NodeSettings, NodeStart, NodeStarts
    from servelab.node.lazypull import LazySettings
    from servelab.node.ownregistry import PrivateRegistry
    from servelab.scan.stage import Scanner
    from servelab.smoke.result import SmokeResult

SEVERITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN")


class Stages:
    def __init__(self, exp: Experiment, opts: RunOptions, run_id: str,
                 progress: Progress) -> None:
        from servelab.cleanup import Cleanup

        self.exp = exp
        self.opts = opts
        self.run_id = run_id
        self.progress = progress
        self.cleanup = Cleanup(run_id, keep=opts.keep)
        self.notes: list[str] = []
        self.annotations: list[dict[str, Any]] = []
        #: every successful build per arm, in build order
        self.records: dict[str, list[BuildRecord]] = {}
        #: each built arm's verdict (judged when the stages end without an error)
        self.judged: dict[str, Reproducibility] = {}
        #: the verdicts of arms built at least twice, as summary.json has them
        self.reproducibility: dict[str, dict[str, Any]] = {}
        self._builds: Builds | None = None
        self._scanner: Scanner | None = None
        self._smoked: set[str] = set()
        self._scans = {"scanned": 0, "shared": 0}
        self._stack = contextlib.ExitStack()
        node_opts = _with_spec(_ephemeral_drop(opts, self.notes), exp)
        #: ``--cold-start-registry private``: the options before its addresses are known
        self._private: RunOptions | None = _private_wanted(node_opts)
        # checked now, with stand-in addresses for a private registry: bad input before any build
        self._node_settings = _node_settings(
            node_opts if self._private is None else replace(
                node_opts, cold_start_registry=_STAND_IN[0], lazy_registry=_STAND_IN[1]))
        self._nodes: NodeStarts | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Stages:
        self._stack.enter_context(self.cleanup)
        try:
            self._enter()
        except BaseException:  # what was started so far goes: __exit__ will not be called
            import sys

            self._stack.__exit__(*sys.exc_info())
            raise
        return self

    def _enter(self) -> None:
        if self._node_settings is not None:  # private containerds and registries of killed runs
            from servelab.node import containerd, ownregistry

            self.notes.extend(containerd.sweep() + ownregistry.sweep())
        if self._private is not None and "smoke" in self.opts.stages:
            self._start_private_registry(self._private)
        if "build" in self.opts.stages:
            from servelab.build.stage import Builds

            self._builds = self._stack.enter_context(Builds(
                self.run_id, store_dir=self.opts.out_dir / "images", cleanup=self.cleanup,
                keep=self.opts.keep))

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if et is None:
                self._judge_builds()
                self._scan_note()
        finally:
            self._stack.__exit__(et, ev, tb)

    def _start_private_registry(self, opts: RunOptions) -> None:
        """Start the run's own registry (plain, and TLS when a lazy pull is measured); it and
        its storage go at the run's clean-up, ``--keep`` or not."""
        from servelab.node.ownregistry import PrivateRegistry

        reg = PrivateRegistry(self.run_id, tls=bool(opts.lazy or opts.require_lazy))
        self.cleanup.callback(reg.stop, f"private registry {reg.work}")
        reg.start()
        self._node_settings = _node_settings(_served_by(opts, reg))
        if self._node_settings is not None:  # nobody else reads it: parked between pulls
            self._node_settings.own_storage = reg.data
        self.notes.append(f"cold-start registry: servelab's own on {reg.plain}"
                          + (f" (TLS on {reg.secure})" if reg.secure else "")
                          + ", removed with its blobs at the end")
        self.progress(f"private registry on {reg.plain}"
                      + (f", TLS on {reg.secure}" if reg.secure else ""))

    def _scan_note(self) -> None:
        n = self._scans
        if n["shared"]:
            self.notes.append(
                f"scan: {n['scanned']} Trivy scan(s) for {n['scanned'] + n['shared']} "
                "repeats; repeats with the same digest shared one scan")

    def _judge_builds(self) -> None:
        from servelab.build.stage import verdict as build_verdict

        for arm, recs in self.records.items():
            rep = build_verdict(recs)
            self.judged[arm] = rep
            if len(recs) < 2:
                continue
            self.reproducibility[arm] = rep.to_dict()
            self.notes.append(f"{arm}: {rep.summary}")
            self.notes.extend(f"{arm}: {line}" for line in rep.explanation[:20])

    # ------------------------------------------------------------------ git
    def checkout(self, arm: Arm) -> Arm:
        """An arm whose context is a git ref is built from a temporary worktree of that ref."""
        if not arm.git_ref:
            return arm
        top = self._git_top(arm.context)
        try:
            proc.run(["git", "-C", str(top), "rev-parse", "--verify", "--quiet",
                      f"{arm.git_ref}^{{commit}}"], timeout=60)
        except ServelabError as e:
            raise InputError(
                f"the {arm.name} arm's git ref {arm.git_ref!r} is not in this checkout",
                hint="fetch it first (actions/checkout with fetch-depth: 0, or "
                f"git fetch origin {arm.git_ref})") from e
        tmp = Path(tempfile.mkdtemp(prefix=f"servelab-{arm.name}-"))
        self.cleanup.path(tmp)
        wt = tmp / "worktree"
        proc.run(["git", "-C", str(top), "worktree", "add", "--detach", str(wt), arm.git_ref],
                 timeout=300)
        self.cleanup.callback(lambda: self._remove_worktree(top, wt), "git worktree")
        rel_ctx = arm.context.relative_to(top)
        rel_df = arm.dockerfile.relative_to(top)
        self.progress(f"{arm.name}: building {arm.git_ref} from a temporary worktree")
        return replace(arm, context=wt / rel_ctx, dockerfile=wt / rel_df)

    @staticmethod
    def _remove_worktree(top: Path, wt: Path) -> None:
        with contextlib.suppress(ServelabError):
            proc.run(["git", "-C", str(top), "worktree", "remove", "--force", str(wt)],
                     timeout=120)

    @staticmethod
    def _git_top(path: Path) -> Path:
        try:
            out = proc.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], timeout=60)
        except ServelabError as e:
            raise InputError(f"{path} is not in a git checkout, so gitRef cannot be used",
                             hint="run from a git checkout or drop gitRef") from e
        return Path(out.stdout.strip())

    def commit_of(self, arm: Arm) -> str | None:
        try:
            out = proc.run(["git", "-C", str(arm.context), "rev-parse", "HEAD"], timeout=60)
        except ServelabError:
            return None
        return out.stdout.strip() or None

    # ------------------------------------------------------------------ lint
    def lint(self, arms: list[Arm]) -> dict[str, StageOutcome]:
        from servelab.lint import lint_paths
        from servelab.report import get_reporter

        out: dict[str, StageOutcome] = {}
        health = self.exp.request is not None or "serve" in self.exp.spec_data
        for arm in arms:
            if arm.image:
                out[arm.name] = StageOutcome("skipped", "prebuilt image: no Dockerfile")
                continue
            report = lint_paths([arm.dockerfile], build_args=arm.build_args,
                                health_declared=health, context=arm.context)
            sarif = self.opts.out_dir / f"lint-{arm.name}.sarif"
            write_file(sarif, get_reporter("sarif").render(report), what="the lint SARIF")
            failing = report.fails(self.opts.fail_on)
            c = report.counts()
            reason = f"{c['error']} error, {c['warning']} warning, {c['info']} info"
            if report.coverage:  # a bound reached is never a plain pass (docs/limits.md)
                reason += f"; partly checked: {len(report.coverage)} part(s) not fully read"
                self.notes.extend(f"{arm.name}: lint {n.text()}" for n in report.coverage)
            rules = sorted({f.rule_id for f in report.findings
                            if f.severity.rank >= Severity.WARNING.rank})
            v = [Verdict("lint", "lint", not failing,
                         reason + (f" ({', '.join(rules)})" if rules else ""))]
            if arm.name == "treatment":
                self._annotate(report)
            out[arm.name] = StageOutcome(
                "failed" if failing else "ok", reason,
                record={"findings": [f.to_dict() for f in report.sorted_findings()]},
                verdicts=v, files={"lint_sarif": str(sarif)})
            self.progress(f"lint {arm.name}: {reason}")
        return out

    def _annotate(self, report: FindingsReport) -> None:
        level = {"error": "error", "warning": "warning", "info": "notice"}
        for f in report.sorted_findings():
            self.annotations.append({"level": level[f.severity.value], "file": f.file,
                                     "line": f.line, "title": f"servelab {f.rule_id}",
                                     "message": f.message + (f" (fix: {f.fix})" if f.fix else "")})

    # ------------------------------------------------------------------ build
    def build(self, arm: Arm, n: int, out_dir: Path) -> BuildOutcome:
        from servelab.build.stage import RECORD_FILE, BaseUnpinned

        if arm.image:
            return BuildOutcome("skipped", "prebuilt image: nothing to build")
        if self._builds is None:
            raise RuntimeError("the build stage runs inside `with Stages(...)`")
        try:
            rec = self._builds.build(arm, self.exp.build, repeat=n, out_dir=out_dir)
        except GateFailed as e:
            from servelab.run.diskplan import is_disk_full

            if self.opts.stop_on_build_failure or is_disk_full(e):
                raise
            check = "base-pinned" if isinstance(e, BaseUnpinned) else "build"
            return BuildOutcome("failed", e.message.splitlines()[0],
                                verdicts=[Verdict(check, "build", False, e.message)])
        self.records.setdefault(arm.name, []).append(rec)
        d = rec.to_dict()
        return BuildOutcome("ok", f"{rec.manifest_digest[:19]}… in {d['wall_s']:.1f}s",
                            seconds=d["wall_s"], record=_slim_build(d),
                            verdicts=[Verdict("build", "build", True, "built")],
                            files={"build": str(out_dir / RECORD_FILE)}, build=rec)

    def release(self, build: BuildOutcome) -> None:
        """The repeat's stages are done: its engine image goes, under the build's name and
        the name its warm-base pull gave it (not with --keep)."""
        rec = build.build
        if self._builds is not None and rec is not None:
            self._builds.release(rec.manifest_digest)
        if self._nodes is not None and rec is not None:
            self._nodes.release(rec.manifest_digest)

    # ------------------------------------------------------------------ scan
    def _scanner_for(self) -> Scanner:
        if self._scanner is None:
            from servelab.scan.stage import Scanner

            self._scanner = Scanner(
                self.exp.scan, cache_dir=self.opts.trivy_cache_dir, offline=self.opts.offline,
                db_repositories=self.opts.db_repositories or None, run_id=self.run_id)
        return self._scanner

    def scan(self, image: str, build: BuildOutcome, out_dir: Path) -> ScanOutcome:
        from servelab.scan.stage import gate

        rec = build.build
        target = image
        if rec is not None and Path(rec.archive).exists():
            target = rec.archive
        # a multi-platform build: scan the platform whose manifest digest the result records
        platform = rec.primary.platform if rec is not None and len(rec.platforms) > 1 else None
        scanner = self._scanner_for()
        result = scanner.scan(target, digest=rec.manifest_digest if rec is not None else None,
                              out_dir=out_dir, platform=platform)
        g = gate(result, self.exp.scan)
        counts = result.severity_counts()
        db = result.db
        trivy = TrivyFacts(version=result.trivy_version,
                           db_updated_at=db.updated_at if db else None,
                           db_path=db.path if db else None,
                           db_repository=(db.repository or None) if db else None,
                           offline=bool(scanner.policy.offline))
        self._scans["shared" if result.shared else "scanned"] += 1
        shared = " (shared: same digest already scanned)" if result.shared else ""
        d = result.to_dict()
        record = {k: d[k] for k in ("digest", "platform", "platforms", "shared", "trivy_version",
                                    "db", "counts", "by_severity", "fixable", "unfixed", "gate",
                                    "notes")}
        record["findings"] = [{"severity": f.get("severity"), "id": f.get("id"),
                               "package": f.get("package"), "installed": f.get("installed"),
                               "fixed": f.get("fixed")} for f in d["findings"]]
        return ScanOutcome("ok" if g.passed else "failed", g.reason + shared, record=record,
                           verdicts=[Verdict("vulnerability gate", "scan", g.passed, g.reason)],
                           files=dict(result.files),
                           findings={k: int(counts.get(k, 0)) for k in SEVERITIES},
                           trivy=trivy)

    # ------------------------------------------------------------------ smoke
    def smoke(self, arm: Arm, image: str, n: int, build: BuildOutcome,
              out_dir: Path) -> SmokeOutcome:
        from servelab.smoke.stage import SmokeSettings, smoke_image

        gpu = self.exp.gpu if self.opts.gpu is None else replace(self.exp.gpu,
                                                                  required=self.opts.gpu)
        rec = build.build
        node = self._node_start(arm, image, rec, gpu)
        # after a measured pull every start is the first one after the image came in
        first = node is not None or (image not in self._smoked and (
            rec.loaded_now if rec is not None else n == 1))
        # the image's layers are searched for baked weights once per image, not per repeat
        archive = Path(rec.archive) if rec is not None else None
        settings = SmokeSettings.from_experiment(self.exp, gpu=gpu, weights_archive=archive,
                                                 scan_weights=image not in self._smoked,
                                                 evict_model_cache=node is not None)
        self._smoked.add(image)
        r = smoke_image(image, settings, run_id=self.run_id, out_dir=out_dir, first_start=first,
                        node=node)
        if r.verdict == "gpu-unavailable":
            raise CapabilityError(f"GPU unavailable for the {arm.name} arm: {r.message}",
                                  hint="run on a machine with an NVIDIA GPU and driver, or "
                                  "--no-gpu to skip the GPU checks")
        d = r.to_dict()
        files = dict(r.files)
        if d.get("timeline"):
            write_json(out_dir / "timeline.json", d["timeline"])
            files["timeline"] = str(out_dir / "timeline.json")
        model = r.model.sha256 if r.model is not None else None
        return SmokeOutcome("ok" if r.passed else "failed", f"{r.verdict}: {r.message}",
                            record=_slim_smoke(d), verdicts=_smoke_verdicts(r), files=files,
                            startup=_startup(d, first), latency=_latency(d),
                            model_sha256=str(model).removeprefix("sha256:") if model else None,
                            host=_host_gpus(r.gpu), node=node, model_load=r.model_load,
                            gpu_phases=GpuPhases.from_gpu(r.gpu))

    def _node_start(self, arm: Arm, image: str, rec: BuildRecord | None,
                    gpu: GpuNeeds) -> NodeStart | None:
        """The pulls before this start (with --cold-start-registry), else None."""
        if self._node_settings is None:
            return None
        start, no_start = self._ctr_start_spec(gpu)
        if self._nodes is None:
            from servelab.node import NodeStarts

            self._nodes = NodeStarts(self._node_settings, run_id=self.run_id,
                                     cleanup=self.cleanup, keep=self.opts.keep,
                                     progress=self.progress)
            self.notes.extend(self._nodes.swept)
            if self._nodes.cold_fallback is not None:
                self.notes.append("cold pulls: servelab's own fetch, not a private containerd: "
                                  + self._nodes.cold_fallback)
        if rec is None:  # a prebuilt image: no base known, pushed from the engine's copy
            return self._nodes.measure(arm.name, image, [], start=start, no_start=no_start)
        bases = [b.ref if pinned_digest(b.ref) else f"{b.ref}@{b.digest}"
                 for b in rec.base_images if b.digest]
        return self._nodes.measure(arm.name, image, bases, archive=Path(rec.archive),
                                   digest=rec.manifest_digest, start=start, no_start=no_start)

    def _ctr_start_spec(self, gpu: GpuNeeds) -> tuple[CtrStartSpec | None, str | None]:
        """The spec of the start from the private containerd after the cold pull, or why
        there is none (GPU arms: the Docker start keeps them)."""
        from servelab.node import CtrStartSpec
        from servelab.smoke.stage import SmokeSettings

        if gpu.required:
            return None, ("not measured on this path: a GPU arm (its start after the "
                          "warm-base pull, through the engine, keeps the GPU)")
        try:
            return CtrStartSpec.from_settings(SmokeSettings.from_experiment(self.exp,
                                                                            gpu=gpu)), None
        except InputError as e:
            return None, f"not measured on this path: {e.message}"


def _with_spec(opts: RunOptions, exp: Experiment) -> RunOptions:
    """The options with the spec's ``coldStart`` added (the CLI's lazy formats and
    requirement add to the spec's; its min layer size wins). Without --cold-start-registry
    nothing is measured on a node, and the spec's lazy arm with it."""
    cs = exp.cold_start
    if cs.lazy_required and not opts.require_lazy:
        # a requirement is checked as --require-lazy is, with or without a registry
        opts = replace(opts, require_lazy=True, require_lazy_from="coldStart.lazyRequired")
    if not opts.cold_start_registry or (not cs.lazy and not cs.lazy_required):
        return opts
    size = opts.lazy_min_layer_size
    return replace(opts, lazy=tuple(dict.fromkeys((*cs.lazy, *opts.lazy))),
                   require_lazy=opts.require_lazy or cs.lazy_required,
                   lazy_min_layer_size=cs.lazy_min_layer_size if size is None else size)


def _ephemeral_drop(opts: RunOptions, notes: list[str]) -> RunOptions:
    """On an ephemeral runner (``RUNNER_ENVIRONMENT=github-hosted``, as root) the global
    page-cache drop before each cold pull harms no other job: on by default there, and said
    in the summary's notes."""
    import os

    if (opts.drop_caches or not opts.cold_start_registry or os.geteuid() != 0
            or os.environ.get("RUNNER_ENVIRONMENT") != "github-hosted"):
        return opts
    notes.append("the page cache was dropped before each cold pull (--drop-caches, on by "
                 "default on this ephemeral GitHub-hosted runner: no other job shares it)")
    return replace(opts, drop_caches=True)


#: the addresses a private registry's options are checked with before it starts (plain, TLS)
_STAND_IN = ("127.0.0.1:1", "127.0.0.1:2")


#: the options a private registry sets itself: a user's value for any of them is a conflict
_PRIVATE_SETS = {"registry_data": "--registry-data", "registry_log": "--registry-log",
                 "lazy_registry": "--lazy-registry", "registry_ca": "--registry-ca",
                 "lazy_registry_log": "--lazy-registry-log"}


def _private_wanted(opts: RunOptions) -> RunOptions | None:
    """*opts* when they ask for ``--cold-start-registry private`` (InputError, exit 2, when
    they also name another registry's files), else None."""
    from servelab.node.ownregistry import PRIVATE, registry_binary

    if opts.cold_start_registry != PRIVATE:
        return None
    registry_binary()  # exit 3 before any build when it is not installed
    given = [flag for attr, flag in _PRIVATE_SETS.items() if getattr(opts, attr) is not None]
    if given:
        raise InputError(f"--cold-start-registry {PRIVATE} starts a registry of servelab's own, "
                         f"but {', '.join(given)} name another registry's",
                         hint=f"leave out {', '.join(given)} (and their SERVELAB_* variables), "
                         "or give --cold-start-registry HOST:PORT of the registry they belong to")
    return opts


def _served_by(opts: RunOptions, reg: PrivateRegistry) -> RunOptions:
    """*opts* with the addresses, storage, logs and CA of the registry *reg*."""
    return replace(opts, cold_start_registry=reg.plain, registry_data=reg.data,
                   registry_log=reg.log, lazy_registry=reg.secure, registry_ca=reg.ca,
                   lazy_registry_log=reg.tls_log)


def _node_settings(opts: RunOptions) -> NodeSettings | None:
    """Checked at the start of the run: a bad registry is bad input before any build."""
    if opts.lazy_min_layer_size is not None:
        from servelab.node.lazypull import check_min_layer_size

        check_min_layer_size(opts.lazy_min_layer_size)
    if not opts.cold_start_registry:
        if opts.lazy or opts.require_lazy:
            asked = opts.require_lazy_from if opts.require_lazy else "--lazy"
            raise InputError("--lazy and --require-lazy measure beside the cold pull: they "
                             f"need --cold-start-registry (asked by {asked})",
                             hint="add --cold-start-registry HOST[:PORT] (or leave the lazy "
                             "pull out)")
        return None
    from servelab.node import ColdSettings, NodeSettings

    return NodeSettings(opts.cold_start_registry, list(opts.node_has),
                        ColdSettings(opts.registry_data, opts.registry_log, opts.drop_caches),
                        _lazy_settings(opts))


def _lazy_settings(opts: RunOptions) -> LazySettings | None:
    if not opts.lazy and not opts.require_lazy:
        return None
    from servelab.image.registry import scheme_for
    from servelab.node.lazypull import DEFAULT_MIN_LAYER_SIZE, FORMATS
    from servelab.node.lazypull import LazySettings as Lazy
    from servelab.node.soci import LazyRegistry

    cold = str(opts.cold_start_registry).split("/", 1)[0]
    host = opts.lazy_registry or (cold if scheme_for(cold) == "https" else None)
    reg = (LazyRegistry(host, opts.registry_ca, opts.lazy_registry_log, opts.registry_data)
           if host else None)
    size = opts.lazy_min_layer_size
    return Lazy(tuple(opts.lazy) or FORMATS, reg, opts.require_lazy,
                DEFAULT_MIN_LAYER_SIZE if size is None else size)


def _startup(d: dict[str, Any], first: bool) -> StartupMetrics:
    """From the smoke result's JSON: its timeline's durations are rounded there."""
    dur = (d.get("timeline") or {}).get("durations") or {}
    return StartupMetrics(first_accept_s=dur.get("start_to_tcp_accept_s"),
                          ready_s=dur.get("start_to_ready_s"),
                          first_request_s=dur.get("start_to_first_good_request_s"),
                          created_to_started_s=dur.get("start_call_s"), first_start=first)


def _latency(d: dict[str, Any]) -> LatencyMetrics | None:
    """From the smoke result's JSON: its latencies are rounded there."""
    reqs = d.get("requests") or {}
    if not reqs:
        return None
    lat = reqs.get("latency_ms") or {}
    return LatencyMetrics(p50_ms=lat.get("p50"), p95_ms=lat.get("p95"), count=reqs.get("ok"))


def _host_gpus(gpu: dict[str, Any] | None) -> HostGpus | None:
    host = (gpu or {}).get("host") or {}
    if not host:
        return None
    return HostGpus(gpus=host.get("gpus", []), cuda_driver_version=host.get("cuda_version"),
                    gpu_state=host.get("state"))


#: why a smoke property can stay untested even when the server became ready
_NOT_TESTED = {
    "no_network_needed": "the spec allows network (serve.network: bridge), so start-up without "
    "downloads was not proven",
    "model_sha256": "the spec gives no model.sha256 to check the mounted model against",
    "model_read_only": "no model is mounted (spec.model is not set)",
    "non_root": "the user could not be determined",
}


def _slim_build(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("log",)}


def _slim_smoke(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in ("settings",)}


def _smoke_verdicts(r: SmokeResult) -> list[Verdict]:
    out = [Verdict("smoke", "smoke", r.passed, f"{r.verdict}: {r.message}")]
    for key, value in r.properties.items():
        if value == "not-tested":
            why = _NOT_TESTED.get(key, "the server never became ready, so it was not observed")
            if not r.passed and key not in ("no_network_needed", "model_sha256"):
                why = "the server never became ready, so it was not observed"
            out.append(Verdict(key, "smoke", None, why))
    out.extend(Verdict(p.id, "smoke", False, p.message) for p in r.problems)
    return out
