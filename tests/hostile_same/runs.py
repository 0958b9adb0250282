"""Synthetic run directories (made up, labelled so): result.json files assembled by servelab
with no stage run, then the figures filled in, as a run on another machine would leave them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.run.outcomes import BuildOutcome, Inputs, RepeatResult, ScanOutcome, SmokeOutcome
from servelab.run.results import assemble, write_json
from servelab.spec import Arm

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def result(arm: str, repeat: int, digest: str | None, machine: str = "m1") -> dict[str, Any]:
    """One result.json; *digest* None is a build that failed (no image)."""
    skipped = "synthetic"
    rr = RepeatResult(arm=Arm(arm, Path(), Path("Dockerfile")), repeat=repeat,
                      build=BuildOutcome("skipped", skipped), scan=ScanOutcome("skipped", skipped),
                      smoke=SmokeOutcome("skipped", skipped))
    r = assemble(rr, run={"id": "synthetic", "name": machine,
                          "started_at": "2026-11-30T00:00:00Z", "machine": machine},
                 experiment={"name": "x", "spec_hash": "sha256:" + "c" * 64, "change": "c",
                             "fixed": ["image"], "metrics": ["digest"], "repeats": 1,
                             "spec": {}},
                 inputs=Inputs(build_args={}, git_ref=None), serve={})
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
