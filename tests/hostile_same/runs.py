"""Synthetic run directories (made up, labelled so): result.json files assembled by servelab
with no stage run, then the figures filled in, as a run on another machine would leave them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.run.results import write_json
from synthetic import skeleton_result

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def result(arm: str, repeat: int, digest: str | None, machine: str = "m1") -> dict[str, Any]:
    """One result.json; *digest* None is a build that failed (no image)."""
    r = skeleton_result(arm, repeat, machine=machine)
    if digest is not None:
        r["image"].update({"ref": f"img@{digest}", "digest": digest})
        r["metrics"]["digest"] = digest
        r["metrics"]["size"] = {"compressed_bytes": 1000, "uncompressed_bytes": 2000}
    return r


def write_run(root: Path, rows: list[dict[str, Any]]) -> Path:
    """*rows* as ``ROOT/<arm>/repeat-<n>/result.json``; returns *root*."""
    for r in rows:
        write_json(root / r["arm"] / f"repeat-{r['repeat']}" / "result.json", r)
    return root
