"""A small, self-contained SVG of the history's charts (one panel per series): no script, no
external font or stylesheet, every text escaped; for the run's artifacts, where Mermaid is
not rendered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab.escape import xml_text

if TYPE_CHECKING:
    from servelab.run.history import Series

WIDTH, PANEL, LEFT, RIGHT, TOP, BOTTOM = 760, 230, 70, 20, 34, 56
COLOR = "#0969da"


def _num(v: float) -> str:
    return f"{v:.4g}"


def _panel(s: Series, y0: int) -> list[str]:
    out = [f'<text x="{LEFT}" y="{y0 + 20}" font-size="14" font-weight="bold">'
           f"{xml_text(s.title)} ({xml_text(s.unit)})</text>"]
    x1, x2 = LEFT, WIDTH - RIGHT
    top, bottom = y0 + TOP, y0 + PANEL - BOTTOM
    out += [f'<line x1="{x1}" y1="{bottom}" x2="{x2}" y2="{bottom}" stroke="#444"/>',
            f'<line x1="{x1}" y1="{top}" x2="{x1}" y2="{bottom}" stroke="#444"/>']
    if not s.points:
        return [*out, f'<text x="{x1 + 10}" y="{(top + bottom) // 2}" font-size="12">'
                "no run recorded it</text>"]
    high = max(v for _, v in s.points) or 1.0
    step = (x2 - x1 - 40) / max(len(s.points) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return x1 + 20 + i * step, bottom - (v / (high * 1.1)) * (bottom - top)

    pts = [xy(i, v) for i, (_, v) in enumerate(s.points)]
    out += [f'<text x="{x1 - 6}" y="{bottom}" font-size="11" text-anchor="end">0</text>',
            f'<text x="{x1 - 6}" y="{xy(0, high)[1] + 4:.1f}" font-size="11" '
            f'text-anchor="end">{_num(high)}</text>']
    if len(pts) > 1:
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{COLOR}" stroke-width="2" points="{line}"/>')
    every = max(1, len(pts) // 12)  # at most about 12 labels under the axis
    for i, ((label, v), (x, y)) in enumerate(zip(s.points, pts, strict=True)):
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{COLOR}">'
                   f"<title>{xml_text(label)}: {_num(v)} {xml_text(s.unit)}</title></circle>")
        if i % every == 0 or i == len(pts) - 1:
            out.append(f'<text x="{x:.1f}" y="{bottom + 16}" font-size="10" '
                       f'text-anchor="end" transform="rotate(-30 {x:.1f} {bottom + 16})">'
                       f"{xml_text(label)}</text>")
    if s.missing:
        out.append(f'<text x="{x2}" y="{y0 + 20}" font-size="11" text-anchor="end">'
                   f"{s.missing} run(s) without a value left out</text>")
    return out


def history_svg(title: str, charts: list[Series]) -> str:
    """The SVG document: a title, then one panel per series, stacked."""
    height = 40 + PANEL * len(charts)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">',
           f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="{LEFT}" y="26" font-size="16" font-weight="bold">{xml_text(title)}</text>']
    for i, s in enumerate(charts):
        out += _panel(s, 40 + i * PANEL)
    out.append("</svg>")
    return "\n".join(out) + "\n"
