"""Merge runs from several machines (``servelab report``) and compare two runs
(``servelab compare``), both from result.json / summary.json files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servelab.escape import md_code, md_text
from servelab.run import aggregate, results
from servelab.run.aggregate import _get
from servelab.run.aggregate import fmt as _fmt


@dataclass
class Merged:
    data: dict[str, Any]
    markdown: str
    exit_code: int


#: the recorded inputs without which two builds cannot be known to be of the same thing
DECISIVE_INPUTS = ("dockerfile_sha256", "context_sha256")


def unknown_build_inputs(r: dict[str, Any]) -> list[str]:
    """The decisive inputs *r* did not record (a result of an older servelab, or one whose
    build never hashed its inputs): such a result is matched with no other."""
    i = r.get("inputs") or {}
    return [k for k in DECISIVE_INPUTS if not isinstance(i.get(k), str) or not i.get(k)]


def input_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """What must be equal for two builds to be expected to give the same digest."""
    i = r.get("inputs", {})
    return (r.get("arm"), _get(r, "experiment", "spec_hash"), i.get("dockerfile_sha256"),
            i.get("context_sha256"), tuple(sorted((i.get("build_args") or {}).items())),
            i.get("source_date_epoch"), i.get("commit"))


def _where(r: dict[str, Any], source: Path) -> str:
    run = r.get("run", {})
    return str(run.get("name") or run.get("machine") or source)


def merge_runs(paths: list[Path]) -> Merged:
    """Group the results of *paths* by their inputs (:func:`input_key`) and say whether each
    group gave one digest on every runner. A result without a digest (its build failed) is
    no digest: it never groups with another, and its group is "not comparable" (exit 2)
    unless another group already shows different digests (exit 1)."""
    rows: list[tuple[dict[str, Any], Path]] = []
    duplicates: list[str] = []
    for p in paths:
        got, notes = results.load_results_noted(p)
        rows += [(r, p) for r in got]
        duplicates += notes
    # a result whose decisive inputs are unknown gets a group of its own (keyed by its row):
    # an unknown is never equal to anything, another unknown included
    groups: dict[tuple[Any, ...], tuple[dict[str, set[str]], set[str], bool]] = {}
    for n, (r, p) in enumerate(rows):
        unknown = bool(unknown_build_inputs(r))
        key = (*input_key(r), n) if unknown else input_key(r)
        digests, missing, _ = groups.setdefault(key, ({}, set(), unknown))
        digest = _get(r, "image", "digest")
        if isinstance(digest, str) and digest:
            digests.setdefault(digest, set()).add(_where(r, p))
        else:
            missing.add(_where(r, p))
    table = [_group(key, *group) for key, group in groups.items()]
    verdicts = {g["verdict"] for g in table}
    # one group with two digests proves "not reproducible" whatever else is missing; "same"
    # needs every group to have a digest from every runner
    verdict = ("different digests" if "different digests" in verdicts
               else "not comparable" if "not comparable" in verdicts or not table
               else "same digest")
    data = {"schemaVersion": 1, "verdict": verdict,
            "cross_machine_reproducible": verdict == "same digest", "groups": table,
            "missing": [*(f"{g['arm']}: no digest from {', '.join(g['no_digest'])} "
                          "(the build failed or was skipped)" for g in table if g["no_digest"]),
                        *(_unknown_inputs_note(g) for g in table
                          if g["inputs_unknown"] and g["digests"])],
            "runners": sorted({_where(r, p) for r, p in rows}),
            "duplicates": duplicates,
            "results": [r for r, _ in rows]}
    return Merged(data, _merge_md(data), {"same digest": 0, "different digests": 1,
                                          "not comparable": 2}[verdict])


def _unknown_inputs_note(g: dict[str, Any]) -> str:
    where = ", ".join(w for ws in g["digests"].values() for w in ws)
    return (f"{g['arm']}: the build on {where} recorded no {' or '.join(DECISIVE_INPUTS)} "
            "(unknown inputs are never the same as another runner's)")


def _group(key: tuple[Any, ...], digests: dict[str, set[str]], missing: set[str],
           unknown: bool) -> dict[str, Any]:
    """One group of equal inputs: its digests, the runners that gave none, its verdict; a
    group of *unknown* inputs (one result that recorded none) is never "same digest"."""
    verdict = ("different digests" if len(digests) > 1
               else "not comparable" if missing or not digests or unknown else "same digest")
    return {"arm": key[0], "spec_hash": key[1], "commit": key[6], "source_date_epoch": key[5],
            "digests": {d: sorted(w) for d, w in digests.items()},
            "no_digest": sorted(missing), "verdict": verdict,
            "inputs_unknown": unknown,
            "same_digest_everywhere": verdict == "same digest"}


def _known(value: Any, width: int = 40) -> str:
    """A recorded value in a Markdown cell; "unknown" when it was not recorded."""
    return "unknown" if value is None else md_text(str(value)[:width])


def _value(value: float | None, unit: str) -> str:
    """A measured value; "unknown" when one side did not measure it."""
    return "unknown" if value is None else _fmt(value, unit)


_MERGE_HEAD = {"same digest": "same digest on every runner",
               "different digests": "**different digests for the same inputs**",
               "not comparable": "**not comparable**: a runner gave no digest, or its build's "
                                 "inputs are unknown"}


def _merge_md(data: dict[str, Any]) -> str:
    out = [f"# servelab report: {_MERGE_HEAD[data['verdict']]}", "",
           f"Runners: {', '.join(md_text(w) for w in data['runners'])}", ""]
    if data["missing"]:
        out += [*(f"- missing: {md_text(m)}" for m in data["missing"]), ""]
    out += _duplicates_md(data["duplicates"])
    out += ["| arm | commit | SOURCE_DATE_EPOCH | digest | runners |", "|---|---|---|---|---|"]
    for g in data["groups"]:
        head = f"| {md_text(g['arm'])} | {_known(g['commit'], 12)} | " \
               f"{_known(g['source_date_epoch'])} | "
        for digest, where in g["digests"].items():
            out.append(f"{head}{md_code(digest)} | {', '.join(map(md_text, where))} |")
        if g["no_digest"]:
            out.append(f"{head}unknown (no build) | "
                       f"{', '.join(map(md_text, g['no_digest']))} |")
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for r in data["results"]:
        by_arm.setdefault(r["arm"], []).append(r)
    out += ["", "| arm | metric | median | min | max | repeats |", "|---|---|---|---|---|---|"]
    for arm, rs in sorted(by_arm.items()):
        st = aggregate.arm_stats(arm, rs)
        for m in aggregate.ALL_METRICS:
            s = st.metrics.get(m.key)
            if s:
                out.append(f"| {md_text(arm)} | {m.label} | {_fmt(s.median, m.unit)} | "
                           f"{_fmt(s.min, m.unit)} | {_fmt(s.max, m.unit)} | {len(s.values)} |")
    return "\n".join(out) + "\n"


INPUT_FIELDS = ("dockerfile_sha256", "context_sha256", "model_sha256", "request_sha256",
                "commit", "source_date_epoch")


#: the arm whose digest decides compare's verdict
JUDGED_ARM = "treatment"


def _base_digests(r: dict[str, Any]) -> str | None:
    bases = sorted(str(b["digest"]) for b in (_get(r, "image", "base") or [])
                   if isinstance(b, dict) and b.get("digest"))
    return ", ".join(bases) or None


def _builder(r: dict[str, Any]) -> str | None:
    b = _get(r, "environment", "builder")
    if not isinstance(b, dict):
        return None
    return (f"{b.get('driver', '?')} buildx {b.get('buildx_version', '?')} "
            f"buildkit {b.get('buildkit_version', '?')}")


#: Every recorded input two runs are compared on, beside the hashes in ``inputs``: what an
#: equal digest depends on (base image, builder, engine) and what the scan depended on.
RECORDED: dict[str, Any] = {
    **{f: (lambda r, f=f: _get(r, "inputs", f)) for f in INPUT_FIELDS},
    "build_args": lambda r: _build_args(_get(r, "inputs", "build_args")),
    "base_digest": _base_digests,
    "builder": _builder,
    "engine": lambda r: _get(r, "environment", "engine", "version"),
    "servelab": lambda r: _get(r, "servelab", "version"),
    "trivy": lambda r: _get(r, "environment", "trivy", "version"),
    "trivy_db": lambda r: _get(r, "environment", "trivy", "db_updated_at"),
}


def _build_args(args: Any) -> str | None:
    """A result's build arguments as one value: "(none)" when it recorded that there were
    none (known, and equal to another run's none), None when it did not record them."""
    if not isinstance(args, dict):
        return None
    return ", ".join(f"{k}={v}" for k, v in sorted(args.items())) or "(none)"


#: The recorded inputs an image digest depends on; the others (model, request, scanner and
#: its DB) change what was measured of the image, not the image.
BUILD_INPUTS = frozenset({"dockerfile_sha256", "context_sha256", "commit", "source_date_epoch",
                          "build_args", "base_digest", "builder", "engine", "servelab"})


#: a recorded input's value when a result did not record it (``str(None)``, as history files
#: hold it): unknown, never equal to anything, itself included
UNKNOWN_VALUE = "None"


def recorded_inputs(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The distinct values of every recorded input over *rows* (one arm's results), sorted;
    ``compare`` and ``history`` say which of them differ between two runs. A result that did
    not record an input gives :data:`UNKNOWN_VALUE`."""
    return {name: sorted({str(get(r)) for r in rows}) for name, get in RECORDED.items()}


def is_unknown(values: list[str] | None) -> bool:
    """Whether an input's recorded values hold an unknown (or none at all)."""
    return not values or UNKNOWN_VALUE in values


def differing_inputs(a: dict[str, list[str]], b: dict[str, list[str]]) -> list[str]:
    """Names of the recorded inputs whose known values differ between *a* and *b* (a name
    missing from one side, as in an older record, or unknown on one side, is not a known
    difference: :func:`unknown_inputs` names those)."""
    return [k for k in RECORDED if k in a and k in b and not is_unknown(a[k])
            and not is_unknown(b[k]) and a[k] != b[k]]


def unknown_inputs(a: dict[str, list[str]], b: dict[str, list[str]]) -> list[str]:
    """Names of the recorded inputs that are unknown on either side: never the same."""
    return [k for k in RECORDED if is_unknown(a.get(k)) or is_unknown(b.get(k))]


def _by_arm(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The results indexed by arm, in one pass."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["arm"], []).append(r)
    return out


def compare_runs(a: Path, b: Path) -> Merged:
    """The arms of runs *a* and *b* side by side. Only what both measured is compared: the
    verdict needs the treatment's digest on both sides, else it is "not comparable" (exit 2)
    and ``missing`` says what is absent."""
    (la, na), (lb, nb) = results.load_results_noted(a), results.load_results_noted(b)
    ra, rb = _by_arm(la), _by_arm(lb)
    arms = sorted(set(ra) | set(rb))
    rows = [_compare_arm(arm, ra.get(arm, []), rb.get(arm, [])) for arm in arms]
    missing = [m for row in rows for m in row["missing"]]
    judged = next((row for row in rows if row["arm"] == JUDGED_ARM), None)
    if judged is None:
        missing.append(f"{JUDGED_ARM}: in neither run")
    if judged is None or not (judged["digests_a"] and judged["digests_b"]):
        verdict = "not comparable"
    else:
        verdict = "digest drift" if judged["digest_changed"] else "same digest"
    data = {"schemaVersion": 1, "a": str(a), "b": str(b), "verdict": verdict,
            "comparable": verdict != "not comparable", "drift": verdict == "digest drift",
            "missing": missing, "duplicates": [*na, *nb], "arms": rows}
    return Merged(data, _compare_md(data), {"same digest": 0, "digest drift": 1,
                                            "not comparable": 2}[verdict])


def _compare_arm(arm: str, ra: list[dict[str, Any]], rb: list[dict[str, Any]]) -> dict[str, Any]:
    sa, sb = aggregate.arm_stats(arm, ra), aggregate.arm_stats(arm, rb)
    da = sorted({d for d in sa.digests if d})
    db = sorted({d for d in sb.digests if d})
    metrics = []
    for m in aggregate.ALL_METRICS:
        x, y = sa.metrics.get(m.key), sb.metrics.get(m.key)
        if x or y:
            metrics.append({"metric": m.key, "label": m.label, "unit": m.unit,
                            "a": x.median if x else None, "b": y.median if y else None,
                            "change": y.median - x.median if x and y else None})
    ia, ib = recorded_inputs(ra), recorded_inputs(rb)
    unknown = set(unknown_inputs(ia, ib))
    inputs = {f: {"a": ia[f], "b": ib[f], "unknown": f in unknown,
                  "same": f not in unknown and ia[f] == ib[f]} for f in RECORDED}
    return {"arm": arm, "digests_a": da, "digests_b": db,
            "digest_changed": bool(da and db and da != db), "metrics": metrics,
            "inputs": inputs, "missing": _arm_missing(arm, (("A", ra, da), ("B", rb, db)), metrics)}


_Side = tuple[str, list[dict[str, Any]], list[str]]


def _arm_missing(arm: str, sides: tuple[_Side, _Side], metrics: list[dict[str, Any]]
                 ) -> list[str]:
    """What one side of *arm* lacks: the arm itself, any digest (nothing built), a metric."""
    out: list[str] = []
    for side, rows, digests in sides:
        if not rows:
            out.append(f"{arm}: not in {side}")
        elif not digests:
            out.append(f"{arm}: {side} built nothing (no digest in {len(rows)} result(s))")
    if all(rows for _, rows, _ in sides):
        out += [f"{arm}: {m['label']} not measured in {'A' if m['a'] is None else 'B'}"
                for m in metrics if m["change"] is None]
    return out


_COMPARE_HEAD = {"same digest": "same digest", "digest drift": "digest drift",
                 "not comparable": "**not comparable**"}


#: duplicate results named one by one in summary.md; the rest are counted
DUPLICATES_SHOWN = 20


def _duplicates_md(notes: list[str]) -> list[str]:
    """The results listed twice, each counted once: a note per result (the first
    DUPLICATES_SHOWN), then how many more."""
    if not notes:
        return []
    out = [f"Counted once ({len(notes)} result(s) listed twice):", "",
           *(f"- {md_text(n)}" for n in notes[:DUPLICATES_SHOWN])]
    if len(notes) > DUPLICATES_SHOWN:
        out.append(f"- and {len(notes) - DUPLICATES_SHOWN} more")
    return [*out, ""]


def _compare_md(data: dict[str, Any]) -> str:
    out = [f"# servelab compare: {_COMPARE_HEAD[data['verdict']]}", "",
           f"A: {md_code(data['a'])}  ", f"B: {md_code(data['b'])}", ""]
    if data["missing"]:
        out += ["Missing (not compared):", "",
                *(f"- {md_text(m)}" for m in data["missing"]), ""]
    out += _duplicates_md(data["duplicates"])
    for row in data["arms"]:
        out += [f"## {md_text(row['arm'])}", "", "| | A | B | B − A |", "|---|---|---|---|",
                f"| digest | {', '.join(map(md_code, row['digests_a'])) or 'unknown'} | "
                f"{', '.join(map(md_code, row['digests_b'])) or 'unknown'} | |"]
        for m in row["metrics"]:
            out.append(f"| {m['label']} | {_value(m['a'], m['unit'])} | "
                       f"{_value(m['b'], m['unit'])} | {_value(m['change'], m['unit'])} |")
        changed = [k for k, v in row["inputs"].items() if not v["same"] and not v["unknown"]]
        unknown = [k for k, v in row["inputs"].items() if v["unknown"]]
        out += ["", "Inputs that differ: " + (", ".join(changed) or "none")]
        if unknown:
            out += ["", "Inputs unknown (not recorded on a side, never counted as the same): "
                    + ", ".join(unknown)]
        out.append("")
    return "\n".join(out) + "\n"
