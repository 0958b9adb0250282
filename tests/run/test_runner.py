"""The runner's loop and its result.json, in-process: interleaved (ABBA) repeats, stages that were
not selected, and a build that fails (a failed stage of the repeat, not the end of the run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from servelab.run.options import RunOptions
from servelab.run.results import validate_result
from servelab.run.runner import NO_IMAGE, NOT_SELECTED, run_experiment
from servelab.spec import load_experiment

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "experiment.yaml"
UNPINNED = ROOT / "tests" / "data" / "build" / "unpinned"


def test_lint_only_run_interleaves_arms_abba_and_skips_the_rest(tmp_path: Path) -> None:
    """ABBA: each arm runs first in every other repeat, so drift favours neither."""
    lines: list[str] = []
    out = tmp_path / "out"
    res = run_experiment(load_experiment(EXAMPLE), RunOptions(out_dir=out, stages=("lint",),
                                                              repeats=3), lines.append)
    rows = res.summary["results"]
    assert [(r["arm"], r["repeat"]) for r in rows] == [
        ("control", 1), ("treatment", 1), ("treatment", 2), ("control", 2), ("control", 3),
        ("treatment", 3)]
    assert [ln for ln in lines if ln.endswith("start")] == [
        "[control 1/3] start", "[treatment 1/3] start", "[treatment 2/3] start",
        "[control 2/3] start", "[control 3/3] start", "[treatment 3/3] start"]
    for r in rows:
        on_disk = json.loads((out / r["arm"] / f"repeat-{r['repeat']}" / "result.json")
                             .read_text())
        assert on_disk == json.loads(json.dumps(r, default=str))
        assert validate_result(on_disk) == []
        assert list(on_disk["stages"]) == ["lint", "build", "scan", "smoke"]
        for name in ("build", "scan", "smoke"):
            assert on_disk["stages"][name] == {"status": "skipped", "reason": NOT_SELECTED,
                                               "seconds": None, "record": None}
        assert on_disk["image"] == {"ref": None, "digest": None}
        assert on_disk["inputs"]["dockerfile_sha256"] and on_disk["inputs"]["model_sha256"]
        assert on_disk["files"] == {"lint_sarif": str(out / f"lint-{r['arm']}.sarif")}
    control = rows[0]
    assert control["stages"]["lint"]["status"] == "failed"  # the control is the common way
    assert [v["check"] for v in control["verdicts"]] == ["lint"]
    assert res.summary["skipped"] == [{"stage": s, "reason": NOT_SELECTED}
                                      for s in ("build", "scan", "smoke")]


@pytest.mark.docker
def test_failed_build_is_a_failed_stage_and_nothing_is_tested(
        tmp_path: Path, docker_client: object) -> None:
    spec = tmp_path / "exp.yaml"
    ctx = tmp_path / "unpinned"  # inside the experiment's folder: the path rule confines it
    shutil.copytree(UNPINNED, ctx)
    spec.write_text("apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: unpinned}\n"
                    "spec:\n  change: an unpinned base\n  repeats: 1\n"
                    f"  treatment: {{context: {ctx}, dockerfile: Dockerfile}}\n"
                    "  build: {sourceDateEpoch: 1700000000, network: none}\n")
    out = tmp_path / "out"
    res = run_experiment(load_experiment(spec),
                         RunOptions(out_dir=out, stages=("build", "scan", "smoke")))
    assert res.exit_code == 1 and res.summary["verdict"] == "failed"
    r = json.loads((out / "treatment" / "repeat-1" / "result.json").read_text())
    assert validate_result(r) == []
    assert r["stages"]["build"]["status"] == "failed"
    assert "base-unpinned" in r["stages"]["build"]["reason"]
    for name in ("scan", "smoke"):
        assert r["stages"][name]["status"] == "skipped"
        assert r["stages"][name]["reason"] == NO_IMAGE
    assert [(v["check"], v["passed"]) for v in r["verdicts"]] == [("base-pinned", False)]
    assert r["image"] == {"ref": None, "digest": None} and r["metrics"] == {"digest": None}
