"""``servelab report`` over shards: the runs of one experiment split over machines, one
(arm, repeat) each (``servelab run --shard ARM:N``), merged into the verdict and summary one
machine would give.

API::

    if all_shards(rows):                      # every result carries run.shard
        res = merge_shards(rows, out_dir)     # -> RunResult (summary.json and .md written)

The merge checks that the shards belong together (one spec hash, each (arm, repeat) once,
every arm and repeat of the spec present: a missing or doubled shard is bad input, exit 2),
puts the results in the order one machine runs them (ABBA), and hands them to the same
:func:`servelab.run.runner.summarize` a single run ends with: the same comparison of control
and treatment on every metric, the same gates, the same fixed factors and reproducibility
verdicts (from the digests; the archives stay on the shards' runners, so a difference is not
explained here: ``servelab diff`` of two shards' archives does that).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.errors import InputError
from servelab.run.aggregate import _get
from servelab.run.runner import RunFacts, RunResult, abba_names, summarize


def shard_of(r: dict[str, Any]) -> tuple[str, int] | None:
    s = _get(r, "run", "shard")
    if isinstance(s, dict) and isinstance(s.get("arm"), str) and isinstance(s.get("repeat"), int):
        return str(s["arm"]), int(s["repeat"])
    return None


def all_shards(rows: list[dict[str, Any]]) -> bool:
    """Whether *rows* are all results of ``servelab run --shard``."""
    return bool(rows) and all(shard_of(r) is not None for r in rows)


def _arms(spec: dict[str, Any]) -> list[str]:
    return [a for a in ("control", "treatment") if a == "treatment" or a in spec]


def _check(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str], int]:
    """The experiment the shards share, its arms and repeats; InputError when they do not
    belong together or some are missing."""
    hashes = {str(_get(r, "experiment", "spec_hash")) for r in rows}
    if len(hashes) != 1:
        raise InputError(f"the shards are of {len(hashes)} different experiments (spec hashes "
                         f"{', '.join(sorted(h[:19] for h in hashes))})",
                         hint="merge the shards of one run of one experiment")
    exp = dict(rows[0].get("experiment") or {})
    spec = exp.get("spec") if isinstance(exp.get("spec"), dict) else {}
    arms, repeats = _arms(spec or {}), int(exp.get("repeats") or 0)
    seen: dict[tuple[str, int], int] = {}
    for r in rows:
        key = shard_of(r) or ("", 0)
        seen[key] = seen.get(key, 0) + 1
    doubled = [f"{a} {n}" for (a, n), c in sorted(seen.items()) if c > 1]
    missing = [f"{a} {n}" for n in range(1, repeats + 1) for a in arms if (a, n) not in seen]
    extra = [f"{a} {n}" for (a, n) in sorted(seen) if a not in arms or not 1 <= n <= repeats]
    problems = ([f"given twice: {', '.join(doubled)}"] if doubled else []) + (
        [f"missing: {', '.join(missing)}"] if missing else []) + (
        [f"not in the experiment: {', '.join(extra)}"] if extra else [])
    if problems:
        raise InputError("the shards do not make one whole run: " + "; ".join(problems),
                         hint="give every shard's directory (one per arm and repeat: "
                         f"{len(arms)} x {repeats}); a shard that failed to run must be "
                         "run again")
    return exp, arms, repeats


def _reproducibility(rows: list[dict[str, Any]], arms: list[str]) -> tuple[
        dict[str, dict[str, Any]], list[str]]:
    from servelab.build.stage import Reproducibility

    out: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for arm in arms:
        digests = [str(d) for r in rows if r["arm"] == arm
                   if (d := _get(r, "image", "digest"))]
        if len(digests) < 2:
            continue
        distinct = list(dict.fromkeys(digests))
        rep = Reproducibility(len(distinct) == 1, digests, distinct)
        if len(distinct) > 1:
            rep.note = ("merged from shards: the archives are on the shards' runners; "
                        "servelab diff of two of them explains the difference")
        out[arm] = rep.to_dict()
        notes.append(f"{arm}: {rep.summary}")
    return out, notes


def merge_shards(rows: list[dict[str, Any]], out_dir: Path) -> RunResult:
    """The one-machine summary of the shards *rows* (see the module docstring), written to
    *out_dir*."""
    exp, arms, repeats = _check(rows)
    by_key = {shard_of(r): r for r in rows}
    ordered = [by_key[(a, n)] for n in range(1, repeats + 1) for a in abba_names(arms, n)]
    reproducibility, notes = _reproducibility(ordered, arms)
    from servelab.spec import gates_of

    runs = [r.get("run") or {} for r in ordered]
    machines = sorted({str(x.get("machine")) for x in runs if x.get("machine")})
    started = sorted(str(x["started_at"]) for x in runs if x.get("started_at"))
    finished = sorted(str(x["finished_at"]) for x in runs if x.get("finished_at"))
    run = {"id": "shards:" + ",".join(sorted({str(x.get("id")) for x in runs})),
           "name": None, "started_at": started[0] if started else None,
           "finished_at": finished[-1] if finished else None,
           "machine": ", ".join(machines) or None}
    facts = RunFacts(
        fixed=list(exp.get("fixed") or []), gates=gates_of(exp.get("spec") or {}), arms=arms,
        results=ordered, repeats=repeats, run=run, experiment=exp, skipped=_skipped(ordered),
        notes=[f"merged from {len(ordered)} shards (one arm and repeat each)", *notes],
        annotations=[], reproducibility=reproducibility)
    return summarize(facts, out_dir, {"shards": len(ordered)})


def _skipped(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The stages no shard ran because --stages left them out (as one run says it)."""
    from servelab.run.options import STAGES
    from servelab.run.runner import NOT_SELECTED

    def left_out(r: dict[str, Any], stage: str) -> bool:  # lint left out leaves no entry
        st = (r.get("stages") or {}).get(stage)
        return st is None or (isinstance(st, dict) and st.get("reason") == NOT_SELECTED)

    return [{"stage": s, "reason": NOT_SELECTED} for s in STAGES
            if all(left_out(r, s) for r in rows)]
