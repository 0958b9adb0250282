"""Synthetic result.json documents (made up, labelled so): assembled by servelab's own
``assemble`` with no stage run, for tests that fill in the figures a real run would leave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.run.outcomes import BuildOutcome, Inputs, RepeatResult, ScanOutcome, SmokeOutcome
from servelab.run.results import assemble
from servelab.spec import Arm


def skeleton_result(arm: str, repeat: int, *, machine: str = "m1",
                    repeats: int = 1) -> dict[str, Any]:
    """A result.json with every stage skipped ("synthetic") and no figures yet; its build
    inputs recorded (the Dockerfile's and context's hashes), as a real build records them."""
    skipped = "synthetic"
    rr = RepeatResult(arm=Arm(arm, Path(), Path("Dockerfile")), repeat=repeat,
                      build=BuildOutcome("skipped", skipped), scan=ScanOutcome("skipped", skipped),
                      smoke=SmokeOutcome("skipped", skipped))
    return assemble(rr, run={"id": "synthetic", "name": machine,
                             "started_at": "2026-11-30T00:00:00Z", "machine": machine},
                    experiment={"name": "x", "spec_hash": "sha256:" + "c" * 64, "change": "c",
                                "fixed": ["image"], "metrics": ["digest"], "repeats": repeats,
                                "spec": {}},
                    inputs=Inputs(build_args={}, git_ref=None,
                                  dockerfile_sha256="sha256:" + "d" * 64,
                                  context_sha256="sha256:" + "e" * 64), serve={})
