"""The output of the smoke stage: one start, or ``servelab smoke``'s report of N starts.

API (no printing)::

    render_text(result)                    # one SmokeResult, human-readable
    render_starts(results, fmt, image=..., run_id=..., exit_code=..., swept=[...])
    starts_summary(results)                # first start vs later starts (the JSON "summary")
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

from servelab.escape import terminal_text
from servelab.smoke.result import SmokeResult

FORMATS = ("text", "json")


def starts_summary(results: Sequence[SmokeResult]) -> dict[str, Any]:
    """The first start apart from the later ones: ready times and every verdict."""
    later = [r.startup_s for r in results[1:] if r.startup_s is not None]
    return {
        "first_start_ready_s": results[0].startup_s,
        "later_starts_ready_s": later,
        "later_starts_ready_median_s": statistics.median(later) if later else None,
        "verdicts": [r.verdict for r in results],
    }


def _summary_text(s: dict[str, Any]) -> str:
    def f(x: float | None) -> str:
        return f"{x:.3f}s" if x is not None else "-"

    return (f"first start: ready in {f(s['first_start_ready_s'])}; later starts: median "
            f"{f(s['later_starts_ready_median_s'])} over {len(s['later_starts_ready_s'])}\n")


def render_starts(results: Sequence[SmokeResult], fmt: str, *, image: str, run_id: str,
                  exit_code: int, swept: Sequence[str] = ()) -> str:
    """``servelab smoke``'s report of one or more starts of *image*, as text or json."""
    if fmt == "json":
        doc = {"image": image, "run_id": run_id, "exit_code": exit_code,
               "starts": [r.to_dict() for r in results], "summary": starts_summary(results),
               "swept": list(swept)}
        return json.dumps(doc, indent=2) + "\n"
    text = "".join(render_text(r) for r in results)
    if len(results) > 1:
        text += _summary_text(starts_summary(results))
    return text + "".join(f"swept leftover: {x}\n" for x in swept)


def _ms(x: float | None, bound: bool = False) -> str:
    if x is None:
        return "-"
    return f"{'<= ' if bound else ''}{x * 1000:.1f} ms"


def render_text(res: SmokeResult) -> str:
    """A human-readable report of one smoke run."""
    head = "PASS" if res.passed else f"FAIL [{res.verdict}]"
    out = [f"smoke {res.image}: {head} {res.message}"]
    if res.cause:
        out.append(f"  likely cause: {res.cause.title}")
        if res.cause.evidence:
            out.append(f"    evidence: {res.cause.evidence}")
        out.append(f"    fix: {res.cause.fix}")
    for p in res.problems[1:]:
        out.append(f"  also [{p.id}]: {p.message}")
    if res.timeline is not None:
        d = res.timeline.to_dict()["durations"]
        notes = res.timeline.notes
        start = "first start after load" if res.first_start else "start"
        out.append(f"  timeline ({start}): created->started {_ms(d['start_call_s'])}, "
                   f"started->TCP accept "
                   f"{_ms(d['start_to_tcp_accept_s'], 'first_tcp_accept' in notes)}, "
                   f"started->health 2xx "
                   f"{_ms(d['start_to_ready_s'], 'first_health_2xx' in notes)}, "
                   f"started->first good request {_ms(d['start_to_first_good_request_s'])}")
    if res.requests is not None:
        lat = res.requests.to_dict()["latency_ms"]
        out.append(f"  requests: {res.requests.ok}/{res.requests.count} OK, "
                   f"p50 {lat['p50']} ms, p95 {lat['p95']} ms")
    out.append("  properties: " + ", ".join(f"{k}={v}" for k, v in res.properties.items()))
    if res.model is not None:
        out.append(f"  model: {res.model.source} -> {res.model.mount_target} (ro), sha256 "
                   f"{res.model.sha256 or 'not recorded'}")
    if res.weights is not None and res.weights.files:
        out.append(f"  baked weights: {len(res.weights.files)} file(s), "
                   f"{res.weights.total_bytes} bytes:")
        out += [f"    {w.path} ({w.size} B, layer {w.layer_index}: {w.created_by}; {w.reason})"
                for w in res.weights.files[:20]]
    st = res.container
    if st is not None and not res.passed:
        out.append(f"  container: status {st.status}, exit code {st.exit_code}, "
                   f"OOMKilled {st.oom_killed}")
        if st.log_tail:
            out.append("  last log lines:")
            out += [f"    | {line}" for line in st.log_tail[-20:]]
    out += [f"  note: {n}" for n in res.notes]
    if res.files.get("result"):
        out.append(f"  files: {res.files['result']}")
    # the server's log lines, paths and the image's names are the container's words: one line
    # each, behind servelab's own prefix, with no escape sequence
    return "\n".join(terminal_text(line) for line in out) + "\n"
