"""run/render.py: what servelab run prints at the end."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.run.render import render_end

SUMMARY = {
    "verdict": "improved", "reasons": ["8 MiB smaller", "lint passes"],
    "results": [{"arm": "treatment", "image": {"ref": "servelab/x/treatment@sha256:" + "a" * 64}},
                {"arm": "control", "image": {}}],
}


def test_text_names_verdict_reasons_and_where() -> None:
    text = render_end(SUMMARY, Path("/o"))
    assert text.splitlines()[:3] == ["verdict: improved", "  - 8 MiB smaller", "  - lint passes"]
    assert "summary: /o/summary.md" in text and "kept images" not in text


def test_kept_lists_only_arms_with_a_ref() -> None:
    text = render_end(SUMMARY, Path("/o"), kept=True)
    assert "  treatment: servelab/x/treatment@sha256:" + "a" * 64 in text
    assert "control:" not in text


def test_json_drops_results() -> None:
    data = json.loads(render_end(SUMMARY, Path("/o"), fmt="json"))
    assert data == {"verdict": "improved", "reasons": ["8 MiB smaller", "lint passes"]}
