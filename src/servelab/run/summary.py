"""The run's summary: ``summary.json`` and ``summary.md`` (for GITHUB_STEP_SUMMARY).

Markdown rules: verdict first; the control-vs-treatment table; a per-repeat table; a Mermaid
Gantt chart of each repeat's start-up timeline; findings folded in ``<details>``; no ANSI codes;
at most 1 MiB (GitHub's cap on a step summary), cut with a note when longer.
"""

from __future__ import annotations

import re
from typing import Any

from servelab.run.aggregate import (
    NUMERIC,
    SEVERITIES,
    ArmStats,
    Delta,
    Verdict,
    _get,
)

SUMMARY_LIMIT = 1024 * 1024
_EMOJI = {
    "improved": "✅", "passed": "✅", "no detectable change": "➖", "trade-off": "⚖️",
    "regressed": "❌", "failed": "❌", "not reproducible": "❌", "invalid": "⛔",
}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "bytes":
        for size, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(value) >= size:
                return f"{value / size:.2f} {name}"
        return f"{value:.0f} B"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.1f} ms"
    return f"{value:g}"


def _short(digest: str | None) -> str:
    return f"`{digest[:19]}…`" if digest else "–"


def _arm_row(label: str, a: ArmStats | None) -> str:
    if a is None:
        return ""
    rep = {True: "yes", False: "**no**", None: "–"}[a.reproducible]
    distinct = len({d for d in a.digests if d})
    cells = [label, f"{rep} ({distinct} distinct of {a.repeats})"]
    for m in NUMERIC:
        s = a.metrics.get(m.key)
        cells.append(
            "–" if s is None else f"{_fmt(s.median, m.unit)} ({_fmt(s.min, m.unit)}–"
            f"{_fmt(s.max, m.unit)})"
        )
    cells.append(", ".join(f"`{c}`" for c in a.failed_checks) or "none")
    return "| " + " | ".join(cells) + " |"


def _comparison(control: ArmStats | None, treatment: ArmStats, deltas: list[Delta]) -> list[str]:
    head = ["| arm | reproducible digest | "
            + " | ".join(f"{m.label}, median (min–max)" for m in NUMERIC)
            + " | failed checks |",
            "|" + "---|" * (len(NUMERIC) + 3)]
    rows = [r for r in (_arm_row("control", control), _arm_row("treatment", treatment)) if r]
    out = ["## Control vs treatment", "", *head, *rows, ""]
    if deltas:
        out += ["| metric | control | treatment | Δ | threshold | reading |",
                "|---|---|---|---|---|---|"]
        for d in deltas:
            reading = "no detectable change" if not d.changed else d.direction or ""
            out.append(
                f"| {d.label} | {_fmt(d.control, d.unit)} | {_fmt(d.treatment, d.unit)} | "
                f"{_fmt(d.delta, d.unit)} | {_fmt(d.threshold, d.unit)} | {reading} |"
            )
        out.append("")
    return out


def _scanner_line(results: list[dict[str, Any]]) -> list[str]:
    t = next((_get(r, "environment", "trivy") for r in results
              if _get(r, "environment", "trivy")), None)
    if not t:
        return []
    where = f" from {t['db_repository']}" if t.get("db_repository") else ""
    mode = ", offline" if t.get("offline") else ""
    return [f"**Scanner:** Trivy {t.get('version')} · vulnerability DB updated "
            f"{t.get('db_updated_at')}{where} (`{t.get('db_path')}`{mode})", ""]


def _per_repeat(results: list[dict[str, Any]]) -> list[str]:
    out = ["## Per repeat", "",
           "| arm | repeat | digest | size | build | ready | first good request | "
           "p50 / p95 | findings C/H/M/L | failed checks |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", ""))):
        m = r.get("metrics", {})
        f = m.get("findings") or {}
        lat = m.get("latency") or {}
        failed = [v["check"] for v in r.get("verdicts", []) if v.get("passed") is False]
        out.append(" | ".join([
            f"| {r.get('arm')}", str(r.get("repeat")), _short(m.get("digest")),
            _fmt(_get(m, "size", "compressed_bytes"), "bytes"),
            _fmt(m.get("build_seconds"), "s"),
            _fmt(_get(m, "startup", "ready_s"), "s")
            + (" (first start)" if _get(m, "startup", "first_start") else ""),
            _fmt(_get(m, "startup", "first_request_s"), "s"),
            f"{_fmt(lat.get('p50_ms'), 'ms')} / {_fmt(lat.get('p95_ms'), 'ms')}",
            "/".join(str(f.get(s, "–")) for s in SEVERITIES[:4]) if f else "–",
            (", ".join(f"`{c}`" for c in failed) or "none") + " |",
        ]))
    out.append("")
    return out


def _gantt(results: list[dict[str, Any]]) -> list[str]:
    rows = []
    for r in sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", ""))):
        st = _get(r, "metrics", "startup") or {}
        points = [("start → first accept", 0.0, st.get("first_accept_s")),
                  ("first accept → ready", st.get("first_accept_s"), st.get("ready_s")),
                  ("ready → first good request", st.get("ready_s"), st.get("first_request_s"))]
        bars = [(name, a, b) for name, a, b in points if a is not None and b is not None]
        if bars:
            rows.append((f"{r.get('arm')} r{r.get('repeat')}", bars))
    if not rows:
        return []
    longest = max(b for _, bars in rows for _, _, b in bars)
    axis = "%S.%L" if longest < 60 else "%M:%S"
    out = ["## Start-up timeline", "",
           "Milliseconds from container start; build durations are in the table above. The "
           "first start after an image was loaded is marked in the per-repeat table.", "",
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
        out.append(f"- **{arm}**: {r.get('summary', '')}")
        expl = r.get("explanation") or []
        if expl:
            out += ["", "  <details><summary>why the digests differ</summary>", ""]
            out += [f"  - {line}" for line in expl[:50]]
            out += ["", "  </details>"]
    out.append("")
    return out


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
        out += [f"<details><summary>Findings of {r.get('arm')} ({_short(key)}): "
                f"{len(listed)}</summary>", "",
                "| severity | id | package | installed | fixed |", "|---|---|---|---|---|"]
        for f in listed[:500]:
            out.append(f"| {f.get('severity')} | {f.get('id')} | {f.get('package')} | "
                       f"{f.get('installed')} | {f.get('fixed') or '–'} |")
        out += ["", "</details>", ""]
    return out


def render_markdown(summary: dict[str, Any], control: ArmStats | None, treatment: ArmStats,
                    deltas: list[Delta], results: list[dict[str, Any]]) -> str:
    v = summary["verdict"]
    lines = [f"# servelab: {_EMOJI.get(v, '')} {v}", ""]
    lines += [f"- {r}" for r in summary.get("reasons", [])]
    exp = summary.get("experiment", {})
    lines += ["", f"**Change:** {exp.get('change', '')}  ",
              f"**Repeats:** {summary.get('repeats')} · **Fixed:** "
              f"{', '.join(exp.get('fixed', []))} · **Metrics:** "
              f"{', '.join(exp.get('metrics', []))}", ""]
    lines += _scanner_line(results)
    for s in summary.get("skipped", []):
        lines.append(f"> stage **{s['stage']}** skipped: {s['reason']}")
    for s in summary.get("not_tested", []):
        lines.append(f"> not tested: {s}")
    lines.append("")
    lines += _comparison(control, treatment, deltas)
    lines += _per_repeat(results)
    lines += _reproducibility(summary.get("reproducibility") or {})
    lines += _gantt(results)
    lines += _findings_details(results)
    for note in summary.get("notes", []):
        lines.append(f"> {note}")
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
    tail = f"\n\n> **Summary truncated** (GitHub keeps 1 MiB per step): {note}\n"
    budget = limit - len(tail.encode("utf-8"))
    while budget > 0:
        cut = markdown.encode("utf-8")[:budget].decode("utf-8", errors="ignore")
        if "\n" in cut:
            cut = cut[: cut.rfind("\n") + 1]
        fence_start, details = _open_blocks(cut)
        if fence_start is not None:
            cut = cut[:fence_start]
            details = _open_blocks(cut)[1]
        closing = "</details>\n" * details
        result = cut + closing + tail
        if len(result.encode("utf-8")) <= limit:
            return result
        budget -= len(closing.encode("utf-8")) + 1
    return tail.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def cap(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """*text* within GitHub's step-summary limit (see :func:`truncate_markdown`)."""
    return truncate_markdown(
        text, limit, "summary cut at 1 MiB (GitHub's step-summary limit); see summary.json")


def verdict_dict(v: Verdict) -> dict[str, Any]:
    return v.to_dict()
