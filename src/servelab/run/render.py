"""What ``servelab run`` prints at the end (summary.md itself is :mod:`servelab.run.summary`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FORMATS = ("text", "json")


def render_end(summary: Mapping[str, Any], out_dir: Path, *, fmt: str = "text",
               kept: bool = False) -> str:
    """The run's closing report: summary.json without its results (json), or the verdict, its
    reasons, the kept images (when *kept*) and where the summary and artifacts are (text)."""
    if fmt == "json":
        return json.dumps({k: v for k, v in summary.items() if k != "results"},
                          indent=2, default=str) + "\n"
    lines = [f"verdict: {summary['verdict']}"]
    lines += [f"  - {reason}" for reason in summary["reasons"]]
    if kept:
        refs = sorted({f"{r['arm']}: {r['image']['ref']}" for r in summary.get("results", [])
                       if r["image"].get("ref")})
        lines.append("kept images (the exact tested bytes):")
        lines += [f"  {k}" for k in refs]
    lines += [f"summary: {out_dir / 'summary.md'}", f"artifacts: {out_dir}/<arm>/repeat-<n>/"]
    return "\n".join(lines) + "\n"
