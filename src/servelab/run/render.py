"""What ``servelab run`` prints at the end (summary.md itself is :mod:`servelab.run.summary`),
and the trend of ``servelab history`` (text, Markdown with Mermaid charts, JSON)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.escape import log_block, md_cell, mermaid_text, terminal_text
from servelab.run.history import SET_ASIDE_SHOWN, series

if TYPE_CHECKING:
    from servelab.run.history import History, Row, Series

FORMATS = ("text", "json")


def render_end(summary: Mapping[str, Any], out_dir: Path, *, fmt: str = "text",
               kept: bool = False) -> str:
    """The run's closing report: summary.json without its results (json), or the verdict, its
    reasons, the kept images (when *kept*) and where the summary and artifacts are (text)."""
    if fmt == "json":
        return json.dumps({k: v for k, v in summary.items() if k != "results"},
                          indent=2, default=str) + "\n"
    lines = [f"verdict: {summary['verdict']}"]
    # a reason may quote a build's log tail: shown, never obeyed (escape sequences, controls)
    lines += [f"  - {log_block(reason)}".replace("\n", "\n    ")
              for reason in summary["reasons"]]
    if kept:
        refs = sorted({f"{r['arm']}: {r['image']['ref']}" for r in summary.get("results", [])
                       if r["image"].get("ref")})
        lines.append("kept images (the exact tested bytes):")
        lines += [f"  {k}" for k in refs]
    lines += [f"summary: {out_dir / 'summary.md'}", f"artifacts: {out_dir}/<arm>/repeat-<n>/"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ servelab history

HISTORY_FORMATS = ("text", "markdown", "json")
_SEVERITY_LETTERS = "CHMLU"


def render_history(h: History, fmt: str = "text") -> str:
    """The trend of ``servelab history``: text, Markdown (with Mermaid charts) or JSON."""
    if fmt == "json":
        return json.dumps(h.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
    if fmt == "markdown":
        return history_markdown(h)
    return _history_text(h)


#: a value a run did not record (a failed build has no digest): never shown as a dash or a
#: zero, never the same as anything
UNKNOWN = "unknown"
#: an arm the run did not have
NO_ARM = "–"


def _short_digests(arm: Mapping[str, Any] | None) -> str:
    if arm is None:
        return NO_ARM
    ds = arm["digests"]
    return ", ".join(d.removeprefix("sha256:")[:12] for d in ds) or UNKNOWN


def _repro(arm: Mapping[str, Any] | None) -> str:
    if arm is None:
        return NO_ARM
    return {True: "yes", False: "NO", None: UNKNOWN}[arm["reproducible"]]


def _mib(arm: Mapping[str, Any] | None) -> str:
    size = arm.get("size_bytes") if arm else None
    return f"{size / 1048576:.2f} MiB" if size is not None else UNKNOWN


def _startup(arm: Mapping[str, Any] | None) -> str:
    st = arm.get("startup_s") if arm else None
    if not st:
        return UNKNOWN
    return f"{st['median']:.3f} s ({st['min']:.3f}–{st['max']:.3f})"


def _sev(arm: Mapping[str, Any] | None) -> str:
    f = arm.get("findings") if arm else None
    if f is None:
        return UNKNOWN
    return "/".join(str(f.get(s, 0)) for s in ("CRITICAL", "HIGH", "MEDIUM", "LOW"))


def _plain(text: str) -> str:
    """Text from an input, on one line of the terminal: :func:`servelab.escape.terminal_text`
    (a value can neither start a new line, a workflow command in a CI log, nor reorder one)."""
    return terminal_text(text)


def _cells(row: Row) -> list[str]:
    e = row.entry
    c, t = e.arm("control"), e.arm("treatment")
    mark = "◆ " if row.changes else ""
    cells = [mark + e.started_at[:16].replace("T", " "), str(e.data.get("commit") or UNKNOWN)[:12],
             _short_digests(c), _short_digests(t), f"{_repro(c)} / {_repro(t)}", _mib(t),
             _startup(t), _sev(t), str(e.data["verdict"])[:80]]
    return [_plain(x) for x in cells]


HEADERS = ["date (UTC)", "commit", "control digest", "treatment digest",
           "reproducible c/t", "size", "start-up median (min–max)", "findings C/H/M/L",
           "verdict"]


def _change_lines(h: History) -> list[str]:
    out = []
    for r in h.rows:
        for c in r.changes:
            before = ", ".join(d[:19] for d in c.before) or UNKNOWN
            after = ", ".join(d[:19] for d in c.after) or UNKNOWN
            out.append(f"{r.entry.started_at[:16].replace('T', ' ')} {c.arm}: digest "
                       f"{before} -> {after}: {c.reading}")
    return out


def _set_aside(h: History) -> list[str]:
    others: dict[str, list[str]] = {}
    for e in h.others:
        others.setdefault(e.experiment, []).append(e.started_at[:16].replace("T", " "))
    out = [f"other experiment {name!r} (not in this trend): {len(d)} run(s), "
           f"{min(d)} to {max(d)}" for name, d in others.items()]
    out += [f"duplicate: {d.source}: {d.reason}" for d in h.duplicates[:SET_ASIDE_SHOWN]]
    if len(h.duplicates) > SET_ASIDE_SHOWN:
        out.append(f"duplicate: {len(h.duplicates) - SET_ASIDE_SHOWN} more run(s) read twice, "
                   f"counted once (the first {SET_ASIDE_SHOWN} are named above)")
    out += [f"skipped: {s.source}: {s.reason}" for s in h.skipped[:SET_ASIDE_SHOWN]]
    if len(h.skipped) > SET_ASIDE_SHOWN:
        out.append(f"skipped: {len(h.skipped) - SET_ASIDE_SHOWN} more file(s) or line(s) not "
                   f"used (the first {SET_ASIDE_SHOWN} are named above)")
    return [_plain(x) for x in out]


def _history_text(h: History) -> str:
    rows = [HEADERS] + [_cells(r) for r in h.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = [f"history of experiment {h.experiment!r}: {len(h.rows)} run(s), newest first"
             " (◆ = a digest changed)"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    changes = _change_lines(h)
    lines += ["digest changes:", *(f"  {c}" for c in changes)] if changes else \
        ["digest changes: none"]
    lines += _set_aside(h)
    return "\n".join(lines) + "\n"


def history_markdown(h: History) -> str:
    """The trend as GitHub Markdown: table, digest changes, charts, what was set aside."""
    out = [f"## servelab history: {md_cell(str(h.experiment))}", "",
           f"{len(h.rows)} run(s), newest first. ◆ marks the first run of a new digest.", "",
           "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(md_cell(c) for c in _cells(r)) + " |" for r in h.rows]
    changes = _change_lines(h)
    out += ["", "### Digest changes", ""]
    out += [f"- {md_cell(c)}" for c in changes] or ["- none"]
    out.append("")
    for s in series(h):
        out += mermaid_chart(s)
    aside = _set_aside(h)
    if aside:
        out += ["### Set aside", "", *(f"- {md_cell(a)}" for a in aside), ""]
    return "\n".join(out) + "\n"


def _nice_max(top: float) -> float:
    if top <= 0:
        return 1.0
    step = 10 ** math.floor(math.log10(top))
    return float(math.ceil(top * 1.1 / step) * step)


def mermaid_chart(s: Series) -> list[str]:
    """One ``xychart-beta`` block of one series (the chart has no legend); runs without a
    value are not on the x-axis. A note instead of a chart when no run has a value."""
    if not s.points:
        return [f"*{s.title}: no run recorded it.*", ""]
    xs = ", ".join(f'"{mermaid_text(label)}"' for label, _ in s.points)
    ys = ", ".join(f"{v:.6g}" for _, v in s.points)
    top = _nice_max(max(v for _, v in s.points))
    kind = "line" if len(s.points) > 1 else "bar"
    note = (f"*{s.missing} run(s) without a value are left off the x-axis.*"
            if s.missing else "")
    return ["```mermaid",
            '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#0969da"}}}}%%',
            "xychart-beta", f'    title "{mermaid_text(s.title)} ({s.unit})"',
            f"    x-axis [{xs}]", f'    y-axis "{s.unit}" 0 --> {top:g}', f"    {kind} [{ys}]",
            "```", *([note] if note else []), ""]
