"""The output of the image tools: ``servelab diff`` (a DiffResult) and ``servelab pin``.

API (no printing)::

    render_diff(result, fmt)   # text, markdown or json
    render_pin(report, fmt)    # any findings format (servelab.report), a note per pinned line
"""

from __future__ import annotations

import json
from collections.abc import Callable

from servelab.image.diff import VERDICT_TEXT, DiffResult
from servelab.image.pin import PinReport
from servelab.report import get_reporter

DIFF_FORMATS = ("text", "markdown", "json")

# ---------------------------------------------------------------------------- diff


def diff_text(r: DiffResult) -> str:
    """What differs, as lines for a terminal."""
    out = [f"A: {r.a}", f"   manifest {r.a_manifest}", f"B: {r.b}",
           f"   manifest {r.b_manifest}", f"platform: {r.platform}",
           f"verdict: {r.verdict} ({VERDICT_TEXT[r.verdict]})"]
    if r.layers:
        opened = sum(1 for x in r.layers if x.opened)
        differ = sum(1 for x in r.layers if x.status != "same")
        out.append(f"layers: {len(r.layers)} compared, {differ} differ, {opened} opened")
    roots = [c for c in r.visible() if c.kind != "derived"]
    if roots:
        out.append("differences:")
        out += [f"  [{c.kind}] {c.category}: {c.describe()}" for c in roots]
    for c in r.visible():
        if c.kind == "derived":
            out.append(f"  [derived] {c.subject} digest: {c.a} -> {c.b}")
    if r.omitted:
        out.append(f"  ... {r.omitted} more file changes not listed (raise --max-entries)")
    if r.ignore_timestamps and r.verdict == "timestamps-only":
        out.append("timestamp differences hidden (--ignore-timestamps)")
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def diff_markdown(r: DiffResult) -> str:
    """What differs, as a Markdown section."""
    out = ["### servelab diff", "", f"**Verdict:** {VERDICT_TEXT[r.verdict]}", "",
           f"- A: `{r.a}` (`{r.a_manifest}`)", f"- B: `{r.b}` (`{r.b_manifest}`)", ""]
    rows = [c for c in r.visible() if c.kind != "derived"]
    if rows:
        out += ["| Kind | Where | What |", "|---|---|---|"]
        out += [f"| {c.kind} | `{_md(c.subject)}` | {_md(c.describe())} |" for c in rows]
    if r.omitted:
        out += ["", f"> {r.omitted} more file changes not listed"]
    return "\n".join(out) + "\n"


def render_diff(r: DiffResult, fmt: str) -> str:
    """*r* as text, json or markdown."""
    renderers: dict[str, Callable[[DiffResult], str]] = {
        "text": diff_text,
        "markdown": diff_markdown,
        "json": lambda x: json.dumps(x.to_dict(), indent=2, ensure_ascii=False) + "\n",
    }
    return renderers[fmt](r)


# ---------------------------------------------------------------------------- pin


def render_pin(report: PinReport, fmt: str) -> str:
    """``servelab pin``'s findings in *fmt* (text, json, markdown, sarif, github), with a note
    for each FROM pinned, or one saying every base was already pinned."""
    notes = [f"pinned line {p['line']}: {p['from']} -> {p['to']}" for p in report.pinned]
    if not report.pinned and not report.findings.findings:
        notes.append("every base is pinned by digest")
    findings = report.findings.copy(notes=[*report.findings.notes, *notes])
    return get_reporter(fmt).render(findings)
