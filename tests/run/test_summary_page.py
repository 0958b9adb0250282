"""summary.md fits GitHub's page: rendered as GitHub-flavoured Markdown with its Mermaid
charts in headless Chromium at 1012 px (tests/pagecheck.py), nothing scrolls sideways and no
table has more than 6 columns; for a run with every section (synthetic figures, labelled so)
and for a real failing run (a server that crashes at start)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import pagecheck
from servelab.run import aggregate, summary
from servelab.run.runner import RunOptions, run_experiment
from servelab.spec import load_experiment

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "data" / "smoke" / "server"

pytestmark = pytest.mark.mermaid


@pytest.fixture(autouse=True)
def _browser() -> None:
    why = pagecheck.available()
    if why:
        pytest.skip(why)


def _render(rows: list[dict[str, Any]], verdict_only: bool = False) -> str:
    arms = {a: [r for r in rows if r["arm"] == a] for a in ("control", "treatment")}
    c = aggregate.arm_stats("control", arms["control"])
    t = aggregate.arm_stats("treatment", arms["treatment"])
    deltas = aggregate.compare_arms(c, t)
    v = aggregate.judge(c, t, deltas, [], [])
    return summary.render_markdown({"verdict": v.verdict, "reasons": v.reasons, "repeats": 3,
                                    "experiment": {"change": "c", "fixed": ["image"],
                                                   "metrics": ["size", "startup"]}},
                                   c, t, deltas, rows)


def test_a_summary_with_every_section_fits_the_page(tmp_path: Path) -> None:
    from test_lazy_figures import _record, lazy_result  # synthetic lazy and node figures

    rows = [lazy_result(a, n, _record(0.6 + 0.05 * n if a == "control" else 0.5 - 0.01 * n))
            for n in (1, 2, 3) for a in ("control", "treatment")]
    md = _render(rows)
    assert "**Lazy pull**" in md and "**Seconds**" in md and "```mermaid" in md
    got = pagecheck.check(md, tmp_path)
    assert got["tables"] >= 6


def test_the_check_sees_a_table_that_scrolls(tmp_path: Path) -> None:
    wide = "| a | b |\n|---|---|\n| " + " | ".join(["sha256:" + "a" * 64] * 2) + " |\n"
    got = pagecheck.sideways(wide, tmp_path)
    assert got["wide"] and "<table>" in str(got["wide"][0])
    assert pagecheck.sideways("| " + " | ".join("abcdefg") + " |\n|" + "---|" * 7 + "\n",
                              tmp_path)["columns"] == 7


@pytest.mark.docker
@pytest.mark.registry
def test_a_failing_run_summary_fits_the_page_and_names_the_crash(
        tmp_path: Path, docker_client: object, base_image: str) -> None:
    """A real run whose treatment's server exits at start: exit 1, the reason names the exit
    status and the log tail, and its summary.md fits the page."""
    spec = tmp_path / "exp.yaml"
    ctx = tmp_path / "server"  # inside the experiment's folder: the path rule confines it
    shutil.copytree(SERVER, ctx)
    arm = ("{{context: {ctx}, dockerfile: Dockerfile, allowUnpinnedBase: true, "
           "buildArgs: {{BASE_IMAGE: '{base}', MODE: {mode}}}}}")
    spec.write_text(
        "apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: crash-at-start}\n"
        "spec:\n  change: the server crashes at start\n  repeats: 2\n"
        f"  control: {arm.format(ctx=ctx, base=base_image, mode='good')}\n"
        f"  treatment: {arm.format(ctx=ctx, base=base_image, mode='crash')}\n"
        "  serve: {port: 8000, healthPath: /health, readinessTimeoutSeconds: 20}\n"
        "  build: {sourceDateEpoch: 1700000000, network: none}\n")
    out = tmp_path / "out"
    res = run_experiment(load_experiment(spec), RunOptions(out_dir=out,
                                                          stages=("build", "smoke")))
    assert res.exit_code == 1 and res.summary["verdict"] == "failed"
    reasons = " ".join(res.summary["reasons"])
    assert "exited with code 3" in reasons and "log tail:" in reasons
    assert "fatal: the fixture crashes on purpose" in reasons
    md = (out / "summary.md").read_text()
    assert json.loads((out / "summary.json").read_text())["verdict"] == "failed"
    pagecheck.check(md, tmp_path)
