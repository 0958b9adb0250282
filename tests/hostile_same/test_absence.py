"""Absence is never sameness (issue 24): compare and report judge only what both sides
measured, say what is missing, and a verdict that needs missing data is "not comparable"
(exit 2), never a pass. Before, each case below said "same digest" and exited 0.

Test ids named in docs/limits.md: hostile-same-compare, hostile-same-report,
hostile-same-report-property (and hostile-same-diffid in tests/hostile_oci)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile.harness import run_servelab
from servelab.run.merge import compare_runs, merge_runs

from .runs import D1, D2, result, write_run

Rows = list[dict[str, Any]]

#: (id, A's results, B's results, exit code, words the output must hold)
COMPARE_CASES: list[tuple[str, Rows, Rows, int, str]] = [
    ("no-shared-arm", [result("control", 1, D1)], [result("treatment", 1, D1)], 2,
     "treatment: not in A"),
    ("b-without-treatment", [result("control", 1, D1), result("treatment", 1, D1)],
     [result("control", 1, D1)], 2, "treatment: not in B"),
    ("b-built-nothing", [result("treatment", 1, D1)], [result("treatment", 1, None)], 2,
     "treatment: B built nothing"),
    ("both-built-nothing", [result("treatment", 1, None)], [result("treatment", 1, None)], 2,
     "treatment: A built nothing"),
    ("neither-has-treatment", [result("control", 1, D1)], [result("control", 1, D1)], 2,
     "treatment: in neither run"),
    # the positive cases: both sides measured the treatment
    ("same", [result("treatment", 1, D1)], [result("treatment", 1, D1)], 0, "same digest"),
    ("drift", [result("treatment", 1, D1)], [result("treatment", 1, D2)], 1, "digest drift"),
    ("same-with-a-failed-repeat", [result("treatment", 1, D1), result("treatment", 2, None)],
     [result("treatment", 1, D1)], 0, "same digest"),
]


@pytest.mark.parametrize(("a_rows", "b_rows", "code", "words"),
                         [c[1:] for c in COMPARE_CASES], ids=[c[0] for c in COMPARE_CASES])
def test_hostile_same_compare(tmp_path: Path, a_rows: Rows, b_rows: Rows, code: int,
                              words: str) -> None:
    a, b = write_run(tmp_path / "a", a_rows), write_run(tmp_path / "b", b_rows)
    cmp = compare_runs(a, b)
    assert cmp.exit_code == code, cmp.markdown
    assert words in cmp.markdown
    assert cmp.data["comparable"] is (code != 2)
    if code == 2:
        assert "not comparable" in cmp.markdown.splitlines()[0]
        assert cmp.data["missing"] and not cmp.data["drift"]
        for flags in ([], ["--allow-drift"]):  # the CLI too: exit 2, the reason on stderr
            out = run_servelab(["compare", str(a), str(b), *flags], cwd=tmp_path)
            assert out.code == 2 and not out.problems(), out.explain()
            assert "not comparable" in out.stderr and "same digest" not in out.stdout


#: (id, runs (one list of results per runner), exit code, words the Markdown must hold)
REPORT_CASES: list[tuple[str, list[Rows], int, str]] = [
    ("every-build-failed", [[result("treatment", 1, None, "m1")],
                            [result("treatment", 1, None, "m2")]], 2, "no digest from m1, m2"),
    ("one-runner-failed", [[result("treatment", 1, D1, "m1")],
                           [result("treatment", 1, None, "m2")]], 2, "no digest from m2"),
    ("a-difference-beats-a-gap", [[result("treatment", 1, D1, "m1")],
                                  [result("treatment", 1, D2, "m2")],
                                  [result("treatment", 1, None, "m3")]], 1,
     "different digests"),
    ("same", [[result("treatment", 1, D1, "m1")], [result("treatment", 1, D1, "m2")]], 0,
     "same digest on every runner"),
]


@pytest.mark.parametrize(("runs", "code", "words"), [c[1:] for c in REPORT_CASES],
                         ids=[c[0] for c in REPORT_CASES])
def test_hostile_same_report(tmp_path: Path, runs: list[Rows], code: int, words: str) -> None:
    paths = [write_run(tmp_path / f"r{i}", rows) for i, rows in enumerate(runs)]
    merged = merge_runs(paths)
    assert merged.exit_code == code, merged.markdown
    assert words in merged.markdown
    for g in merged.data["groups"]:
        assert "None" not in g["digests"] and None not in g["digests"]
    if code != 0:
        assert "same digest on every runner" not in merged.markdown
        out = run_servelab(["report", "--format", "json", *map(str, paths)], cwd=tmp_path)
        assert out.code == code and not out.problems(), out.explain()
        assert json.loads(out.stdout)["cross_machine_reproducible"] is False


@given(st.lists(st.sampled_from([D1, D2, None]), min_size=1, max_size=5))
def test_hostile_same_report_property(tmp_path_factory: pytest.TempPathFactory,
                                      digests: list[str | None]) -> None:
    """Whatever the runners built: exit 0 only when every runner gave one same digest; a
    missing digest is never counted as agreeing."""
    root = tmp_path_factory.mktemp("runs")
    paths = [write_run(root / f"r{i}", [result("treatment", 1, d, f"m{i}")])
             for i, d in enumerate(digests)]
    merged = merge_runs(paths)
    real = {d for d in digests if d}
    want = 1 if len(real) > 1 else 2 if None in digests else 0
    assert merged.exit_code == want
    assert merged.data["cross_machine_reproducible"] is (want == 0)


@given(st.lists(st.tuples(st.sampled_from([D1, D2, None]), st.booleans()), min_size=1,
                max_size=5))
def test_hostile_same_report_unknown_inputs_are_never_equal(
        tmp_path_factory: pytest.TempPathFactory,
        runs: list[tuple[str | None, bool]]) -> None:
    """Issue 31's absence rule in `report`: a result whose Dockerfile or context hash was not
    recorded is matched with no other runner's, another unknown included, so it can never
    make a group "same digest"; exit 0 only when every runner recorded its inputs and gave
    one same digest."""
    root = tmp_path_factory.mktemp("runs")
    paths = []
    for i, (digest, recorded) in enumerate(runs):
        r = result("treatment", 1, digest, f"m{i}")
        if not recorded:
            r["inputs"]["dockerfile_sha256"] = None
        paths.append(write_run(root / f"r{i}", [r]))
    merged = merge_runs(paths)
    known = [d for d, rec in runs if rec]
    unknown_built = any(d for d, rec in runs if not rec)
    if merged.exit_code == 0:
        assert all(rec for _d, rec in runs) and None not in known and len(set(known)) == 1
    for g in merged.data["groups"]:
        if g["inputs_unknown"]:
            assert g["verdict"] != "same digest"
            assert sum(len(w) for w in g["digests"].values()) + len(g["no_digest"]) == 1
    if unknown_built:
        assert any("recorded no dockerfile_sha256" in m for m in merged.data["missing"])
        assert merged.data["cross_machine_reproducible"] is False
