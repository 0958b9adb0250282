"""Every fixture under tests/data/lint/{positive,negative} is linted and compared with the
expectations written in it: ``# expect: rule-id`` (the next instruction) or ``rule-id@line``,
optionally followed by the severity the finding must have (``# expect: root-user warning``),
for positives; ``# negative: rule-id[, ...]`` and no finding at all for negatives. A fixture
folder with a ``dot-git`` entry is linted as a copy in which it is named ``.git``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from servelab.lint import RULES, LintConfig, lint_paths

from .conftest import Case, collect, materialise

POSITIVE = collect("positive")
NEGATIVE = collect("negative")


def _lint(case: Case, tmp: Path) -> list[tuple[str, int, str]]:
    dockerfile = materialise(case, tmp)
    report = lint_paths(
        [dockerfile],
        build_args=case.build_args,
        health_declared=case.health_declared,
        config=LintConfig(),
        hadolint=False,
    )
    assert report.files == [str(dockerfile)]
    return sorted((f.rule_id, f.line or 0, f.severity.value) for f in report.findings)


@pytest.mark.parametrize("case", POSITIVE, ids=lambda c: c.path.name)
def test_positive_fixture(case: Case, tmp_path: Path) -> None:
    assert case.expected, f"{case.path} has no '# expect:' line"
    found = _lint(case, tmp_path)
    assert [(r, n) for r, n, _s in found] == sorted(case.expected)
    for (rule, line), severity in case.severities.items():
        assert (rule, line, severity) in found


@pytest.mark.parametrize("case", NEGATIVE, ids=lambda c: c.path.name)
def test_negative_fixture(case: Case, tmp_path: Path) -> None:
    assert case.negative_for, f"{case.path} has no '# negative:' line"
    assert set(case.negative_for) <= set(RULES)
    assert _lint(case, tmp_path) == []


def test_every_rule_has_three_fixtures_each_way() -> None:
    pos = Counter(r for c in POSITIVE for r in {rid for rid, _ in c.expected})
    neg = Counter(r for c in NEGATIVE for r in set(c.negative_for))
    short = {
        rid: (pos[rid], neg[rid]) for rid in RULES if pos[rid] < 3 or neg[rid] < 3
    }
    assert short == {}, f"rules with fewer than 3 positive/negative fixtures: {short}"


def test_fixtures_cover_the_hard_syntax() -> None:
    texts = [c.dockerfile.read_text() for c in POSITIVE + NEGATIVE]
    assert any(t.startswith("# escape=`") for t in texts)
    assert any("<<EOF" in t for t in texts)
    assert any("FROM ${" in t or "FROM $" in t for t in texts)
    assert sum(t.count("\nFROM ") + t.startswith("FROM ") >= 2 for t in texts) >= 10
