"""The cold figures' defaults: on an ephemeral GitHub-hosted runner the global page-cache
drop is on by default and the summary's notes say so; elsewhere it stays opt-in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.run.options import RunOptions
from servelab.run.stages import _ephemeral_drop


@pytest.mark.skipif(os.geteuid() != 0, reason="the drop needs root; servelab says so")
@pytest.mark.parametrize(("env", "registry", "dropped"), [
    ("github-hosted", "127.0.0.1:5000", True),
    ("self-hosted", "127.0.0.1:5000", False),
    (None, "127.0.0.1:5000", False),
    ("github-hosted", None, False),  # no cold pull, nothing to drop for
])
def test_the_drop_is_on_by_default_only_on_an_ephemeral_runner(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: str | None,
        registry: str | None, dropped: bool) -> None:
    if env is None:
        monkeypatch.delenv("RUNNER_ENVIRONMENT", raising=False)
    else:
        monkeypatch.setenv("RUNNER_ENVIRONMENT", env)
    notes: list[str] = []
    opts = _ephemeral_drop(RunOptions(out_dir=tmp_path, cold_start_registry=registry), notes)
    assert opts.drop_caches is dropped
    assert bool(notes) is dropped
    if dropped:
        assert "ephemeral GitHub-hosted runner" in notes[0]


def test_the_summary_says_the_cold_roots_had_a_filesystem_of_their_own() -> None:
    from test_node_figures import node_result  # synthetic node figures, labelled so

    from servelab.run import aggregate, summary

    rows = [node_result(a, n) for a in ("control", "treatment") for n in (1, 2)]
    for r in rows:
        r["metrics"]["coldstart"]["cold"]["cold_check"] = {
            "cold": True, "root_empty": True, "blobs_served_in_full": True,
            "page_cache": "sync", "detail": [],
            "root_fs": "an ext4 filesystem of its own (4096 MiB sparse image, loop-mounted), "
                       "removed by unmount"}
    c, t = (aggregate.arm_stats(a, [r for r in rows if r["arm"] == a])
            for a in ("control", "treatment"))
    md = summary.render_markdown({"verdict": "x", "reasons": [], "experiment": {},
                                  "repeats": 2}, c, t, [], rows)
    assert "its root on a filesystem of its own, removed by unmount" in md
    rows[0]["metrics"]["coldstart"]["cold"]["cold_check"]["root_fs"] = "the temp dir's"
    md = summary.render_markdown({"verdict": "x", "reasons": [], "experiment": {},
                                  "repeats": 2}, c, t, [], rows)
    assert "filesystem of its own" not in md  # said only when every cold pull had one
