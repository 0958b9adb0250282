"""The lazy pull (``--lazy soci``) in result.json, the aggregation, summary.md, summary.json and
servelab compare. The figures are SYNTHETIC (made up, labelled so), on servelab's own record
classes (:class:`~servelab.node.lazypull.LazyRecord`, :class:`~servelab.node.NodeStart`); the
real lazy pulls are tested in tests/node/test_lazy_pull.py and tests/run/test_run_lazy.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_node_figures import _node, node_result

from servelab import spec
from servelab.node.lazypull import LazyRecord, lazy_not_measured
from servelab.run import aggregate, lazyview, summary
from servelab.run.merge import compare_runs
from servelab.run.results import validate_result, write_json

LAYER = "sha256:" + "1" * 64
#: made-up lazy figures: a 0.6 s lazy pull that fetched 33.2 MB and served 15.1 MB on demand
FETCHED = {"layers_full": 0, "layers_partial": 30_400_000, "partial_requests": 18,
           "other": 2_800_000, "total": 33_200_000}
READ = {"synchronous_bytes_served": 15_100_000, "background_bytes_served": 0,
        "layer_bytes_fetched": 30_400_000}
LAZY_START = {"create_s": 0.04, "start_call_s": 0.1, "start_to_tcp_accept_s": 1.5,
              "start_to_ready_s": 1.6, "start_to_first_good_request_s": 1.62}


def _record(pull_s: float = 0.6, *, fell_back: bool = False) -> dict[str, Any]:
    rec = LazyRecord("127.0.0.1:5443/r@sha256:" + "9" * 64, pull_s, "sha256:" + "7" * 64,
                     True, 1, 0 if fell_back else 1, fell_back, 10 << 20, True, "evicted",
                     bytes_fetched=dict(FETCHED), bytes_read=dict(READ))
    if fell_back:
        rec.bytes_fetched = {**FETCHED, "layers_full": 60_000_000}
        rec.notes.append("silent fallback to a full pull: sha256:11111111111 fetched in full "
                         "(200) during the pull")
    return rec.to_dict()


def lazy_result(arm: str, repeat: int, lazy: dict[str, Any] | None, *, started: bool = True,
                scale: float = 1.0) -> dict[str, Any]:
    """A synthetic result.json whose ``metrics.coldstart`` carries *lazy* (and the lazy node's
    start when *started*), made by :meth:`NodeStart.to_dict` as a run makes it."""
    r = node_result(arm, repeat, scale=scale)
    node = _node(arm, scale)
    node.lazy = lazy
    if started:
        node.with_lazy_start(LAZY_START)
    r["metrics"]["coldstart"] = node.to_dict()
    return r


def _arm(rows: list[dict[str, Any]], arm: str) -> aggregate.ArmStats:
    return aggregate.arm_stats(arm, [r for r in rows if r["arm"] == arm])


def _md(rows: list[dict[str, Any]]) -> str:
    c, t = _arm(rows, "control"), _arm(rows, "treatment")
    return summary.render_markdown({"verdict": "x", "reasons": [], "experiment": {},
                                    "repeats": 2}, c, t, [], rows)


def test_lazy_pull_to_ready_is_laid_end_to_end_and_validates() -> None:
    r = lazy_result("treatment", 1, _record(0.6))
    assert validate_result(r) == []
    cs = r["metrics"]["coldstart"]
    assert cs["to_ready_s"]["lazy"] == pytest.approx(0.6 + 0.04 + 0.1 + 1.6)
    assert cs["to_first_request_s"]["lazy"] == pytest.approx(0.6 + 0.04 + 0.1 + 1.62)
    assert cs["lazy"]["start"]["start_to_ready_s"] == 1.6
    # no start on the lazy node yet: the field is there, and null
    pull_only = lazy_result("treatment", 1, _record(0.6), started=False)["metrics"]["coldstart"]
    assert pull_only["to_ready_s"]["lazy"] is None and "start" not in pull_only["lazy"]
    # not asked for: no lazy key at all (records of runs without --lazy are unchanged)
    assert "lazy" not in node_result("treatment", 1)["metrics"]["coldstart"]["to_ready_s"]


def test_a_fallback_is_never_a_lazy_figure() -> None:
    r = lazy_result("treatment", 2, _record(9.0, fell_back=True))
    assert validate_result(r) == []
    assert r["metrics"]["coldstart"]["to_ready_s"]["lazy"] is None
    rows = [lazy_result("treatment", 1, _record(0.6)), r,
            lazy_result("treatment", 3, _record(0.8))]
    t = _arm(rows, "treatment")
    assert t.metrics["pull_lazy_s"].values == [0.6, 0.8]  # not the fallback's 9.0
    assert t.metrics["fetched_lazy"].values == [33_200_000, 33_200_000]
    assert len(t.metrics["node_ready_lazy"].values) == 2
    # a repeat not measured counts in no lazy figure either
    nm = lazy_result("treatment", 4, lazy_not_measured("no /dev/fuse"), started=False)
    assert validate_result(nm) == []
    assert _arm([nm], "treatment").metrics.get("pull_lazy_s") is None


def test_summary_shows_the_lazy_figures_in_words_table_and_gantt() -> None:
    rows = [lazy_result(a, n, _record(0.6 if a == "control" else 0.5))
            for n in (1, 2) for a in ("control", "treatment")]
    md = _md(rows)
    node = md[md.index("## Start-up cost on a node"):md.index("## Per repeat")]
    # pulled full = the image's exact bytes; percentages of it
    full = rows[1]["metrics"]["coldstart"]["image_bytes"]
    assert (f"- **treatment**: pulled {full / 1e6:.1f} MB full; lazy fetched 33.2 MB "
            f"({100 * 33.2e6 / full:.0f}%), read 15.1 MB ({100 * 15.1e6 / full:.0f}%) before "
            "ready; lazy pull 0.500 s, pull to ready 2.240 s") in node
    assert "(2 of 2 repeats lazy)" in node
    assert "**Lazy pull**" in node  # the node's lazy figures: a table of their own
    assert "| pull, lazy | 0.600 s | 0.500 s | −0.100 s |" in node
    assert "| treatment r2 | 0.500 s | lazy | 30.4 MB (18), 0 B, 2.8 MB | 15.1 MB | " \
           "2.240 s |" in node
    gantt = md[md.index("```mermaid"):]
    assert "    section control r1 lazy\n    lazy pull :0, 600\n" \
           "    create + start call :600, 740\n    start → first accept :740, 2240\n" in gantt
    assert "section treatment r2 cold" in gantt  # the cold rows stay


def test_fallback_and_not_measured_are_shown_as_such() -> None:
    rows = [lazy_result("control", 1, lazy_not_measured("no /dev/fuse: lazy pulling mounts "
                                                          "each layer with FUSE"),
                        started=False),
            lazy_result("treatment", 1, _record(0.5)),
            lazy_result("treatment", 2, _record(7.0, fell_back=True))]
    md = _md(rows)
    assert "- **control**: no lazy figure (not measured: no /dev/fuse: lazy pulling mounts " \
           "each layer with FUSE)" in md
    assert "- treatment r2: the lazy pull **fell back to a full pull** (sha256:11111111111 " \
           "fetched in full (200) during the pull); left out of the lazy figures" in md
    assert "(1 of 2 repeats lazy)" in md and "lazy pull 0.500 s" in md
    assert "7.000 s" not in md  # the fallback's seconds are nowhere a figure
    gantt = md[md.index("```mermaid"):]
    assert "section treatment r1 lazy" in gantt and "section treatment r2 lazy" not in gantt
    assert "section control r1 lazy" not in gantt
    # summary.json's lazy: each repeat's state and reason, valid against the schema
    st = lazyview.status(rows)
    assert st == {"control": {"lazy_repeats": 0, "repeats": [
        {"repeat": 1, "state": "not measured", "started": False,
         "reason": "no /dev/fuse: lazy pulling mounts each layer with FUSE"}]},
        "treatment": {"lazy_repeats": 1, "repeats": [
            {"repeat": 1, "state": "lazy", "reason": None, "started": True},
            {"repeat": 2, "state": "fell back", "started": True,
             "reason": "sha256:11111111111 fetched in full (200) during the pull"}]}}
    doc = {"schemaVersion": 1, "results": rows, "lazy": st}
    assert list(spec.validator("summary").iter_errors(doc)) == []
    doc["lazy"]["treatment"]["repeats"][0]["state"] = "lazyish"
    assert list(spec.validator("summary").iter_errors(doc))


def test_without_a_lazy_start_the_bytes_are_the_pulls_own() -> None:
    rows = [lazy_result("treatment", 1, _record(0.5), started=False)]
    md = summary.render_markdown({"verdict": "x", "reasons": [], "experiment": {},
                                  "repeats": 1}, None, _arm(rows, "treatment"), [], rows)
    assert "read 15.1 MB" in md and "by the end of the pull (the server was not started on " \
        "the lazy node)" in md and "pull to ready not measured: no start on the lazy node" in md
    assert "%) before ready" not in md  # the lazy bytes are not called "before ready"
    assert "    section treatment r1 lazy\n    lazy pull :0, 500\n```" in md  # no start bars


def test_headline_and_compare_carry_the_lazy_figures(tmp_path: Path) -> None:
    a_rows = [lazy_result("treatment", n, _record(0.5)) for n in (1, 2)]
    b_rows = [lazy_result("treatment", n, _record(1.5)) for n in (1, 2)]
    head = aggregate.headline(_arm(a_rows, "treatment"), None)
    assert head["coldstart"]["treatment"]["pull_lazy_s"] == 0.5
    assert head["coldstart"]["treatment"]["read_lazy"] == 15_100_000
    assert head["coldstart"]["treatment"]["node_ready_lazy"] == pytest.approx(2.24)
    a, b = tmp_path / "a", tmp_path / "b"
    for d, rows in ((a, a_rows), (b, b_rows)):
        for r in rows:
            write_json(d / r["arm"] / f"repeat-{r['repeat']}" / "result.json", r)
    cmp = compare_runs(a, b)
    by = {m["metric"]: m for m in cmp.data["arms"][0]["metrics"]}
    assert by["pull_lazy_s"]["change"] == pytest.approx(1.0)
    assert by["node_ready_lazy"]["change"] == pytest.approx(1.0)
    assert by["read_lazy"]["change"] == 0
    assert "| pull, lazy | 0.500 s | 1.500 s | 1.000 s |" in cmp.markdown
    # B's lazy pulls all fell back: compare lists the lazy figures as not measured in B
    c = tmp_path / "c"
    for n in (1, 2):
        r = lazy_result("treatment", n, _record(8.0, fell_back=True))
        write_json(c / "treatment" / f"repeat-{n}" / "result.json", r)
    missing = compare_runs(a, c).data["missing"]
    assert "treatment: pull, lazy not measured in B" in missing
