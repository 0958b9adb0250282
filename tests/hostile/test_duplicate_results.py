"""A result listed twice in a summary.json (the same run, arm and repeat) is counted once
by ``report``, ``compare`` and ``history``, with a note naming both places: repeats and
medians are those of the results themselves, not skewed by the copy."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.run.results import dedupe_results, load_results_noted

from .harness import run_servelab

SUMMARY = (Path(__file__).resolve().parents[1] / "data" / "history" / "positive"
           / "nightly-artifacts" / "servelab-20261124-3f9a0c11" / "summary.json")


def _doubled(tmp_path: Path) -> Path:
    data = json.loads(SUMMARY.read_text())
    last = data["results"][-1]
    assert (last["arm"], last["repeat"]) == ("treatment", 2)
    data["results"] += [last, last]
    path = tmp_path / "doubled" / "summary.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    return path


def test_the_reader_counts_a_doubled_result_once(tmp_path: Path) -> None:
    rows, notes = load_results_noted(_doubled(tmp_path))
    assert [(r["arm"], r["repeat"]) for r in rows] == [
        ("control", 1), ("treatment", 1), ("control", 2), ("treatment", 2)]
    assert len(notes) == 2 and all("counted once" in n for n in notes)
    assert "results[4]" in notes[0] and "first at" in notes[0] and "results[3]" in notes[0]


def test_the_reader_says_when_the_copies_differ() -> None:
    a = {"run": {"id": "r1"}, "arm": "treatment", "repeat": 1, "x": 1}
    rows, notes = dedupe_results([("one", a), ("two", {**a, "x": 2}), ("three", a)])
    assert rows == [a]
    assert "different contents: the first is used" in notes[0][1]
    assert "different contents" not in notes[1][1]


def test_distinct_results_are_all_kept() -> None:
    """The other way: another repeat, arm or run is another result."""
    base = {"run": {"id": "r1"}, "arm": "treatment", "repeat": 1}
    others = [base, {**base, "repeat": 2}, {**base, "arm": "control"},
              {**base, "run": {"id": "r2"}}, {**base, "run": {"id": "r1", "machine": "m2"}}]
    rows, notes = dedupe_results([(str(i), r) for i, r in enumerate(others)])
    assert rows == others and notes == []
    assert load_results_noted(SUMMARY)[1] == []


def test_report_counts_it_once(tmp_path: Path) -> None:
    doubled = _doubled(tmp_path)
    out = run_servelab(["report", "--format", "json", str(doubled)], cwd=tmp_path)
    assert not out.problems() and out.code == 0, out.explain()
    doc = json.loads(out.stdout)
    assert len(doc["results"]) == 4 and len(doc["duplicates"]) == 2
    md = run_servelab(["report", str(doubled)], cwd=tmp_path).stdout
    assert "Counted once (2 result(s) listed twice)" in md
    assert "| treatment | compressed size |" in md
    metric_rows = [line for line in md.splitlines() if line.startswith(
        ("| treatment | compressed size", "| treatment | start to", "| treatment | vuln"))]
    assert metric_rows and all(line.endswith("| 2 |") for line in metric_rows)


def test_compare_counts_it_once(tmp_path: Path) -> None:
    doubled = _doubled(tmp_path)
    once = json.loads(run_servelab(["compare", "--format", "json", str(SUMMARY), str(SUMMARY)],
                                   cwd=tmp_path).stdout)
    out = run_servelab(["compare", "--format", "json", str(SUMMARY), str(doubled)],
                       cwd=tmp_path)
    assert not out.problems() and out.code == 0, out.explain()
    doc = json.loads(out.stdout)
    assert doc["arms"] == once["arms"]  # the same medians as the summary read once
    assert len(doc["duplicates"]) == 2 and once["duplicates"] == []


def test_history_counts_it_once(tmp_path: Path) -> None:
    doubled = _doubled(tmp_path)
    out = run_servelab(["history", "--format", "json", str(doubled)], cwd=tmp_path)
    assert not out.problems() and out.code == 0, out.explain()
    doc = json.loads(out.stdout)
    assert doc["runs"][0]["arms"]["treatment"]["repeats"] == 2
    assert [d["source"] for d in doc["duplicates"]] == [
        f"{doubled}: results[4]", f"{doubled}: results[5]"]
    text = run_servelab(["history", str(doubled)], cwd=tmp_path).stdout
    assert text.count("listed again") == 2
