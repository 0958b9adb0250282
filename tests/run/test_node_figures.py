"""The start-up cost on a node in result.json, the aggregation, summary.md, summary.json, the
action's outputs and servelab compare. The figures are synthetic (made up, labelled so): the
real pulls are tested in tests/smoke/test_coldstart_engine.py and tests/run/test_run_example.py.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from servelab import github
from servelab.node import Blob, ImageLayers, LayerPull, NodeCost, NodeStart, PullRecord
from servelab.run import aggregate, summary
from servelab.run.merge import compare_runs
from servelab.run.outcomes import BuildOutcome, Inputs, RepeatResult, ScanOutcome, SmokeOutcome
from servelab.run.results import assemble, validate_result, write_json
from servelab.smoke.gpuphases import GpuPhases
from servelab.smoke.modelload import ModelLoad
from servelab.spec import Arm

BASE = Blob("sha256:" + "1" * 64, 60_000_000)
APP = Blob("sha256:" + "2" * 64, 3_000)
WEIGHTS = Blob("sha256:" + "3" * 64, 8 << 20)
MODEL_BYTES = (8 << 20) + 91


def _pull(variant: str, layers: tuple[Blob, ...], held: set[str], pull_s: float,
          unpack_s: float) -> PullRecord:
    lp = [LayerPull(b.digest, b.size, b.digest not in held, 0.0, pull_s, None) for b in layers]
    return PullRecord(variant, "synthetic", "r@sha256:" + "9" * 64, ["base"], 0.0, 0.0, 500,
                      1500, lp, pull_s, unpack_s, pull_s + unpack_s, "synthetic")


def _node(arm: str, scale: float) -> NodeStart:
    """The control bakes 8 MiB of weights; the treatment mounts them. Seconds grow with the
    bytes (made up)."""
    layers = (BASE, APP, WEIGHTS) if arm == "control" else (BASE, APP)
    img = ImageLayers("r@sha256:" + "9" * 64, Blob("sha256:" + "9" * 64, 500),
                      Blob("sha256:" + "8" * 64, 1500), layers)
    warm_bytes, warm_layers = img.bytes_without(frozenset({BASE.digest}))
    node = NodeStart("127.0.0.1:5000", img,
                     _pull("cold", layers, set(), 2.0 * scale, 3.0 * scale),
                     _pull("warm-base", layers, {BASE.digest}, 0.5 * scale, 0.1 * scale),
                     [NodeCost("nothing", None, img.total_bytes, len(layers)),
                      NodeCost("base", "base@sha256:" + "1" * 64, warm_bytes, warm_layers)])
    return node.with_start({"create_s": 0.05, "start_call_s": 0.2, "start_to_ready_s": 1.0,
                            "start_to_first_good_request_s": 1.01})


def node_result(arm: str, repeat: int, *, scale: float = 1.0) -> dict[str, Any]:
    skipped = "synthetic"
    rr = RepeatResult(
        arm=Arm(arm, Path(), Path("Dockerfile")), repeat=repeat,
        build=BuildOutcome("skipped", skipped), scan=ScanOutcome("skipped", skipped),
        smoke=SmokeOutcome("ok", skipped, node=_node(arm, scale),
                           model_load=ModelLoad(MODEL_BYTES, MODEL_BYTES, 9_000_000,
                                                "synthetic", "evicted", MODEL_BYTES),
                           gpu_phases=GpuPhases(1.5, 0.4, 0.02, [
                               {"index": 0, "after_ready_mib": 30000,
                                "after_cleanup_mib": 1, "freed_mib": 29999}], 0.0)))
    r = assemble(rr, run={"id": "synthetic", "name": "m1", "started_at": "2026-12-01T00:00:00Z",
                          "machine": "m1"},
                 experiment={"name": "x", "spec_hash": "sha256:" + "c" * 64, "change": "c",
                             "fixed": [], "metrics": ["startup"], "repeats": 2, "spec": {}},
                 inputs=Inputs(build_args={}, git_ref=None), serve={})
    r["metrics"]["startup"] = {"first_accept_s": 0.5, "ready_s": 1.0, "first_request_s": 1.01,
                               "created_to_started_s": 0.2, "first_start": True}
    return r


@pytest.fixture
def rows() -> list[dict[str, Any]]:
    return [node_result(a, n) for n in (1, 2) for a in ("control", "treatment")]


def test_node_figures_validate_and_land_in_metrics(rows: list[dict[str, Any]]) -> None:
    r = rows[0]
    assert validate_result(r) == []
    m = r["metrics"]
    assert [k for k in m if k not in ("digest", "startup")] == ["coldstart", "model_load", "gpu"]
    cs = m["coldstart"]
    assert cs["cold"]["bytes_pulled"] == cs["image_bytes"] == 500 + 1500 + 60_000_000 \
        + 3_000 + (8 << 20)
    assert cs["warm_base"]["bytes_pulled"] == 500 + 1500 + 3_000 + (8 << 20)
    assert cs["to_ready_s"] == {"cold": pytest.approx(2.0 + 3.0 + 0.05 + 0.2 + 1.0),
                                "warm_base": pytest.approx(0.5 + 0.1 + 0.05 + 0.2 + 1.0)}
    assert m["model_load"]["bytes_read"] == MODEL_BYTES and m["model_load"]["source"] == "server"
    assert m["gpu"]["memory"][0]["freed_mib"] == 29999
    bad = copy.deepcopy(r)
    bad["metrics"]["coldstart"]["cold"]["bytes_pulled"] = -1
    assert validate_result(bad)


def test_baked_weights_are_pulled_bytes_the_treatment_avoids(rows: list[dict[str, Any]]
                                                            ) -> None:
    c = aggregate.arm_stats("control", [r for r in rows if r["arm"] == "control"])
    t = aggregate.arm_stats("treatment", [r for r in rows if r["arm"] == "treatment"])
    deltas = {d.metric: d for d in aggregate.compare_arms(c, t)}
    pulled = deltas["pulled_warm_base"]
    assert pulled.direction == "better" and pulled.delta == -(8 << 20)
    assert not deltas["node_ready_warm_base"].changed  # same seconds: no detectable change
    v = aggregate.judge(c, t, list(deltas.values()), [], [])
    assert v.verdict == "improved"
    assert "bytes pulled, node holding the base" in v.reasons[0]
    # reported, never judged
    assert "model_bytes_read" in t.metrics and "model_bytes_read" not in deltas
    head = aggregate.headline(t, c)
    assert head["pulled_bytes_warm_base"] == 500 + 1500 + 3_000
    assert head["pulled_bytes_cold"] == 500 + 1500 + 60_000_000 + 3_000
    assert head["model_bytes_read"] == MODEL_BYTES
    assert head["node_ready_warm_base_s"] == pytest.approx(1.85)
    assert set(head["coldstart"]) == {"control", "treatment"}
    out = github.outputs_from_summary({"verdict": "improved", **head})
    assert out["pulled-bytes-warm-base"] == str(500 + 1500 + 3_000)
    assert out["node-ready-cold"] == "6.250"
    assert out["model-bytes-read"] == str(MODEL_BYTES)


def test_slower_node_start_is_worse(rows: list[dict[str, Any]]) -> None:
    slow = [node_result("treatment", n, scale=3.0) for n in (1, 2)]
    c = aggregate.arm_stats("control", [r for r in rows if r["arm"] == "control"])
    t = aggregate.arm_stats("treatment", slow)
    deltas = {d.metric: d for d in aggregate.compare_arms(c, t)}
    assert deltas["node_ready_cold"].direction == "worse"
    assert aggregate.judge(c, t, list(deltas.values()), [], []).verdict == "trade-off"


def test_summary_has_the_node_section_and_pull_bars(rows: list[dict[str, Any]]) -> None:
    c = aggregate.arm_stats("control", [r for r in rows if r["arm"] == "control"])
    t = aggregate.arm_stats("treatment", [r for r in rows if r["arm"] == "treatment"])
    deltas = aggregate.compare_arms(c, t)
    v = aggregate.judge(c, t, deltas, [], [])
    md = summary.render_markdown({"verdict": v.verdict, "reasons": v.reasons,
                                  "experiment": {}, "repeats": 2}, c, t, deltas, rows)
    assert "## Start-up cost on a node" in md
    assert md.index("## Start-up cost on a node") < md.index("## Start-up timeline")
    assert "- **treatment**: base held: ready 1.850 s after pulling 4.88 KiB + loading " \
           "8.00 MiB" in md
    # the Gantt chart: pull, unpack and create laid end to end, then the start's phases
    gantt = md[md.index("```mermaid"):]
    assert "section treatment r2 base held" in gantt and "section control r1 cold" in gantt
    assert "    pull :0, 500\n    unpack :500, 600\n    create + start call :600, 850\n" \
           "    start → first accept :850, 1350\n" in gantt
    assert "    pull :0, 2000\n    unpack :2000, 5000\n" in gantt
    # the comparison: arms in columns, every judged metric a row with its Δ and reading
    core = md[md.index("## Control vs treatment"):md.index("## Start-up cost on a node")]
    assert "| reproducible digest |" in core
    assert "| bytes pulled, node holding the base | 8.00 MiB | 4.88 KiB | −8.00 MiB | " \
           "4.00 KiB | **better** |" in core
    assert "| node: pull to ready, cold | 6.250 s | 6.250 s | 0.000 s | 0.050 s | no " \
           "detectable change; could detect ≥ 0.050 s |" in core
    # the node's own figures: one table a theme, metrics in rows, never over 6 columns
    node = md[md.index("## Start-up cost on a node"):md.index("## Per repeat")]
    assert "**Bytes**" in node and "**Seconds**" in node
    assert all(line.count("|") <= 7 for line in md.splitlines() if line.startswith("|"))


def test_no_node_section_without_the_measurement() -> None:
    from test_aggregate import result  # the plain synthetic result of the aggregation tests

    rs = [result("treatment", 1)]
    t = aggregate.arm_stats("treatment", rs)
    md = summary.render_markdown({"verdict": "passed", "reasons": [], "experiment": {},
                                  "repeats": 1}, None, t, [], rs)
    assert "Start-up cost on a node" not in md and "section treatment r1\n" in md
    assert aggregate.headline(t, None)["pulled_bytes_cold"] is None
    assert github.outputs_from_summary(aggregate.headline(t, None))["node-ready-cold"] == ""


def test_compare_shows_the_change_of_the_node_figures(tmp_path: Path,
                                                      rows: list[dict[str, Any]]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for r in rows:
        write_json(a / r["arm"] / f"repeat-{r['repeat']}" / "result.json", r)
    for n in (1, 2):
        slow = node_result("treatment", n, scale=2.0)
        write_json(b / "treatment" / f"repeat-{n}" / "result.json", slow)
    cmp = compare_runs(a, b)
    row = next(x for x in cmp.data["arms"] if x["arm"] == "treatment")
    by = {m["metric"]: m for m in row["metrics"]}
    assert by["pull_cold_s"]["change"] == pytest.approx(2.0)
    assert by["pulled_warm_base"]["change"] == 0
    assert by["node_ready_cold"]["a"] == pytest.approx(6.25)
    assert "| pull, cold | 2.000 s | 4.000 s | 2.000 s |" in cmp.markdown
    assert "| B − A |" in cmp.markdown


def _not_cold(r: dict[str, Any]) -> dict[str, Any]:
    """*r* as if its cold pull's own check had found the registry did not serve a layer."""
    bad = copy.deepcopy(r)
    cs = bad["metrics"]["coldstart"]
    cs["cold"].update(method="containerd pull (private instance)", max_concurrent_downloads=3,
                      cold_check={"cold": False, "root_empty": True, "load_1m": 9.44,
                                  "blobs_served_in_full": False, "page_cache": "sync",
                                  "detail": ["sha256:111111111111: not fetched from the "
                                             "registry"]})
    cs["to_ready_s"]["cold"] = None
    return bad


def test_a_cold_pull_that_was_not_cold_is_left_out(rows: list[dict[str, Any]]) -> None:
    treat = [r for r in rows if r["arm"] == "treatment"]
    slow = node_result("treatment", 3, scale=5.0)
    mixed = [*treat, _not_cold(slow)]
    assert validate_result(mixed[-1]) == []
    t = aggregate.arm_stats("treatment", mixed)
    # the warm figure of repeat 3 is not among the cold ones: same medians as without it
    for key in ("pull_cold_s", "unpack_cold_s", "pulled_cold"):
        assert t.metrics[key].values == aggregate.arm_stats("treatment", treat
                                                            ).metrics[key].values
    c = aggregate.arm_stats("control", [r for r in rows if r["arm"] == "control"])
    md = summary.render_markdown({"verdict": "x", "reasons": [], "experiment": {},
                                  "repeats": 3}, c, t, [], [*rows, mixed[-1]])
    assert ("- treatment r3: the cold pull was **not cold** (sha256:111111111111: not "
            "fetched from the registry); left out of the cold figures") in md
    assert "(**not cold**) (load 9.4)" in md
    # containerd's CPU seconds: a row of the node's seconds, only from repeats that were cold
    cpu = [dict(r, metrics={**r["metrics"], "coldstart": {**r["metrics"]["coldstart"], "cold": {
        **r["metrics"]["coldstart"]["cold"], "runtime_cpu_s": 3.5 + r["repeat"]}}})
        for r in treat]
    with_cpu = aggregate.arm_stats("treatment", [*cpu, _not_cold(slow)])
    assert with_cpu.metrics["cpu_cold_s"].values == [4.5, 5.5]
    assert "| runtime CPU, cold pull | 5.000 s (4.500 s–5.500 s) |" in summary.render_markdown(
        {"verdict": "x", "reasons": [], "experiment": {}, "repeats": 2}, None, with_cpu, [],
        cpu)
    assert "a fresh containerd of servelab's own per repeat" in md


def test_the_fallback_is_named_in_result_and_summary() -> None:
    r = node_result("treatment", 1)
    node = _node("treatment", 1.0)
    node.cold_fallback = "`containerd` is not installed"
    cs = node.to_dict()
    assert cs["cold_runtime"] == {"private_containerd": False,
                                  "fallback_reason": "`containerd` is not installed"}
    assert any("not a private containerd: `containerd` is not installed" in n
               for n in cs["notes"])
    r["metrics"]["coldstart"] = cs
    assert validate_result(r) == []
    t = aggregate.arm_stats("treatment", [r])
    md = summary.render_markdown({"verdict": "passed", "reasons": [], "experiment": {},
                                  "repeats": 1}, None, t, [], [r])
    assert "- cold pulls were servelab's own fetch, not a private containerd: `containerd` " \
           "is not installed" in md
