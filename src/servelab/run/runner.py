"""The runner: one loop over repeats and arms, for ``servelab run`` and ``servelab build``.

Repeats are interleaved across arms in ABBA order (control 1, treatment 1, treatment 2,
control 2, control 3, ...): each arm runs first in every other repeat, so drift on the machine
(a page cache filling, writeback from the previous repeat) favours neither. Each repeat runs
the selected stages through :class:`~servelab.run.stages.Stages`, which hand back typed outcomes
(:mod:`servelab.run.outcomes`). ``servelab run`` (:func:`run_experiment`) turns each repeat's
outcomes into ``OUT/<arm>/repeat-<n>/result.json`` (:func:`servelab.run.results.assemble`,
validated against the schema) and ends with ``summary.json`` and ``summary.md``.
``servelab build`` (:func:`build_experiment`) is the same loop with only the build stage: it
writes the build records and ``OUT/build-summary.json``, and a failed build ends it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from servelab import hashing
from servelab.errors import ExitCode, ServelabError
from servelab.run import aggregate, lazyview, results, summary
from servelab.run.options import STAGES, Progress, RunOptions, parse_stages
from servelab.run.outcomes import (
    BuildOutcome,
    Inputs,
    RepeatResult,
    ScanOutcome,
    SmokeOutcome,
    StageOutcome,
)
from servelab.run.stages import Stages
from servelab.spec import Arm, Experiment, Gates
from servelab.textio import claim_dir, write_file

if TYPE_CHECKING:
    from servelab.build.stage import ExperimentBuilds
    from servelab.run.diskplan import Plan as DiskPlan

OutcomeT = TypeVar("OutcomeT", bound=StageOutcome)

NOT_SELECTED = "not selected with --stages"
NO_IMAGE = "no image to test: the build stage did not produce one"


@dataclass
class RunResult:
    summary: dict[str, Any]
    markdown: str
    exit_code: int
    out_dir: Path


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Runner:
    """One run of one experiment: the loop over repeats and arms, and what is made of it."""

    def __init__(self, exp: Experiment, opts: RunOptions, progress: Progress) -> None:
        from servelab.cleanup import new_run_id

        self.exp = exp
        self.opts = opts
        self.progress = progress
        self.run_id = new_run_id()
        self.repeats = opts.repeats or exp.repeats
        self.started = _now()
        self.stages = Stages(exp, opts, self.run_id, progress)
        self.results: list[dict[str, Any]] = []
        self.skipped: list[dict[str, str]] = [
            {"stage": s, "reason": NOT_SELECTED} for s in STAGES if s not in opts.stages]
        self.notes: list[str] = []
        self._input_cache: dict[str, Inputs] = {}
        self.calibration = _calibration(opts.calibration, self.repeats, self.notes)
        self.plan: DiskPlan | None = None
        #: each arm's build digests so far (the disk plan grows when an arm gives two)
        self._digests: dict[str, set[str]] = {}
        #: seconds of the run's final clean-up (what the stages' exit removed): summary.json
        self.cleanup_s: float | None = None

    # ------------------------------------------------------------------ servelab run
    def execute(self) -> RunResult:
        self._preflight()
        with self._disk_full_stops(), self.stages:
            for rr in self._repeats():
                self.results.append(self._write(rr))
            last = time.monotonic()
        self.cleanup_s = round(time.monotonic() - last, 3)
        self.notes.extend(self.stages.notes)
        return self._finish()

    # ------------------------------------------------------------------ disk
    def _preflight(self) -> None:
        """Refuse, before any build, a run whose peak disk cannot fit (exit 3)."""
        if not {"build", "smoke"} & set(self.opts.stages):
            return
        from servelab.run import diskplan

        self.plan = diskplan.plan_for(self.exp, self.opts, self._arms())
        self.notes.extend(self.plan.notes)
        self.plan.check()

    def _replan(self, arm: str, build: BuildOutcome) -> None:
        """After the first build: the plan again with the image's real sizes; after an arm's
        builds gave a second digest: the plan with one image per build."""
        rec = build.build
        if self.plan is None or rec is None:
            return
        from servelab.run import diskplan

        seen = self._digests.setdefault(arm, set())
        seen.add(rec.manifest_digest)
        if self.plan.source != "first build":
            self.plan = diskplan.replan(self.plan, rec.primary.uncompressed_size or 0,
                                        rec.primary.compressed_size)
        elif len(seen) > 1 and self.plan.reproduces:
            built = len(set().union(*self._digests.values()))
            self.plan = diskplan.unreproduced(self.plan, arm, built)
            self.notes.append(self.plan.notes[-1])
        else:
            return
        self.plan.check()

    @contextmanager
    def _disk_full_stops(self) -> Iterator[None]:
        """A disk that fills mid-run: the stages' exit has removed what the run made; the
        archives go too, and the run directory keeps the results written so far and
        ``stopped.json`` with the reason (exit 3)."""
        from servelab.run import diskplan

        try:
            yield
        except (OSError, ServelabError) as e:
            if not diskplan.is_disk_full(e):
                raise
            raise diskplan.stop_disk_full(self.opts.out_dir, e, self.results) from e

    def _arms(self) -> list[Arm]:
        """The arms this run builds: every arm, or the shard's one."""
        shard = self.opts.shard
        return [a for a in self.exp.arms() if shard is None or a.name == shard[0]]

    # ------------------------------------------------------------------ servelab build
    def execute_builds(self) -> ExperimentBuilds:
        """Only the build stage: every arm's build records and reproducibility verdict."""
        from servelab.build.stage import ArmBuilds, ExperimentBuilds
        from servelab.build.stage import verdict as build_verdict

        self._preflight()
        with self._disk_full_stops(), self.stages:
            for _rr in self._repeats():
                pass
        built = [a for a in self.exp.arms() if a.image is None]
        skipped = [f"{a.name}: prebuilt image {a.image}, nothing to build"
                   for a in self.exp.arms() if a.image is not None]
        arms = []
        for a in built:
            recs = self.stages.records.get(a.name, [])
            rep = self.stages.judged.get(a.name) or build_verdict(recs)
            arms.append(ArmBuilds(a.name, recs, rep))
        return ExperimentBuilds(self.run_id, self.opts.out_dir, arms,
                                self.exp.gates.reproducible, skipped)

    # ------------------------------------------------------------------ the loop
    def _repeats(self) -> Iterator[RepeatResult]:
        """The one place that decides the arms, the repeats and their order."""
        arms = [self.stages.checkout(a) for a in self._arms()]
        lint = self.stages.lint(arms) if "lint" in self.opts.stages else {}
        for n in range(1, self.repeats + 1):
            if self.opts.shard is not None and n != self.opts.shard[1]:
                continue
            for arm in abba(arms, n):
                yield self._one(arm, n, lint.get(arm.name))

    def _repeat_dir(self, arm: str, n: int) -> Path:
        return self.opts.out_dir / arm / f"repeat-{n}"

    def _one(self, arm: Arm, n: int, lint: StageOutcome | None) -> RepeatResult:
        t0 = time.monotonic()
        self.progress(f"[{arm.name} {n}/{self.repeats}] start")
        out = self._repeat_dir(arm.name, n)  # each stage makes it when it writes there
        build = self._stage("build", BuildOutcome, lambda: self.stages.build(arm, n, out))
        self._replan(arm.name, build)
        image = build.tested_ref or arm.image
        scan = self._tested("scan", ScanOutcome, image,
                            lambda ref: self.stages.scan(ref, build, out))
        smoke = self._tested("smoke", SmokeOutcome, image,
                             lambda ref: self.stages.smoke(arm, ref, n, build, out))
        self.stages.release(build)
        self.progress(f"[{arm.name} {n}/{self.repeats}] done in {time.monotonic() - t0:.1f}s")
        return RepeatResult(arm=arm, repeat=n, build=build, scan=scan, smoke=smoke, lint=lint)

    def _tested(self, name: str, kind: type[OutcomeT], image: str | None,
                call: Callable[[str], OutcomeT]) -> OutcomeT:
        """A stage that tests the image: skipped when there is none."""
        if name in self.opts.stages and image is None:
            return kind("skipped", NO_IMAGE)
        ref = str(image)
        return self._stage(name, kind, lambda: call(ref))

    def _stage(self, name: str, kind: type[OutcomeT],
               call: Callable[[], OutcomeT]) -> OutcomeT:
        if name not in self.opts.stages:
            return kind("skipped", NOT_SELECTED)
        self.progress(f"  {name} ...")
        t0 = time.monotonic()
        outcome = call()
        if outcome.seconds is None:
            outcome.seconds = round(time.monotonic() - t0, 3)
        self.progress(f"  {name}: {outcome.status}"
                      + (f" ({outcome.reason})" if outcome.reason else ""))
        return outcome

    def _write(self, rr: RepeatResult) -> dict[str, Any]:
        """result.json of one repeat, assembled once from its outcomes and validated."""
        res = results.assemble(rr, run=self.run_info(finished_at=_now()),
                               experiment=self.experiment_info(), inputs=self._inputs(rr.arm),
                               serve=self.exp.spec_data.get("serve", {}))
        problems = results.validate_result(res)
        if problems:
            raise AssertionError(f"servelab wrote an invalid result.json: {problems[:3]}")
        results.write_json(self._repeat_dir(rr.arm.name, rr.repeat) / results.RESULT_FILE, res)
        return res

    # ------------------------------------------------------------------ facts
    def run_info(self, finished_at: str | None = None) -> dict[str, Any]:
        info = {"id": self.run_id, "name": self.opts.run_name, "started_at": self.started,
                "finished_at": finished_at, "machine": results.host_facts()["node"]}
        if self.opts.shard is not None:
            info["shard"] = {"arm": self.opts.shard[0], "repeat": self.opts.shard[1],
                             "of": self.repeats}
        return info

    def experiment_info(self) -> dict[str, Any]:
        e = self.exp
        return {"name": e.name, "file": str(e.file), "form": e.form, "spec_hash": e.spec_hash(),
                "change": e.change, "fixed": e.fixed, "metrics": e.metrics,
                "repeats": self.repeats, "spec": e.spec_data}

    def _inputs(self, arm: Arm) -> Inputs:
        """The arm's input hashes, computed at its first repeat (a context or model of GBs is
        read once per run, not once per repeat)."""
        if arm.name not in self._input_cache:
            self._input_cache[arm.name] = self._hash_inputs(arm)
        return self._input_cache[arm.name]

    @cached_property
    def _model_sha256(self) -> str | None:
        m = self.exp.model
        if m is not None and m.path is not None and m.path.exists():
            return hashing.sha256_tree(m.path)
        return None

    def _hash_inputs(self, arm: Arm) -> Inputs:
        rq = self.exp.request
        return Inputs(
            build_args=dict(arm.build_args), git_ref=arm.git_ref,
            commit=self.stages.commit_of(arm),
            dockerfile_sha256=(hashing.sha256_file(arm.dockerfile)
                               if arm.dockerfile.is_file() else None),
            context_sha256=hashing.sha256_context(arm.context) if arm.context.is_dir() else None,
            model_sha256=self._model_sha256,
            request_sha256=(hashing.sha256_json([rq.method, rq.path, rq.headers,
                                                 (rq.body or b"").hex()])
                            if rq is not None else None))

    # ------------------------------------------------------------------ the end
    def _finish(self) -> RunResult:
        if self.opts.shard is not None:
            return self._finish_shard()
        extra: dict[str, Any] = {"cleanup_s": self.cleanup_s}
        if self.plan is not None:
            extra["disk_plan"] = self.plan.to_dict()
        return summarize(self.facts(), self.opts.out_dir, extra)

    def facts(self) -> RunFacts:
        return RunFacts(
            fixed=self.exp.fixed, gates=self.exp.gates, arms=[a.name for a in self.exp.arms()],
            results=self.results, repeats=self.repeats,
            run=self.run_info(finished_at=_now()), experiment=self.experiment_info(),
            skipped=self.skipped, notes=self.notes, annotations=self.stages.annotations,
            reproducibility=self.stages.reproducibility, calibration=self.calibration,
            calibration_file=None if self.calibration is None else str(self.opts.calibration))

    def _finish_shard(self) -> RunResult:
        """One (arm, repeat) of the run: its result.json is what counts; summary.json holds it
        for ``servelab report``, which merges the shards into the run's verdict."""
        arm, n = self.opts.shard or ("", 0)
        data: dict[str, Any] = {
            "schemaVersion": 1, "verdict": "shard",
            "reasons": [f"{arm} repeat {n} of {self.repeats}: merge every shard's directory "
                        "with servelab report for the verdict"],
            "exit_code": 0, "shard": {"arm": arm, "repeat": n, "of": self.repeats},
            "run": self.run_info(finished_at=_now()), "experiment": self.experiment_info(),
            "skipped": self.skipped, "notes": self.notes, "results": self.results}
        data["cleanup_s"] = self.cleanup_s
        if self.plan is not None:
            data["disk_plan"] = self.plan.to_dict()
        md = (f"# servelab shard: {arm} repeat {n} of {self.repeats}\n\n"
              "Merge every shard's directory with `servelab report --out DIR SHARD...` for "
              "the run's verdict and summary.\n")
        results.write_json(self.opts.out_dir / results.SUMMARY_FILE, data)
        write_file(self.opts.out_dir / "summary.md", md, what="summary.md")
        return RunResult(data, md, 0, self.opts.out_dir)


@dataclass
class RunFacts:
    """What a run's summary is made of: one machine's runner, or shards merged
    (:mod:`servelab.run.shards`)."""

    fixed: list[str]
    gates: Gates
    arms: list[str]
    results: list[dict[str, Any]]
    repeats: int
    run: dict[str, Any]
    experiment: dict[str, Any]
    skipped: list[dict[str, str]]
    notes: list[str]
    annotations: list[dict[str, Any]]
    reproducibility: dict[str, dict[str, Any]]
    #: the calibration file's document (servelab calibrate) and where it was read, if any
    calibration: dict[str, Any] | None = None
    calibration_file: str | None = None


def summarize(f: RunFacts, out_dir: Path, extra: dict[str, Any] | None = None) -> RunResult:
    """The run's verdict, summary.json and summary.md from its results."""
    by_arm = {a: [r for r in f.results if r["arm"] == a] for a in ("control", "treatment")}
    control = aggregate.arm_stats("control", by_arm["control"]) if by_arm["control"] else None
    treatment = aggregate.arm_stats("treatment", by_arm["treatment"])
    thresholds = ({k: float(v["threshold"]) for k, v in f.calibration["metrics"].items()}
                  if f.calibration else None)
    deltas = (aggregate.compare_arms(control, treatment, f.gates.min_effect, thresholds)
              if control else [])
    invalid = check_fixed(f.fixed, f.results)
    gate_failures = evaluate_gates(f.gates, treatment, by_arm["treatment"])
    v = aggregate.judge(control, treatment, deltas, gate_failures, invalid)
    data = build_summary(f, v, treatment)
    data["reproducibility"] = f.reproducibility
    data.update(extra or {})
    data.update(aggregate.headline(treatment, control))
    data["comparison"] = aggregate.comparison(deltas)
    if f.calibration is not None:
        data["calibration"] = {"file": f.calibration_file, "repeats": f.calibration["repeats"],
                               "runs": f.calibration["runs"]}
    lazy = lazyview.status(f.results)
    if lazy is not None:
        data["lazy"] = lazy
    md = summary.render_markdown(data, control, treatment, deltas, f.results)
    data["results"] = f.results
    results.write_json(out_dir / results.SUMMARY_FILE, data)
    write_file(out_dir / "summary.md", md, what="summary.md")
    return RunResult(data, md, v.exit_code, out_dir)


def abba_names(arms: list[str], n: int) -> list[str]:
    """:func:`abba` of arm names."""
    return list(arms) if n % 2 else list(reversed(arms))


def _calibration(path: Path | None, repeats: int, notes: list[str]) -> dict[str, Any] | None:
    """The calibration file (``--calibration``), read and checked before the run starts; a
    note when it was made for other repeats than this run's."""
    if path is None:
        return None
    from servelab.run.calfile import load

    doc = load(path)
    if doc["repeats"] != repeats:
        notes.append(f"the calibration file {path} was made for {doc['repeats']} repeats an "
                     f"arm, this run has {repeats}: its thresholds are those of "
                     f"{doc['repeats']} repeats")
    return doc


def abba(arms: list[Arm], n: int) -> list[Arm]:
    """The arms' order in repeat *n* (from 1): as given in odd repeats, reversed in even ones
    (ABBA), so that neither arm always runs first."""
    return list(arms) if n % 2 else list(reversed(arms))


FIXED_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "image": lambda r: tuple(sorted(
        str(b.get("digest")) for b in (r["image"].get("base") or []) if b.get("digest"))) or None,
    "model": lambda r: r["inputs"].get("model_sha256"),
    "input": lambda r: r["inputs"].get("request_sha256"),
    "builder": lambda r: _stable((r["environment"].get("builder") or {}), "driver", "buildkit"),
    "engine": lambda r: _stable((r["environment"].get("engine") or {}), "version"),
    "platform": lambda r: (r["stages"].get("build", {}).get("record") or {}).get("platform"),
    "gpu": lambda r: tuple(g.get("uuid") or g.get("name") for g in r["host"].get("gpus", [])),
    "scanner": lambda r: _stable((r["environment"].get("trivy") or {}), "version",
                                 "db_updated_at"),
}


def _stable(d: dict[str, Any], *keys: str) -> tuple[Any, ...] | None:
    vals = tuple(d.get(k) for k in keys)
    return None if all(v is None for v in vals) else vals


def check_fixed(fixed: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """Reasons the run is invalid: a factor the spec holds fixed that differed."""
    problems = []
    for factor in fixed:
        key = FIXED_KEYS.get(factor)
        if key is None:
            continue
        seen: dict[Any, list[str]] = {}
        for r in rows:
            value = key(r)
            if value is None:
                continue
            seen.setdefault(value, []).append(f"{r['arm']} r{r['repeat']}")
        if len(seen) > 1:
            parts = [f"{v} in {', '.join(where)}" for v, where in seen.items()]
            problems.append(f"fixed factor '{factor}' differed: " + "; ".join(parts))
    return problems


def evaluate_gates(g: Gates, t: aggregate.ArmStats,
                   rows: list[dict[str, Any]]) -> list[str]:
    """The treatment's failed checks and gates, each with its reason."""
    out: list[str] = []
    for r in rows:
        for v in r["verdicts"]:
            if v["passed"] is False:
                out.append(f"{v['check']} ({r['arm']} r{r['repeat']}): {v['reason']}")
    if g.reproducible and t.reproducible is False:
        distinct = sorted({d for d in t.digests if d})
        out.append(f"reproducible: {len(distinct)} distinct digests over {t.repeats} builds")
    size = t.metrics.get("size")
    if g.max_size_bytes is not None and size and size.median > g.max_size_bytes:
        out.append(f"maxSizeBytes: median {size.median:.0f} > {g.max_size_bytes}")
    start = t.metrics.get("startup")
    if g.max_startup_s is not None and start and start.median > g.max_startup_s:
        out.append(f"maxStartupSeconds: median {start.median:.3f}s > {g.max_startup_s}s")
    for sev, limit in g.max_findings.items():
        worst = max((int((r["metrics"].get("findings") or {}).get(sev, 0)) for r in rows),
                    default=0)
        if worst > limit:
            out.append(f"maxFindings.{sev}: {worst} > {limit}")
    return out


def build_summary(f: RunFacts, v: aggregate.Verdict, t: aggregate.ArmStats
                  ) -> dict[str, Any]:
    rows = [r for r in f.results if r["arm"] == "treatment"]
    findings = {s: 0 for s in aggregate.SEVERITIES}
    if rows and rows[0]["metrics"].get("findings"):
        findings = {s: int(rows[0]["metrics"]["findings"].get(s, 0))
                    for s in aggregate.SEVERITIES}
    size = t.metrics.get("size")
    start = t.metrics.get("startup")
    digests = [d for d in t.digests if d]
    return {
        "schemaVersion": 1,
        "verdict": v.verdict,
        "reasons": v.reasons,
        "exit_code": v.exit_code,
        "reproducible": t.reproducible,
        "digest": digests[0] if digests and t.reproducible else (digests[0] if digests else None),
        "size_bytes": int(size.median) if size else None,
        "startup_p50_s": start.median if start else None,
        "findings": findings,
        "repeats": f.repeats,
        "arms": list(f.arms),
        "run": f.run,
        "experiment": f.experiment,
        "skipped": f.skipped,
        "not_tested": sorted({v2["check"] + ": " + v2["reason"] for r in f.results
                              for v2 in r["verdicts"] if v2["passed"] is None}),
        "notes": f.notes,
        "annotations": f.annotations,
    }


BUILD_SUMMARY_FILE = "build-summary.json"
#: What run and build write at the top of --out: a directory holding one of these (a user's
#: file, an earlier run) is refused, never overwritten (textio.claim_dir).
OUT_NAMES = ("summary.json", "summary.md", BUILD_SUMMARY_FILE, "control", "treatment",
             "images", "lint-*.sarif", "stopped.json")


def run_experiment(exp: Experiment, opts: RunOptions,
                   progress: Progress | None = None) -> RunResult:
    """``servelab run``: run *exp*; never overwrites an earlier run's artifacts."""
    with claim_dir(opts.out_dir, names=OUT_NAMES):
        if "smoke" in opts.stages or "build" in opts.stages:
            from servelab.cleanup import sweep

            sweep()
        return Runner(exp, opts, progress or (lambda _m: None)).execute()




def build_experiment(exp: Experiment, opts: RunOptions,
                     progress: Progress | None = None) -> ExperimentBuilds:
    """``servelab build``: the runner with only the build stage. Every arm with a Dockerfile is
    built ``repeats`` times, interleaved (ABBA), and judged; a failed build or an unpinned base
    raises (exit 1). Writes the build records and ``OUT/build-summary.json``."""
    opts = replace(opts, stages=("build",), stop_on_build_failure=True)
    with claim_dir(opts.out_dir, names=OUT_NAMES):
        result = Runner(exp, opts, progress or (lambda _m: None)).execute_builds()
        write_file(opts.out_dir / BUILD_SUMMARY_FILE,
                   json.dumps(result.to_dict(), indent=2) + "\n", what="build-summary.json")
    return result


__all__ = ["STAGES", "ExitCode", "RunOptions", "RunResult", "build_experiment", "parse_stages",
           "run_experiment"]
