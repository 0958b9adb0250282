"""The lazy pull (``--lazy soci``) in the run's outputs: each repeat's state (lazy, fell back,
not measured) for summary.json, the per-arm lines and per-repeat table of summary.md, and its
Gantt rows.

A repeat's lazy figures count only when its record says ``lazy: true`` (the aggregation's
``_lazy`` extractors): a silent fallback to a full pull and a pull not measured are shown as
such, with their reason, never as a figure.
"""

from __future__ import annotations

from typing import Any

from servelab.run.aggregate import ArmStats, _get

LAZY = "lazy"
FELL_BACK = "fell back"
NOT_MEASURED = "not measured"
_FALLBACK_NOTE = "silent fallback to a full pull: "
_NOT_MEASURED_NOTE = "lazy not measured: "

Bar = tuple[str, float | None, float | None]


def _mb(n: float | None) -> str:
    """Decimal units (``66.6 MB``), as registries count them; small counts in kB or bytes."""
    if n is None:
        return "–"
    for size, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(n) >= size:
            return f"{n / size:.{2 if unit == 'GB' else 1}f} {unit}"
    return f"{n:.0f} B"


def _s(x: Any) -> str:
    return f"{float(x):.3f} s" if isinstance(x, (int, float)) else "–"


def _pct(part: float | None, whole: float | None) -> str:
    return f" ({100 * part / whole:.0f}%)" if part is not None and whole else ""


def lazy_record(r: dict[str, Any]) -> dict[str, Any] | None:
    rec = _get(r, "metrics", "coldstart", "lazy")
    return rec if isinstance(rec, dict) else None


def state(rec: dict[str, Any]) -> tuple[str, str | None]:
    """(lazy | fell back | not measured, the reason from the record's notes)."""
    notes = [str(n) for n in rec.get("notes") or []]
    if rec.get("lazy") is True:
        return LAZY, None
    if rec.get("fell_back") is True:
        why = next((n[len(_FALLBACK_NOTE):] for n in notes if n.startswith(_FALLBACK_NOTE)),
                   "see the record's notes")
        return FELL_BACK, why
    why = next((n[len(_NOT_MEASURED_NOTE):] for n in notes if n.startswith(_NOT_MEASURED_NOTE)),
               "; ".join(notes) or "no reason recorded")
    return NOT_MEASURED, why


def _order(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(results, key=lambda r: (r.get("repeat", 0), r.get("arm", "")))


def status(results: list[dict[str, Any]]) -> dict[str, Any] | None:
    """summary.json's ``lazy``: per arm, each repeat's state and reason, and how many were
    lazy (the repeats the lazy medians come from). None when no repeat asked for it."""
    out: dict[str, Any] = {}
    for r in _order(results):
        rec = lazy_record(r)
        if rec is None:
            continue
        st, why = state(rec)
        arm = out.setdefault(str(r.get("arm")), {"lazy_repeats": 0, "repeats": []})
        arm["lazy_repeats"] += st == LAZY
        arm["repeats"].append({"repeat": r.get("repeat"), "state": st, "reason": why,
                               "started": bool(rec.get("start"))})
    return out or None


def _median(a: ArmStats, key: str) -> float | None:
    st = a.metrics.get(key)
    return st.median if st else None


def _image_bytes(results: list[dict[str, Any]], arm: str) -> float | None:
    sizes = [_get(r, "metrics", "coldstart", "image_bytes") for r in results
             if r.get("arm") == arm]
    return next((float(x) for x in sizes if isinstance(x, (int, float))), None)


def arm_line(a: ArmStats, results: list[dict[str, Any]]) -> str:
    """One arm's lazy figures in words (medians of its lazy repeats), or why there are none:
    "pulled 66.6 MB full; lazy fetched 33.2 MB (50%), read 15.1 MB (23%) before ready"."""
    mine = [r for r in results if r.get("arm") == a.arm and lazy_record(r) is not None]
    if not mine:
        return ""
    states = [state(lazy_record(r) or {}) for r in mine]
    lazy_n = sum(1 for s, _ in states if s == LAZY)
    if lazy_n == 0:
        whys = sorted({f"{s}: {why}" for s, why in states})
        return f"- **{a.arm}**: no lazy figure ({'; '.join(whys)})"
    full = _image_bytes(results, a.arm)
    fetched, read = _median(a, "fetched_lazy"), _median(a, "read_lazy")
    ready = _median(a, "node_ready_lazy")
    when = ("before ready" if ready is not None else "by the end of the pull (the server was "
            "not started on the lazy node)")
    out = (f"- **{a.arm}**: pulled {_mb(full)} full; lazy fetched {_mb(fetched)}"
           f"{_pct(fetched, full)}, read {_mb(read)}{_pct(read, full)} {when}; lazy pull "
           f"{_s(_median(a, 'pull_lazy_s'))}, pull to ready "
           + (f"{_s(ready)} (cold: {_s(_median(a, 'node_ready_cold'))})" if ready is not None
              else "not measured: no start on the lazy node"))
    return out + f" ({lazy_n} of {len(mine)} repeats lazy)"


def repeat_notes(results: list[dict[str, Any]]) -> list[str]:
    """The repeats whose lazy pull fell back or was not measured, with why."""
    out = []
    for r in _order(results):
        rec = lazy_record(r)
        if rec is None:
            continue
        st, why = state(rec)
        if st == FELL_BACK:
            out.append(f"- {r.get('arm')} r{r.get('repeat')}: the lazy pull **fell back to a "
                       f"full pull** ({why}); left out of the lazy figures")
        elif st == NOT_MEASURED:
            out.append(f"- {r.get('arm')} r{r.get('repeat')}: lazy **not measured**: {why}")
    return out


def repeat_table(results: list[dict[str, Any]]) -> list[str]:
    """Per repeat: state, lazy pull, bytes fetched (layers in parts / whole, the rest), bytes
    read on demand, pull to ready on the lazy node."""
    rows = [(r, rec) for r in _order(results) if (rec := lazy_record(r)) is not None]
    if not rows:
        return []
    out = ["| repeat | lazy pull | state | fetched: layers in parts (requests), whole, "
           "other | read on demand | pull to ready |", "|---|---|---|---|---|---|"]
    for r, rec in rows:
        st, _why = state(rec)
        f = rec.get("bytes_fetched") or {}
        read = _get(rec, "bytes_read", "synchronous_bytes_served")
        fetched = (f"{_mb(f.get('layers_partial'))} ({f.get('partial_requests', 0)}), "
                   f"{_mb(f.get('layers_full'))}, {_mb(f.get('other'))}" if f else "–")
        out.append(f"| {r.get('arm')} r{r.get('repeat')} | "
                   f"{_s(rec.get('pull_s')) if st == LAZY else st} | {st} | {fetched} | "
                   f"{_mb(read) if isinstance(read, (int, float)) else '–'} | "
                   f"{_s(_get(r, 'metrics', 'coldstart', 'to_ready_s', 'lazy'))} |")
    return out


def gantt_bars(r: dict[str, Any]) -> list[Bar]:
    """The lazy node's row of the start-up timeline: the lazy pull, then (once the lazy node
    has its start) create + start call and the start's phases. Nothing for a repeat whose
    pull was not lazy: a fallback is not drawn as a lazy figure."""
    rec = lazy_record(r)
    if rec is None or state(rec)[0] != LAZY or not isinstance(rec.get("pull_s"), (int, float)):
        return []
    p = float(rec["pull_s"])
    bars: list[Bar] = [("lazy pull", 0.0, p)]
    st = rec.get("start") or {}
    if not st:
        return bars
    off = p + sum(float(st.get(k) or 0.0) for k in ("create_s", "start_call_s"))
    bars.append(("create + start call", p, off))

    def at(key: str) -> float | None:
        x = st.get(key)
        return off + float(x) if isinstance(x, (int, float)) else None

    accept, ready = at("start_to_tcp_accept_s"), at("start_to_ready_s")
    return [*bars, ("start → first accept", off, accept),
            ("first accept → ready", accept, ready),
            ("ready → first good request", ready, at("start_to_first_good_request_s"))]
