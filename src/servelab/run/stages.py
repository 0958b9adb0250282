"""Adapters from the stage modules (lint, build, scan, smoke) to ``servelab run``.

Each method returns a :class:`~servelab.run.results.StageOutcome` and writes what it learnt into
the repeat's result dict (image, metrics, inputs, environment). Failures of the image under
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
from servelab.findings import Severity
from servelab.run.results import StageOutcome, verdict, write_json
from servelab.spec import Arm, Experiment

if TYPE_CHECKING:
    from servelab.run.runner import Progress, RunOptions


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
        self.records: dict[str, list[Any]] = {}
        self.reproducibility: dict[str, dict[str, Any]] = {}
        self._builds: Any = None
        self._scanner: Any = None
        self._smoked: set[str] = set()
        self._scans = {"scanned": 0, "shared": 0}
        self._stack = contextlib.ExitStack()

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Stages:
        self._stack.enter_context(self.cleanup)
        if "build" in self.opts.stages:
            from servelab.build.stage import Builds

            self._builds = self._stack.enter_context(Builds(
                self.run_id, store_dir=self.opts.out_dir / "images", cleanup=self.cleanup,
                keep=self.opts.keep))
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if et is None:
                self._judge_builds()
                self._scan_note()
        finally:
            self._stack.__exit__(et, ev, tb)

    def _scan_note(self) -> None:
        n = self._scans
        if n["shared"]:
            self.notes.append(
                f"scan: {n['scanned']} Trivy scan(s) for {n['scanned'] + n['shared']} "
                "repeats; repeats with the same digest shared one scan")

    def _judge_builds(self) -> None:
        from servelab.build.stage import verdict as build_verdict

        for arm, recs in self.records.items():
            if len(recs) < 2:
                continue
            rep = build_verdict(recs)
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
            sarif.write_text(get_reporter("sarif").render(report), encoding="utf-8")
            failing = report.fails(self.opts.fail_on)
            c = report.counts()
            reason = f"{c['error']} error, {c['warning']} warning, {c['info']} info"
            rules = sorted({f.rule_id for f in report.findings
                            if f.severity.rank >= Severity.WARNING.rank})
            v = [verdict("lint", "lint", not failing,
                         reason + (f" ({', '.join(rules)})" if rules else ""))]
            if arm.name == "treatment":
                self._annotate(report)
            out[arm.name] = StageOutcome(
                "failed" if failing else "ok", reason,
                record={"findings": [f.to_dict() for f in report.sorted_findings()]},
                verdicts=v, files={"lint_sarif": str(sarif)})
            self.progress(f"lint {arm.name}: {reason}")
        return out

    def _annotate(self, report: Any) -> None:
        level = {"error": "error", "warning": "warning", "info": "notice"}
        for f in report.sorted_findings():
            self.annotations.append({"level": level[f.severity.value], "file": f.file,
                                     "line": f.line, "title": f"servelab {f.rule_id}",
                                     "message": f.message + (f" (fix: {f.fix})" if f.fix else "")})

    # ------------------------------------------------------------------ build
    def build(self, arm: Arm, n: int, out_dir: Path, res: dict[str, Any]) -> StageOutcome:
        if arm.image:
            res["image"]["ref"] = arm.image
            return StageOutcome("skipped", "prebuilt image: nothing to build")
        try:
            rec = self._builds.build(arm, self.exp.build, repeat=n, out_dir=out_dir)
        except GateFailed as e:
            check = "base-pinned" if type(e).__name__ == "BaseUnpinned" else "build"
            return StageOutcome("failed", e.message.splitlines()[0],
                                verdicts=[verdict(check, "build", False, e.message)])
        self.records.setdefault(arm.name, []).append(rec)
        d = rec.to_dict()
        res["image"].update({"ref": rec.tested_ref() or rec.image_ref,
                             "digest": d["manifest_digest"],
                             "config_digest": d["config_digest"], "base": d["base_images"]})
        res["metrics"]["digest"] = d["manifest_digest"]
        res["metrics"]["size"] = {"compressed_bytes": d["compressed_size"],
                                  "uncompressed_bytes": d["uncompressed_size"]}
        res["metrics"]["build_seconds"] = d["wall_s"]
        res["inputs"]["source_date_epoch"] = d["source_date_epoch"]
        res["environment"]["builder"] = d["builder"]
        res["environment"]["engine"] = {"version": (d["builder"] or {}).get("engine_version")}
        files = {"build": str(out_dir / "build.json")}
        return StageOutcome("ok", f"{d['manifest_digest'][:19]}… in {d['wall_s']:.1f}s",
                            seconds=d["wall_s"], record=_slim_build(d),
                            verdicts=[verdict("build", "build", True, "built")], files=files)

    # ------------------------------------------------------------------ scan
    def _scanner_for(self) -> Any:
        if self._scanner is None:
            from servelab.scan.stage import Scanner

            self._scanner = Scanner(
                self.exp.scan, cache_dir=self.opts.trivy_cache_dir, offline=self.opts.offline,
                db_repositories=self.opts.db_repositories or None, run_id=self.run_id)
        return self._scanner

    def scan(self, arm: Arm, image: str | None, out_dir: Path,
             res: dict[str, Any]) -> StageOutcome:
        from servelab.scan.stage import gate

        target: str = str(image)
        build = (res["stages"].get("build") or {}).get("record") or {}
        if build.get("archive") and Path(build["archive"]).exists():
            target = build["archive"]
        # a multi-platform build: scan the platform whose manifest digest the result records
        platform = build.get("platform") if len(build.get("platforms") or []) > 1 else None
        result = self._scanner_for().scan(target, digest=res["image"].get("digest"),
                                          out_dir=out_dir, platform=platform)
        g = gate(result, self.exp.scan)
        counts = result.severity_counts()
        res["metrics"]["findings"] = {k: int(counts.get(k, 0)) for k in
                                      ("CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN")}
        db = result.db.to_dict() if result.db else {}
        res["environment"]["trivy"] = {"version": result.trivy_version,
                                       "db_updated_at": db.get("updated_at"),
                                       "db_path": db.get("path"),
                                       "db_repository": db.get("repository") or None,
                                       "offline": bool(self._scanner_for().policy.offline)}
        self._scans["shared" if result.shared else "scanned"] += 1
        shared = " (shared: same digest already scanned)" if result.shared else ""
        d = result.to_dict()
        record = {k: d[k] for k in ("digest", "platform", "platforms", "shared", "trivy_version",
                                    "db", "counts", "by_severity", "fixable", "unfixed", "gate",
                                    "notes")}
        record["findings"] = [{"severity": f.get("severity"), "id": f.get("id"),
                               "package": f.get("package"), "installed": f.get("installed"),
                               "fixed": f.get("fixed")} for f in d["findings"]]
        return StageOutcome("ok" if g.passed else "failed", g.reason + shared, record=record,
                            verdicts=[verdict("vulnerability gate", "scan", g.passed, g.reason)],
                            files={k: v for k, v in result.files.items()})

    # ------------------------------------------------------------------ smoke
    def smoke(self, arm: Arm, image: str | None, n: int, out_dir: Path,
              res: dict[str, Any]) -> StageOutcome:
        from servelab.smoke.stage import SmokeSettings, smoke_image

        ref = str(image)
        gpu = self.exp.gpu if self.opts.gpu is None else replace(self.exp.gpu,
                                                                  required=self.opts.gpu)
        build = (res["stages"].get("build") or {}).get("record") or {}
        first = ref not in self._smoked and bool(build.get("loaded_now", n == 1))
        # the image's layers are searched for baked weights once per image, not per repeat
        archive = Path(build["archive"]) if build.get("archive") else None
        settings = SmokeSettings.from_experiment(self.exp, gpu=gpu, weights_archive=archive,
                                                 scan_weights=ref not in self._smoked)
        self._smoked.add(ref)
        r = smoke_image(ref, settings, run_id=self.run_id, out_dir=out_dir, first_start=first)
        if r.verdict == "gpu-unavailable":
            raise CapabilityError(f"GPU unavailable for the {arm.name} arm: {r.message}",
                                  hint="run on a machine with an NVIDIA GPU and driver, or "
                                  "--no-gpu to skip the GPU checks")
        d = r.to_dict()
        dur = (d.get("timeline") or {}).get("durations") or {}
        reqs = d.get("requests") or {}
        res["metrics"]["startup"] = {
            "first_accept_s": dur.get("start_to_tcp_accept_s"),
            "ready_s": dur.get("start_to_ready_s"),
            "first_request_s": dur.get("start_to_first_good_request_s"),
            "created_to_started_s": dur.get("start_call_s"),
            "first_start": first,
        }
        lat = reqs.get("latency_ms") or {}
        if reqs:
            res["metrics"]["latency"] = {"p50_ms": lat.get("p50"), "p95_ms": lat.get("p95"),
                                         "count": reqs.get("ok")}
        model = d.get("model") or {}
        if model.get("sha256"):
            res["inputs"]["model_sha256"] = str(model["sha256"]).removeprefix("sha256:")
        self._gpu_facts(res, d.get("gpu"))
        files = dict(r.files)
        if d.get("timeline"):
            write_json(out_dir / "timeline.json", d["timeline"])
            files["timeline"] = str(out_dir / "timeline.json")
        return StageOutcome("ok" if r.passed else "failed", f"{r.verdict}: {r.message}",
                            record=_slim_smoke(d), verdicts=_smoke_verdicts(d), files=files)

    @staticmethod
    def _gpu_facts(res: dict[str, Any], gpu: dict[str, Any] | None) -> None:
        host = (gpu or {}).get("host") or {}
        if host:
            res["host"] = {"gpus": host.get("gpus", []),
                           "cuda_driver_version": host.get("cuda_version"),
                           "gpu_state": host.get("state")}


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


def _smoke_verdicts(d: dict[str, Any]) -> list[dict[str, Any]]:
    out = [verdict("smoke", "smoke", d.get("passed", False),
                   f"{d.get('verdict')}: {d.get('message', '')}")]
    for key, value in (d.get("properties") or {}).items():
        if value == "not-tested":
            why = _NOT_TESTED.get(key, "the server never became ready, so it was not observed")
            if not d.get("passed") and key not in ("no_network_needed", "model_sha256"):
                why = "the server never became ready, so it was not observed"
            out.append(verdict(key, "smoke", None, why))
    for p in d.get("problems") or []:
        out.append(verdict(p.get("id", "problem"), "smoke", False, p.get("message", "")))
    return out
