"""The artifact plan: one artifact per repeat, named from the prefix, job, matrix leg and
attempt, within the action's upload slots (the rest go together in one overflow artifact).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from servelab.github.outputs import output_text

#: Upload slots in action.yml: one artifact per repeat, 10 repeats x 2 arms.
MAX_ARTIFACT_SLOTS = 20
_ARTIFACT_BAD = re.compile(r"[^A-Za-z0-9._]+")  # runs of "-" collapse too
_REPEAT_RE = re.compile(r"^repeat-([0-9]+)$")

# --------------------------------------------------------------------------------------------
# Artifact plan: one artifact per repeat
# --------------------------------------------------------------------------------------------


def artifact_name(*parts: str) -> str:
    """An upload-artifact name: each run of characters outside [A-Za-z0-9._] becomes one "-"."""
    cleaned = (_ARTIFACT_BAD.sub("-", p).strip("-") for p in parts)
    return "-".join(p for p in cleaned if p) or "servelab"


#: a leg named by its matrix values longer than this is named by its index instead
LEG_MAX = 48


def _matrix_values(value: object) -> list[str]:
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in _matrix_values(v)]
    if isinstance(value, list):
        return [json.dumps(value, separators=(",", ":"))]
    if value is None or value == "":
        return []
    return [output_text(value)]


def matrix_leg(matrix: str = "", job_index: str = "", job_total: str = "") -> str:
    """The part of artifact names that keeps matrix legs apart; empty outside a matrix.

    *matrix* is ``toJSON(matrix)`` and *job_index*, *job_total* the ``strategy`` context, which
    GitHub gives composite actions: a leg is named by its matrix values (``ubuntu-24.04-2``), or
    ``leg-<index>`` when they are long. act gives composite actions neither (*job_total* is
    empty): a short random part then keeps legs apart.
    """
    total = job_total.strip()
    if not total:
        return f"run-{secrets.token_hex(3)}"
    if total == "1":
        return ""
    try:
        values = _matrix_values(json.loads(matrix)) if matrix.strip() else []
    except ValueError:
        values = []
    name = artifact_name(*values) if values else ""
    if not values or name == "servelab" or len(name) > LEG_MAX:
        return f"leg-{job_index.strip() or '0'}"
    return name


@dataclass(frozen=True)
class ArtifactPlan:
    """What the action uploads: repeat directories in slots, the rest in one overflow artifact."""

    repeats: list[tuple[str, Path]] = field(default_factory=list)
    overflow: list[Path] = field(default_factory=list)
    overflow_name: str = ""
    summary_name: str = ""
    #: The files at the top of the results directory: summary.md, summary.json, SARIF.
    summary_paths: list[Path] = field(default_factory=list)


def repeat_dirs(results_dir: Path, arms: Sequence[str] = ()) -> list[tuple[str, int, Path]]:
    """``(arm, n, path)`` of each ``<arm>/repeat-<n>/``, ordered by repeat, then arm."""
    found: list[tuple[str, int, Path]] = []
    if not results_dir.is_dir():
        return found
    for arm_dir in results_dir.iterdir():
        if not arm_dir.is_dir():
            continue
        for rep in arm_dir.iterdir():
            m = _REPEAT_RE.match(rep.name)
            if m and rep.is_dir():
                found.append((arm_dir.name, int(m.group(1)), rep))
    order = {a: i for i, a in enumerate(arms)}
    found.sort(key=lambda t: (t[1], order.get(t[0], len(order)), t[0]))
    return found


def artifact_plan(
    results_dir: Path,
    *,
    prefix: str,
    job: str,
    arms: Sequence[str] = (),
    attempt: int = 1,
    slots: int = MAX_ARTIFACT_SLOTS,
    leg: str = "",
) -> ArtifactPlan:
    """Names unique across a workflow run: prefix, job, matrix leg (:func:`matrix_leg`), arm,
    repeat.

    A re-run (attempt > 1) adds ``-attempt-<k>``, since upload-artifact refuses a name already
    used in the run.
    """
    suffix = f"attempt-{attempt}" if attempt > 1 else ""
    seen: set[str] = set()
    named: list[tuple[str, Path]] = []
    for arm, n, path in repeat_dirs(results_dir, arms):
        name = artifact_name(prefix, job, leg, arm, f"repeat-{n}", suffix)
        base, k = name, 2
        while name in seen:
            name, k = f"{base}-{k}", k + 1
        seen.add(name)
        named.append((name, path))
    tops = sorted(p for p in results_dir.iterdir() if p.is_file()) if results_dir.is_dir() else []
    return ArtifactPlan(
        repeats=named[:slots],
        overflow=[p for _, p in named[slots:]],
        overflow_name=artifact_name(prefix, job, leg, "overflow", suffix),
        summary_name=artifact_name(prefix, job, leg, "summary", suffix),
        summary_paths=[p for p in tops if p.is_file()],
    )


def plan_outputs(plan: ArtifactPlan) -> dict[str, str]:
    """Outputs read by action.yml's upload steps (``artifact-name-<i>``, ``artifact-path-<i>``)."""
    out: dict[str, str] = {"artifact-count": str(len(plan.repeats))}
    for i, (name, path) in enumerate(plan.repeats, start=1):
        out[f"artifact-name-{i}"] = name
        out[f"artifact-path-{i}"] = str(path)
    out["summary-artifact-name"] = plan.summary_name if plan.summary_paths else ""
    out["summary-artifact-paths"] = "\n".join(str(p) for p in plan.summary_paths)
    out["overflow-count"] = str(len(plan.overflow))
    out["overflow-artifact-name"] = plan.overflow_name if plan.overflow else ""
    out["overflow-artifact-paths"] = "\n".join(str(p) for p in plan.overflow)
    names = [name for name, _ in plan.repeats]
    names += [n for n in (out["overflow-artifact-name"], out["summary-artifact-name"]) if n]
    out["artifact-names"] = "\n".join(names)
    return out
