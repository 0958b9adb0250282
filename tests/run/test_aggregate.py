"""Aggregation, verdicts and the summary on result dicts (synthetic, labelled so)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from servelab.run import aggregate, summary
from servelab.run.merge import compare_runs, merge_runs
from servelab.run.results import validate_result, write_json
from servelab.run.runner import check_fixed
from synthetic import skeleton_result

D1 = "sha256:" + "a" * 64
D2 = "sha256:" + "b" * 64


def result(arm: str, repeat: int, *, digest: str = D1, size: int = 100_000_000,
           ready: float = 1.0, p95: float = 10.0, crit: int = 0,
           machine: str = "m1") -> dict[str, Any]:
    """A synthetic result.json (not from a real run): assembled with no stage run, then the
    figures filled in."""
    r = skeleton_result(arm, repeat, machine=machine, repeats=3)
    r["image"].update({"ref": f"img@{digest}", "digest": digest,
                       "base": [{"ref": "base", "digest": D2}]})
    r["metrics"] = {"digest": digest,
                    "size": {"compressed_bytes": size, "uncompressed_bytes": size * 2},
                    "startup": {"first_accept_s": ready / 4, "ready_s": ready,
                                "first_request_s": ready + 0.01},
                    "findings": {"CRITICAL": crit, "HIGH": 0, "MEDIUM": 0, "LOW": 0,
                                 "UNKNOWN": 0},
                    "latency": {"p50_ms": p95 / 2, "p95_ms": p95, "count": 5}}
    return r


def test_synthetic_results_validate_against_the_schema() -> None:
    assert validate_result(result("treatment", 1)) == []
    bad = result("treatment", 1)
    bad["metrics"]["digest"] = 42
    assert validate_result(bad)


def test_change_needs_more_than_spread_and_min_effect() -> None:
    c = aggregate.arm_stats("control", [result("control", i, ready=r)
                                        for i, r in enumerate([1.0, 1.5, 2.0], 1)])
    t = aggregate.arm_stats("treatment", [result("treatment", i, ready=r)
                                          for i, r in enumerate([0.8, 1.2, 1.6], 1)])
    deltas = {d.metric: d for d in aggregate.compare_arms(c, t)}
    # medians 1.5 vs 1.2: delta 0.3 is inside the control's spread of 1.0
    assert not deltas["startup"].changed
    t2 = aggregate.arm_stats("treatment", [result("treatment", i, ready=0.2) for i in (1, 2, 3)])
    d2 = {d.metric: d for d in aggregate.compare_arms(c, t2)}
    assert d2["startup"].changed and d2["startup"].direction == "better"


def test_trade_off_not_improved() -> None:
    c = aggregate.arm_stats("control", [result("control", i) for i in (1, 2)])
    t = aggregate.arm_stats("treatment", [result("treatment", i, ready=0.1, p95=50.0)
                                          for i in (1, 2)])
    deltas = aggregate.compare_arms(c, t)
    v = aggregate.judge(c, t, deltas, [], [])
    assert v.verdict == "trade-off"
    assert v.exit_code == 0
    assert any("latency" in r for r in v.reasons)


def test_no_detectable_change_and_gates() -> None:
    c = aggregate.arm_stats("control", [result("control", i) for i in (1, 2)])
    t = aggregate.arm_stats("treatment", [result("treatment", i) for i in (1, 2)])
    assert aggregate.judge(c, t, aggregate.compare_arms(c, t), [], []).verdict == \
        "no detectable change"
    failed = aggregate.judge(c, t, [], ["maxStartupSeconds: 9 > 1"], [])
    assert (failed.verdict, failed.exit_code) == ("failed", 1)
    invalid = aggregate.judge(c, t, [], ["x"], ["fixed factor 'model' differed"])
    assert (invalid.verdict, invalid.exit_code) == ("invalid", 2)


def test_not_reproducible() -> None:
    t = aggregate.arm_stats("treatment", [result("treatment", 1, digest=D1),
                                          result("treatment", 2, digest=D2)])
    assert t.reproducible is False
    assert aggregate.judge(None, t, [], ["reproducible"], []).verdict == "not reproducible"


def test_fixed_factor_that_differs_makes_the_run_invalid() -> None:
    a = result("control", 1)
    b = result("treatment", 1)
    b["inputs"]["model_sha256"] = "f" * 64
    a["inputs"]["model_sha256"] = "e" * 64
    problems = check_fixed(["model", "image"], [a, b])
    assert len(problems) == 1 and "'model'" in problems[0]


def test_markdown_summary_has_verdict_first_gantt_and_no_ansi() -> None:
    rows = [result("control", i, ready=2.0) for i in (1, 2)] + \
           [result("treatment", i, ready=0.5) for i in (1, 2)]
    c = aggregate.arm_stats("control", rows[:2])
    t = aggregate.arm_stats("treatment", rows[2:])
    deltas = aggregate.compare_arms(c, t)
    v = aggregate.judge(c, t, deltas, [], [])
    data = {"verdict": v.verdict, "reasons": v.reasons, "repeats": 2,
            "experiment": {"change": "c", "fixed": [], "metrics": []}}
    md = summary.render_markdown(data, c, t, deltas, rows)
    assert md.startswith("# servelab: ✅ improved")
    assert "```mermaid\ngantt" in md
    assert "section treatment r2" in md
    assert "\x1b[" not in md


def test_summary_is_capped_at_one_mib() -> None:
    text = "x" * (2 * 1024 * 1024)
    capped = summary.cap(text)
    assert len(capped.encode()) <= summary.SUMMARY_LIMIT
    assert "cut at 1 MiB" in capped


def _write_run(root: Path, rows: list[dict[str, Any]]) -> Path:
    for r in rows:
        write_json(root / r["arm"] / f"repeat-{r['repeat']}" / "result.json", r)
    return root


def test_report_merges_machines_and_spots_digest_differences(tmp_path: Path) -> None:
    a = _write_run(tmp_path / "a", [result("treatment", 1, machine="m1")])
    b = _write_run(tmp_path / "b", [result("treatment", 1, machine="m2")])
    same = merge_runs([a, b])
    assert same.exit_code == 0 and same.data["cross_machine_reproducible"]
    c = _write_run(tmp_path / "c", [result("treatment", 1, digest=D2, machine="m3")])
    diff = merge_runs([a, c])
    assert diff.exit_code == 1
    assert "different digests" in diff.markdown


def test_compare_reports_drift(tmp_path: Path) -> None:
    a = _write_run(tmp_path / "a", [result("treatment", 1)])
    b_rows = [copy.deepcopy(result("treatment", 1, digest=D2, size=120_000_000))]
    b = _write_run(tmp_path / "b", b_rows)
    cmp = compare_runs(a, b)
    assert cmp.exit_code == 1 and cmp.data["drift"]
    assert compare_runs(a, a).exit_code == 0


def test_compare_rejects_foreign_json(tmp_path: Path) -> None:
    from servelab.errors import InputError

    p = tmp_path / "x.json"
    p.write_text(json.dumps({"hello": 1}))
    with pytest.raises(InputError):
        compare_runs(p, p)


def test_checks_the_control_fails_and_the_treatment_passes_count_as_improvement() -> None:
    c_rows = [result("control", i) for i in (1, 2)]
    for r in c_rows:
        r["verdicts"].append({"check": "runs-as-root", "stage": "smoke", "passed": False,
                              "reason": "uid 0"})
    c = aggregate.arm_stats("control", c_rows)
    t = aggregate.arm_stats("treatment", [result("treatment", i) for i in (1, 2)])
    v = aggregate.judge(c, t, aggregate.compare_arms(c, t), [], [])
    assert v.verdict == "improved"
    assert "runs-as-root" in v.reasons[0]
