"""``servelab run``: the whole experiment, spec -> lint -> build -> scan -> smoke -> report.

Repeats are interleaved across arms (control 1, treatment 1, control 2, ...) so drift on the
machine hits both alike. Each repeat of each arm writes ``OUT/<arm>/repeat-<n>/result.json``;
the run ends with ``summary.json`` and ``summary.md``. The stages themselves live in their own
modules; :mod:`servelab.run.stages` adapts them to :class:`~servelab.run.results.StageOutcome`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from servelab import hashing
from servelab.errors import ExitCode, InputError
from servelab.run import aggregate, results, summary
from servelab.spec import Arm, Experiment

STAGES = ("lint", "build", "scan", "smoke")
Progress = Callable[[str], None]


@dataclass
class RunOptions:
    out_dir: Path
    stages: tuple[str, ...] = STAGES
    repeats: int | None = None
    fail_on: str = "error"
    gpu: bool | None = None
    trivy_cache_dir: Path | None = None
    db_repositories: list[str] = field(default_factory=list)
    offline: bool | None = None
    run_name: str | None = None
    keep: bool = False


@dataclass
class RunResult:
    summary: dict[str, Any]
    markdown: str
    exit_code: int
    out_dir: Path


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def parse_stages(text: str) -> tuple[str, ...]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in chosen if s not in STAGES]
    if bad or not chosen:
        raise InputError(f"unknown stage(s): {', '.join(bad) or '(none)'}",
                         hint=f"choose from {', '.join(STAGES)}, comma-separated")
    return tuple(s for s in STAGES if s in chosen)


class Runner:
    """One run of one experiment. Small steps; each writes what it learnt into the results."""

    def __init__(self, exp: Experiment, opts: RunOptions, progress: Progress) -> None:
        from servelab.cleanup import new_run_id
        from servelab.run import stages

        self.exp = exp
        self.opts = opts
        self.progress = progress
        self.run_id = new_run_id()
        self.repeats = opts.repeats or exp.repeats
        self.started = _now()
        self.stages = stages.Stages(exp, opts, self.run_id, progress)
        self.results: list[dict[str, Any]] = []
        self.skipped: list[dict[str, str]] = [
            {"stage": s, "reason": "not selected with --stages"}
            for s in STAGES if s not in opts.stages
        ]
        self.notes: list[str] = []
        self._input_cache: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ the loop
    def execute(self) -> RunResult:
        with self.stages:
            arms = self._arms()
            lint = self.stages.lint(arms) if "lint" in self.opts.stages else {}
            for n in range(1, self.repeats + 1):
                for arm in arms:
                    self.results.append(self._one(arm, n, lint.get(arm.name)))
        self.notes.extend(self.stages.notes)
        return self._finish()

    def _arms(self) -> list[Arm]:
        arms = self.exp.arms()
        return [self.stages.checkout(a) for a in arms]

    def _one(self, arm: Arm, n: int, lint: results.StageOutcome | None) -> dict[str, Any]:
        t0 = time.monotonic()
        self.progress(f"[{arm.name} {n}/{self.repeats}] start")
        res = results.base_result(run=self._run_info(), experiment=self._exp_info(),
                                  arm=arm.name, repeat=n)
        res["inputs"].update(self._inputs(arm))
        res["spec"] = {"serve": self.exp.spec_data.get("serve", {})}
        repeat_dir = self.opts.out_dir / arm.name / f"repeat-{n}"
        repeat_dir.mkdir(parents=True, exist_ok=True)
        if lint is not None:
            self._apply(res, "lint", lint)
        image = self._stage(res, "build", lambda: self.stages.build(arm, n, repeat_dir, res))
        if image is None and arm.image:
            image = arm.image
            res["image"]["ref"] = arm.image
        self._stage(res, "scan", lambda: self.stages.scan(arm, image, repeat_dir, res),
                    needs_image=image)
        self._stage(res, "smoke", lambda: self.stages.smoke(arm, image, n, repeat_dir, res),
                    needs_image=image)
        res["run"]["finished_at"] = _now()
        problems = results.validate_result(res)
        if problems:
            raise AssertionError(f"servelab wrote an invalid result.json: {problems[:3]}")
        results.write_json(repeat_dir / results.RESULT_FILE, res)
        self.progress(f"[{arm.name} {n}/{self.repeats}] done in {time.monotonic() - t0:.1f}s")
        return res

    def _stage(self, res: dict[str, Any], name: str, call: Callable[[], results.StageOutcome],
               needs_image: str | bool | None = True) -> str | None:
        if name not in self.opts.stages:
            self._apply(res, name, results.StageOutcome("skipped", "not selected with --stages"))
            return None
        if needs_image is None:
            self._apply(res, name, results.StageOutcome(
                "skipped", "no image to test: the build stage did not produce one"))
            return None
        self.progress(f"  {name} ...")
        t0 = time.monotonic()
        outcome = call()
        if outcome.seconds is None:
            outcome.seconds = round(time.monotonic() - t0, 3)
        self._apply(res, name, outcome)
        self.progress(f"  {name}: {outcome.status}"
                      + (f" ({outcome.reason})" if outcome.reason else ""))
        image = res["image"].get("ref")
        return str(image) if image else None

    @staticmethod
    def _apply(res: dict[str, Any], name: str, outcome: results.StageOutcome) -> None:
        res["stages"][name] = outcome.to_dict()
        res["verdicts"].extend(outcome.verdicts)
        res["files"].update(outcome.files)

    # ------------------------------------------------------------------ facts
    def _run_info(self) -> dict[str, Any]:
        return {"id": self.run_id, "name": self.opts.run_name, "started_at": self.started,
                "finished_at": None, "machine": results.host_facts()["node"]}

    def _exp_info(self) -> dict[str, Any]:
        e = self.exp
        return {"name": e.name, "file": str(e.file), "form": e.form, "spec_hash": e.spec_hash(),
                "change": e.change, "fixed": e.fixed, "metrics": e.metrics,
                "repeats": self.repeats, "spec": e.spec_data}

    def _inputs(self, arm: Arm) -> dict[str, Any]:
        """The arm's input hashes, computed at its first repeat (a context or model of GBs is
        read once per run, not once per repeat)."""
        if arm.name not in self._input_cache:
            self._input_cache[arm.name] = self._hash_inputs(arm)
        return dict(self._input_cache[arm.name])

    @cached_property
    def _model_sha256(self) -> str | None:
        m = self.exp.model
        if m is not None and m.path is not None and m.path.exists():
            return hashing.sha256_tree(m.path)
        return None

    def _hash_inputs(self, arm: Arm) -> dict[str, Any]:
        out: dict[str, Any] = {"build_args": dict(arm.build_args), "git_ref": arm.git_ref}
        if arm.dockerfile.is_file():
            out["dockerfile_sha256"] = hashing.sha256_file(arm.dockerfile)
        if arm.context.is_dir():
            out["context_sha256"] = hashing.sha256_context(arm.context)
        if self._model_sha256 is not None:
            out["model_sha256"] = self._model_sha256
        rq = self.exp.request
        if rq is not None:
            out["request_sha256"] = hashing.sha256_json(
                [rq.method, rq.path, rq.headers, (rq.body or b"").hex()])
        out["commit"] = self.stages.commit_of(arm)
        return out

    # ------------------------------------------------------------------ the end
    def _finish(self) -> RunResult:
        by_arm = {a: [r for r in self.results if r["arm"] == a] for a in ("control", "treatment")}
        control = aggregate.arm_stats("control", by_arm["control"]) if by_arm["control"] else None
        treatment = aggregate.arm_stats("treatment", by_arm["treatment"])
        deltas = (aggregate.compare_arms(control, treatment, self.exp.gates.min_effect)
                  if control else [])
        invalid = check_fixed(self.exp.fixed, self.results)
        gate_failures = evaluate_gates(self.exp, treatment, by_arm["treatment"])
        v = aggregate.judge(control, treatment, deltas, gate_failures, invalid)
        data = build_summary(self.exp, self, v, treatment)
        data["reproducibility"] = self.stages.reproducibility
        md = summary.render_markdown(data, control, treatment, deltas, self.results)
        data["results"] = self.results
        results.write_json(self.opts.out_dir / results.SUMMARY_FILE, data)
        (self.opts.out_dir / "summary.md").write_text(md, encoding="utf-8")
        return RunResult(data, md, v.exit_code, self.opts.out_dir)


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


def evaluate_gates(exp: Experiment, t: aggregate.ArmStats,
                   rows: list[dict[str, Any]]) -> list[str]:
    """The treatment's failed checks and gates, each with its reason."""
    out: list[str] = []
    for r in rows:
        for v in r["verdicts"]:
            if v["passed"] is False:
                out.append(f"{v['check']} ({r['arm']} r{r['repeat']}): {v['reason']}")
    g = exp.gates
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


def build_summary(exp: Experiment, runner: Runner, v: aggregate.Verdict,
                  t: aggregate.ArmStats) -> dict[str, Any]:
    rows = [r for r in runner.results if r["arm"] == "treatment"]
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
        "repeats": runner.repeats,
        "arms": [a.name for a in exp.arms()],
        "run": runner._run_info(),
        "experiment": runner._exp_info(),
        "skipped": runner.skipped,
        "not_tested": sorted({v2["check"] + ": " + v2["reason"] for r in runner.results
                              for v2 in r["verdicts"] if v2["passed"] is None}),
        "notes": runner.notes,
        "annotations": runner.stages.annotations,
    }


def run_experiment(exp: Experiment, opts: RunOptions,
                   progress: Progress | None = None) -> RunResult:
    """Run *exp*; never overwrites an earlier run's artifacts."""
    if (opts.out_dir / results.SUMMARY_FILE).exists() or any(
            (opts.out_dir / a).exists() for a in ("control", "treatment")):
        raise InputError(f"{opts.out_dir} already holds a run's artifacts",
                         hint="choose another --out directory (servelab never overwrites one)")
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    if "smoke" in opts.stages or "build" in opts.stages:
        from servelab.cleanup import sweep

        sweep()
    return Runner(exp, opts, progress or (lambda _m: None)).execute()


__all__ = ["STAGES", "ExitCode", "RunOptions", "RunResult", "parse_stages", "run_experiment"]
