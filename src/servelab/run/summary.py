"""The run's summary: ``summary.json`` and ``summary.md`` (for GITHUB_STEP_SUMMARY).

Markdown rules: verdict first, then why (each arm's failed checks and rule ids with their
evidence, from :mod:`servelab.run.explain`); the control-vs-treatment table; a per-repeat
table; a Mermaid Gantt chart of each repeat's start-up timeline; findings folded in
``<details>``; no ANSI codes; at most 1 MiB (GitHub's cap on a step summary), cut with a note
when longer.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from servelab.escape import html_text, md_code, md_fence, md_prose, md_text
from servelab.run import intervals, lazyview
from servelab.run.aggregate import (
    ALL_METRICS,
    NUMERIC,
    SEVERITIES,
    ArmStats,
    Delta,
    MetricDef,
    Verdict,
    _get,
)
from servelab.run.aggregate import fmt as _fmt
from servelab.run.explain import FailedCheck, explain

#: the metrics of the control-vs-treatment table (the node's are in their own section)
CORE = tuple(m for m in NUMERIC if m.group == "core")

SUMMARY_LIMIT = 1024 * 1024
_EMOJI = {
    "improved": "✅", "passed": "✅", "no detectable change": "➖", "trade-off": "⚖️",
    "regressed": "❌", "failed": "❌", "not reproducible": "❌", "invalid": "⛔",
}


def _short(digest: str | None) -> str:
    return f"`{digest[:19]}…`" if digest else "unknown"  # a failed build: no digest


def _spread(a: ArmStats | None, m: MetricDef) -> str:
    """``median (min–max)`` of metric *m* of arm *a*, or a dash."""
    s = a.metrics.get(m.key) if a is not None else None
    if s is None:
        return "–"
    if s.min == s.max:
        return _fmt(s.median, m.unit)
    return f"{_fmt(s.median, m.unit)} ({_fmt(s.min, m.unit)}–{_fmt(s.max, m.unit)})"


def _signed(value: float, unit: str) -> str:
    return ("+" if value > 0 else "−" if value < 0 else "") + _fmt(abs(value), unit)


def _interval_cell(iv: intervals.Interval | None, unit: str) -> str:
    """``+0.300 s [+0.100 s, +0.500 s]``: the shift and its interval (a point shows once)."""
    if iv is None:
        return "–"
    if iv.low == iv.high:
        return _signed(iv.estimate, unit)
    return f"{_signed(iv.estimate, unit)} [{_signed(iv.low, unit)}, {_signed(iv.high, unit)}]"


def _reading_cell(d: Delta) -> str:
    reading = f"**{d.reading}**" if d.changed else d.reading
    if d.changed or d.detectable is None:
        return reading
    if d.detectable <= 0:
        return f"{reading}; could detect any change"
    return f"{reading}; could detect ≥ {_fmt(d.detectable, d.unit)}"


def _arms_table(control: ArmStats | None, treatment: ArmStats) -> list[str]:
    """The arms' reproducibility and failed checks: one row a property, one column an arm."""
    arms = [a for a in (control, treatment) if a is not None]

    def rep(a: ArmStats) -> str:
        word = {True: "yes", False: "**no**", None: "–"}[a.reproducible]
        return f"{word} ({len({d for d in a.digests if d})} distinct of {a.repeats})"

    return ["| | " + " | ".join(a.arm for a in arms) + " |", "|---" * (len(arms) + 1) + "|",
            "| reproducible digest | " + " | ".join(rep(a) for a in arms) + " |",
            "| failed checks | " + " | ".join(", ".join(f"`{c}`" for c in a.failed_checks)
                                             or "none" for a in arms) + " |", ""]


def _method_line(deltas: list[Delta], calibration: str | None) -> str:
    cov = sorted({intervals.coverage_label(d.interval.coverage) for d in deltas
                  if d.interval is not None and d.interval.low != d.interval.high})
    noise = (f"the noise the calibration file {md_code(calibration)} measured"
             if calibration else "half the larger min–max spread of the two arms (no "
             "calibration file: `servelab calibrate` measures this runner's noise)")
    return (f"Δ is treatment − control: the {intervals.METHOD}"
            + (f" ({', '.join(cov)} coverage, exact)" if cov else "")
            + f". Threshold: the metric's minimum effect, raised to {noise}. A metric changes "
            "only when its whole interval lies beyond the threshold; one whose interval spans "
            "the threshold is *inconclusive* and no verdict rests on it.")


def _comparison(control: ArmStats | None, treatment: ArmStats, deltas: list[Delta],
                calibration: str | None = None) -> list[str]:
    out = ["## Control vs treatment", "", *_arms_table(control, treatment)]
    if not deltas:
        out += ["| metric | " + treatment.arm + ", median (min–max) |", "|---|---|"]
        out += [f"| {m.label} | {_spread(treatment, m)} |" for m in CORE
                if m.key in treatment.metrics]
        return [*out, ""]
    out += ["| metric | control, median (min–max) | treatment | Δ [interval] | threshold | "
            "reading |", "|---|---|---|---|---|---|"]
    for d in deltas:
        m = _BY_KEY[d.metric]
        out.append(f"| {d.label} | {_spread(control, m)} | {_spread(treatment, m)} | "
                   f"{_interval_cell(d.interval, d.unit)} | {_fmt(d.threshold, d.unit)} | "
                   f"{_reading_cell(d)} |")
    out += ["", _method_line(deltas, calibration), ""]
    return out


#: the node's figures, a table a theme: metrics in rows, arms in columns
NODE_THEMES = (
    ("Bytes", ("pulled_cold", "pulled_warm_base", "pulled_holding_control", "model_bytes_read",
               "image_bytes_read")),
    ("Seconds", ("node_ready_cold", "node_ready_warm_base", "pull_cold_s", "unpack_cold_s",
                 "cpu_cold_s", "pull_warm_base_s", "unpack_warm_base_s")),
    ("Lazy pull", ("pull_lazy_s", "node_ready_lazy", "fetched_lazy", "read_lazy")),
)
_BY_KEY = {m.key: m for m in ALL_METRICS}


def _node_row(m: MetricDef, arms: list[ArmStats]) -> str:
    cells = [m.label, *(_spread(a, m) for a in arms)]
    if len(arms) == 2:
        c, t = (a.metrics.get(m.key) for a in arms)
        iv = intervals.shift_interval(c.values, t.values) if c and t else None
        cells.append(_interval_cell(iv, m.unit))
    return "| " + " | ".join(cells) + " |"


def _node_table(arms: list[ArmStats]) -> list[str]:
    out: list[str] = []
    for theme, keys in NODE_THEMES:
        rows = [_BY_KEY[k] for k in keys if any(k in a.metrics for a in arms)]
        if not rows:
            continue
        head = ["figure", *(f"{a.arm}, median (min–max)" for a in arms)]
        head += ["Δ [interval]"] if len(arms) == 2 else []
        out += [f"**{theme}**", "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        out += [_node_row(m, arms) for m in rows]
        out.append("")
    return out


def _loaded_line(a: ArmStats) -> str:
    """Time to ready on a node against the bytes it pulled plus the bytes it loaded."""
    def med(key: str) -> float | None:
        st = a.metrics.get(key)
        return st.median if st else None

    out = []
    for label, ready, pulled in (("base held", "node_ready_warm_base", "pulled_warm_base"),
                                 ("cold", "node_ready_cold", "pulled_cold")):
        r, p, m = med(ready), med(pulled), med("model_bytes_read")
        if r is None or p is None:
            continue
        total = p + (m or 0.0)
        out.append(f"{label}: ready {_fmt(r, 's')} after pulling {_fmt(p, 'bytes')} + "
                   f"loading {_fmt(m, 'bytes')} = {_fmt(total, 'bytes')}")
    return f"- **{a.arm}**: " + "; ".join(out) if out else ""


def _check_note(check: dict[str, Any]) -> str:
    """The cold pull's check in the per-repeat table: not cold, and the load before it."""
    out = " (**not cold**)" if check.get("cold") is False else ""
    load = check.get("load_1m")
    return out + (f" (load {load:.1f})" if isinstance(load, (int, float)) else "")


def _node_repeats(results: list[dict[str, Any]]) -> list[str]:
    out = ["| repeat | cold: pulled, pull, unpack | base held: pulled, present, pull, "
           "unpack | create + start call, start → ready | model read (source) |",
           "|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", ""))):
        cs = _get(r, "metrics", "coldstart")
        if not cs:
            continue
        c, w = cs.get("cold") or {}, cs.get("warm_base") or {}
        start = cs.get("start") or {}
        ml = _get(r, "metrics", "model_load") or {}
        create = sum(float(start.get(k) or 0.0) for k in ("create_s", "start_call_s"))
        out.append(" | ".join([
            f"| {r.get('arm')} r{r.get('repeat')}",
            f"{_fmt(c.get('bytes_pulled'), 'bytes')}, {_fmt(c.get('pull_s'), 's')}, "
            f"{_fmt(c.get('unpack_s'), 's')}"
            + _check_note(c.get("cold_check") or {}),
            f"{_fmt(w.get('bytes_pulled'), 'bytes')}, {_fmt(w.get('bytes_present'), 'bytes')}"
            f", {_fmt(w.get('pull_s'), 's')}, {_fmt(w.get('unpack_s'), 's')}",
            f"{_fmt(create, 's')}, {_fmt(start.get('start_to_ready_s'), 's')}",
            f"{_fmt(ml.get('bytes_read'), 'bytes')} ({ml.get('source') or '–'}) |"]))
    return out


_COLD_HOW = {
    "containerd pull (private instance)": "a fresh containerd of servelab's own per repeat "
    "(empty root, a private mount namespace, 3 parallel downloads, unpacking as it "
    "downloads), each pull checked cold",
    "servelab fetch + tar": "every layer fetched and unpacked by servelab into an empty "
    "directory",
}


def _cold_how(results: list[dict[str, Any]]) -> str:
    methods = sorted({str(_get(r, "metrics", "coldstart", "cold", "method")) for r in results
                      if _get(r, "metrics", "coldstart", "cold", "method")})
    how = "; ".join(_COLD_HOW.get(m, m) for m in methods) or "not measured"
    own = {str(_get(r, "metrics", "coldstart", "cold", "cold_check", "root_fs") or "")
           .startswith("an ext4 filesystem of its own") for r in results
           if _get(r, "metrics", "coldstart", "cold", "cold_check")}
    if own == {True}:
        how += (" (its root on a filesystem of its own, removed by unmount: no repeat pays "
                "for the previous one's clean-up)")
    return how


def _cold_checks(results: list[dict[str, Any]]) -> list[str]:
    """Why the cold pulls were not a private containerd's, and the repeats whose cold pull was
    not cold (left out of the cold figures)."""
    out = sorted({f"- cold pulls were servelab's own fetch, not a private containerd: "
                  f"{md_prose(why)}"
                  for r in results
                  for why in [_get(r, "metrics", "coldstart", "cold_runtime",
                                   "fallback_reason")] if why})
    for r in sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", ""))):
        chk = _get(r, "metrics", "coldstart", "cold", "cold_check") or {}
        if chk.get("cold") is False:
            why = md_prose("; ".join(chk.get("detail") or []) or "its check failed")
            out.append(f"- {r.get('arm')} r{r.get('repeat')}: the cold pull was **not cold** "
                       f"({why}); left out of the cold figures")
    return [*out, ""] if out else []


def _node_section(control: ArmStats | None, treatment: ArmStats,
                  results: list[dict[str, Any]]) -> list[str]:
    """The start-up cost as a node pays it (only when the run measured it)."""
    arms = [a for a in (control, treatment) if a is not None]
    if not any(_get(r, "metrics", "coldstart") for r in results):
        return []
    out = ["## Start-up cost on a node", "",
           "Bytes are exact (the registry's manifest); seconds are this machine's, over "
           f"loopback from the registry, not a WAN's. *Cold*: {_cold_how(results)}; *base "
           "held*: the engine's own pull with the "
           "base image's layers kept; *holding the control*: what a node running the control "
           "pulls to roll out this arm (computed from the layers). *Pull to ready*: pull + "
           "unpack + create + start → ready laid end to end. See docs/run.md for what these "
           "do and do not predict.", ""]
    out += _node_table(arms)
    out += [*_cold_checks(results)]
    out += [*(line for line in (_loaded_line(a) for a in arms) if line), ""]
    out += _lazy_lines(arms, results)
    out += ["<details><summary>Per repeat</summary>", "", *_node_repeats(results), "",
            *_read_lines(results), *_lazy_repeats(results), "</details>", ""]
    return out


def _read_lines(results: list[dict[str, Any]]) -> list[str]:
    """Per repeat: the cold start's runtime, and the bytes read before ready (full pull)."""
    out = []
    for r in sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", ""))):
        cs = _get(r, "metrics", "coldstart") or {}
        rb = cs.get("read_before_ready") or {}
        if not cs or not rb:
            continue
        top = ", ".join(f"{d['dir']} {_fmt(d['bytes'], 'bytes')}" for d in rb.get("top_dirs")
                        or [])
        out.append(f"- {r.get('arm')} r{r.get('repeat')}: {rb.get('line')}"
                   + (f" (most read: {top})" if top else ""))
    return [*out, ""] if out else []


def _lazy_lines(arms: list[ArmStats], results: list[dict[str, Any]]) -> list[str]:
    """The lazy pull per arm in words, and the repeats that fell back or were not measured."""
    lines = [x for x in (lazyview.arm_line(a, results) for a in arms) if x]
    if not lines:
        return []
    return ["**Lazy pulling (SOCI)**: medians of the repeats that really were lazy; bytes read "
            "are uncompressed bytes the FUSE mounts served on demand, against the compressed "
            "bytes a full pull fetches.", "", *lines, *lazyview.repeat_notes(results), ""]


def _lazy_repeats(results: list[dict[str, Any]]) -> list[str]:
    table = lazyview.repeat_table(results)
    return [*table, ""] if table else []


def _scanner_line(results: list[dict[str, Any]]) -> list[str]:
    t = next((_get(r, "environment", "trivy") for r in results
              if _get(r, "environment", "trivy")), None)
    if not t:
        return []
    where = f" from {md_text(t['db_repository'])}" if t.get("db_repository") else ""
    mode = ", offline" if t.get("offline") else ""
    return [f"**Scanner:** Trivy {md_text(t.get('version'))} · vulnerability DB updated "
            f"{md_text(t.get('db_updated_at'))}{where} ({md_code(t.get('db_path'), table=False)}"
            f"{mode})", ""]


def _per_repeat(results: list[dict[str, Any]]) -> list[str]:
    out = ["## Per repeat", "",
           "| repeat | digest, size | build | ready, first good request | "
           "latency p50 / p95 | findings C/H/M/L; failed checks |",
           "|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", ""))):
        m = r.get("metrics", {})
        f = m.get("findings") or {}
        lat = m.get("latency") or {}
        failed = [v["check"] for v in r.get("verdicts", []) if v.get("passed") is False]
        out.append(" | ".join([
            f"| {r.get('arm')} r{r.get('repeat')}",
            f"{_short(m.get('digest'))}, {_fmt(_get(m, 'size', 'compressed_bytes'), 'bytes')}",
            _fmt(m.get("build_seconds"), "s"),
            _fmt(_get(m, "startup", "ready_s"), "s")
            + (" (first start)" if _get(m, "startup", "first_start") else "")
            + f", {_fmt(_get(m, 'startup', 'first_request_s'), 's')}",
            f"{_fmt(lat.get('p50_ms'), 'ms')} / {_fmt(lat.get('p95_ms'), 'ms')}",
            ("/".join(str(f.get(s, "–")) for s in SEVERITIES[:4]) if f else "–") + "; "
            + (", ".join(f"`{c}`" for c in failed) or "none") + " |",
        ]))
    out.append("")
    return out


Bar = tuple[str, float | None, float | None]


def _start_bars(st: dict[str, Any], off: float) -> list[Bar]:
    """The start's phases from container start, shifted by *off* seconds."""
    def at(x: Any) -> float | None:
        return off + float(x) if isinstance(x, (int, float)) else None

    return [("start → first accept", off, at(st.get("first_accept_s"))),
            ("first accept → ready", at(st.get("first_accept_s")), at(st.get("ready_s"))),
            ("ready → first good request", at(st.get("ready_s")),
             at(st.get("first_request_s")))]


def _pull_bars(pull: dict[str, Any], start: dict[str, Any]) -> tuple[list[Bar], float] | None:
    """Pull, unpack and create + start call laid end to end; the offset of container start."""
    p, u = pull.get("pull_s"), pull.get("unpack_s")
    create = sum(float(start.get(k) or 0.0) for k in ("create_s", "start_call_s"))
    if not isinstance(p, (int, float)):
        return None
    u = float(u or 0.0)
    bars: list[Bar] = [("pull", 0.0, float(p)), ("unpack", float(p), p + u),
                       ("create + start call", p + u, p + u + create)]
    return bars, p + u + create


def _gantt_rows(r: dict[str, Any]) -> list[tuple[str, list[Bar]]]:
    name = f"{r.get('arm')} r{r.get('repeat')}"
    st = _get(r, "metrics", "startup") or {}
    cs = _get(r, "metrics", "coldstart") or {}
    rows: list[tuple[str, list[Bar]]] = []
    for key, label in (("warm_base", "base held"), ("cold", "cold")):
        got = _pull_bars(cs.get(key) or {}, cs.get("start") or {})
        if got is not None:
            rows.append((f"{name} {label}", got[0] + _start_bars(st, got[1])))
    lazy = lazyview.gantt_bars(r)
    if lazy:
        rows.append((f"{name} lazy", lazy))
    return rows or [(name, _start_bars(st, 0.0))]


def _gantt(results: list[dict[str, Any]]) -> list[str]:
    rows = []
    for r in sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", ""))):
        for section, points in _gantt_rows(r):
            bars = [(n, a, b) for n, a, b in points if a is not None and b is not None]
            if bars:
                rows.append((section, bars))
    if not rows:
        return []
    longest = max(b for _, bars in rows for _, _, b in bars)
    axis = "%S.%L" if longest < 60 else "%M:%S"
    pulled = any("pull" in [n for n, _, _ in bars] for _, bars in rows)
    what = ("Seconds from the start of the pull (with --cold-start-registry): pull, unpack, "
            "create and start laid end to end, then the start's own phases; \"base held\" is "
            "the engine's pull with the base's layers kept, \"cold\" the cold pull of every "
            "layer (its start phases are those of the same repeat's start), \"lazy\" the lazy "
            "pull (SOCI: snapshots prepared, files fetched as the server reads them) and, once "
            "the lazy node starts the server, its own start." if pulled else
            "Milliseconds from container start.")
    out = ["## Start-up timeline", "",
           f"{what} Build durations are in the table above. The first start after an image "
           "was loaded is marked in the per-repeat table.", "",
           "```mermaid", "gantt", "    title Start-up timeline per repeat",
           "    dateFormat x", f"    axisFormat {axis}"]
    for section, bars in rows:
        out.append(f"    section {section}")
        for name, a, b in bars:
            start, end = round(a * 1000), max(round(b * 1000), round(a * 1000) + 1)
            out.append(f"    {name} :{start}, {end}")
    out += ["```", ""]
    return out


def _reproducibility(rep: dict[str, Any]) -> list[str]:
    if not rep:
        return []
    out = ["## Reproducibility", ""]
    for arm, r in rep.items():
        out.append(f"- **{md_text(arm)}**: {md_prose(r.get('summary', ''))}")
        expl = r.get("explanation") or []
        if expl:
            out += ["", "  <details><summary>why the digests differ</summary>", ""]
            out += [f"  - {md_prose(line)}" for line in expl[:50]]
            out += ["", "  </details>"]
    out.append("")
    return out


#: vulnerability findings listed per image in summary.md; the rest are counted
FINDINGS_LISTED = 500


def _findings_details(results: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for r in results:
        scan = _get(r, "stages", "scan", "record") or {}
        listed = scan.get("findings") or []
        key = str(_get(r, "metrics", "digest"))
        if not listed or key in seen:
            continue
        seen.add(key)
        out += [f"<details><summary>Findings of {html_text(r.get('arm'))} "
                f"({html_text(key[:19])}): "
                f"{len(listed)}</summary>", "",
                "| severity | id | package | installed | fixed |", "|---|---|---|---|---|"]
        for f in listed[:FINDINGS_LISTED]:
            out.append(f"| {md_text(f.get('severity'))} | {md_text(f.get('id'))} | "
                       f"{md_text(f.get('package'))} | {md_text(f.get('installed'))} | "
                       f"{md_text(f.get('fixed') or '–')} |")
        if len(listed) > FINDINGS_LISTED:
            out += ["", f"**truncated: {len(listed) - FINDINGS_LISTED} more finding(s)** not "
                    "listed here (the most severe come first): see that repeat's scan.json"]
        out += ["", "</details>", ""]
    return out


def _place(c: FailedCheck) -> str:
    """`` at `file:line` `` with the file relative to the working directory when under it."""
    if not c.file:
        return ""
    path = Path(c.file)
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f" at `{path}{f':{c.line}' if c.line else ''}`"


def _failed_check(c: FailedCheck, repeats: int) -> list[str]:
    mark = "⚠️" if c.severity == "warning" else "❌"
    some = (f" (repeat{'s' if len(c.repeats) > 1 else ''} "
            f"{', '.join(map(str, c.repeats))} of {repeats})"
            if c.repeats and len(c.repeats) < repeats else "")
    name = f"lint `{c.rule}`" if c.stage == "lint" else f"`{c.name}`"
    # a lint finding quotes the Dockerfile (the PR's text): shown as text, not Markdown/HTML
    out = [f"- {mark} **{name}**{_place(c)}{some}: {md_prose(c.message)}"]
    out += [f"  - {md_prose(e)}" for e in c.evidence]
    if c.fix:
        out.append(f"  - fix: {md_prose(c.fix)}")
    return out


def _why(results: list[dict[str, Any]]) -> list[str]:
    """Per arm, the checks and rule ids that failed, with the evidence the stages measured."""
    arms = explain(results)
    if not arms:
        return []
    out = ["## Why", ""]
    for a in arms:
        if not a.failed:
            out += [f"**{a.arm}**: every check passed.", ""]
            continue
        ids = ", ".join(f"`{r}`" for r in a.ids)
        out += [f"**{a.arm}**: {len(a.failed)} failed check{'s' if len(a.failed) > 1 else ''}"
                f" ({ids})", ""]
        for c in a.failed:
            out += _failed_check(c, a.repeats)
        out.append("")
    return out


def _reason(text: str) -> list[str]:
    """One reason of the verdict as a list item: its first line as text, the lines after it
    (a build's log tail) quoted in a fence they cannot close."""
    first, _, rest = text.partition("\n")
    out = [f"- {md_prose(first)}"]
    if rest.strip():
        out += md_fence(rest.strip("\n"), indent=2)
    return out


def render_markdown(summary: dict[str, Any], control: ArmStats | None, treatment: ArmStats,
                    deltas: list[Delta], results: list[dict[str, Any]]) -> str:
    v = summary["verdict"]
    lines = [f"# servelab: {_EMOJI.get(v, '')} {v}", ""]
    lines += [line for r in summary.get("reasons", []) for line in _reason(str(r))]
    lines += ["", *_why(results)]
    exp = summary.get("experiment", {})
    lines += ["", f"**Change:** {md_text(exp.get('change', ''))}  ",
              f"**Repeats:** {summary.get('repeats')} · **Fixed:** "
              f"{', '.join(map(md_text, exp.get('fixed', [])))} · **Metrics:** "
              f"{', '.join(map(md_text, exp.get('metrics', [])))}", ""]
    lines += _scanner_line(results)
    for s in summary.get("skipped", []):
        lines.append(f"> stage **{md_text(s['stage'])}** skipped: {md_prose(s['reason'])}")
    for s in summary.get("not_tested", []):
        lines.append(f"> not tested: {md_prose(s)}")
    lines.append("")
    cal = summary.get("calibration") or {}
    lines += _comparison(control, treatment, deltas, cal.get("file"))
    lines += _node_section(control, treatment, results)
    lines += _per_repeat(results)
    lines += _reproducibility(summary.get("reproducibility") or {})
    lines += _gantt(results)
    lines += _findings_details(results)
    for note in summary.get("notes", []):
        lines.append(f"> {md_prose(note)}")
    text = "\n".join(lines) + "\n"
    return cap(text)


_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _open_blocks(markdown: str) -> tuple[int | None, int]:
    """(char offset of an unclosed code fence or None, number of unclosed <details>)."""
    fence: str | None = None
    fence_start: int | None = None
    details = 0
    offset = 0
    for line in markdown.splitlines(keepends=True):
        m = _FENCE_RE.match(line)
        marker = m.group(1) if m else ""
        if fence is None and marker:
            fence, fence_start = marker, offset
        elif fence is not None and marker[:1] == fence[0] and len(marker) >= len(fence):
            fence, fence_start = None, None
        elif fence is None:
            low = line.lower()
            details += low.count("<details") - low.count("</details>")
        offset += len(line)
    return fence_start, max(details, 0)


def truncate_markdown(markdown: str, limit: int, note: str) -> str:
    """*markdown* cut to at most *limit* UTF-8 bytes at a line end, with *note* appended.

    A code block (a Mermaid chart) cut in half is dropped whole; open ``<details>`` are closed.
    """
    if len(markdown.encode("utf-8")) <= limit:
        return markdown

    def tail(rows: int) -> str:  # the table rows cut off (findings, metrics) are counted
        more = f"; truncated: {rows} more table row(s) not shown" if rows else ""
        return f"\n\n> **Summary truncated** (GitHub keeps 1 MiB per step{more}): {note}\n"

    budget = limit - len(tail(0).encode("utf-8"))
    while budget > 0:
        cut = markdown.encode("utf-8")[:budget].decode("utf-8", errors="ignore")
        if "\n" in cut:
            cut = cut[: cut.rfind("\n") + 1]
        fence_start, details = _open_blocks(cut)
        if fence_start is not None:
            cut = cut[:fence_start]
            details = _open_blocks(cut)[1]
        closing = "</details>\n" * details
        rows = sum(1 for ln in markdown[len(cut):].split("\n")
                   if ln.startswith("|") and not ln.startswith("|---"))
        end = tail(rows)
        result = cut + closing + end
        if len(result.encode("utf-8")) <= limit:
            return result
        budget -= len(closing.encode("utf-8")) + len(end) - len(tail(0)) + 1
    return tail(0).encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def cap(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """*text* within GitHub's step-summary limit (see :func:`truncate_markdown`)."""
    return truncate_markdown(
        text, limit, "summary cut at 1 MiB (GitHub's step-summary limit); see summary.json")


def verdict_dict(v: Verdict) -> dict[str, Any]:
    return v.to_dict()
