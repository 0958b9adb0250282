"""Every fixture under tests/data/lint/{positive,negative} is linted and compared with the
expectations written in it: ``# expect: rule-id`` (the next instruction) or ``rule-id@line``
for positives, ``# negative: rule-id[, ...]`` and no finding at all for negatives."""

from __future__ import annotations

from collections import Counter

import pytest

from servelab.lint import RULES, LintConfig, lint_paths

from .conftest import Case, collect

POSITIVE = collect("positive")
NEGATIVE = collect("negative")


def _lint(case: Case) -> list[tuple[str, int]]:
    report = lint_paths(
        [case.dockerfile],
        build_args=case.build_args,
        health_declared=case.health_declared,
        config=LintConfig(),
        hadolint=False,
    )
    assert report.files == [str(case.dockerfile)]
    return sorted((f.rule_id, f.line or 0) for f in report.findings)


@pytest.mark.parametrize("case", POSITIVE, ids=lambda c: c.path.name)
def test_positive_fixture(case: Case) -> None:
    assert case.expected, f"{case.path} has no '# expect:' line"
    assert _lint(case) == sorted(case.expected)


@pytest.mark.parametrize("case", NEGATIVE, ids=lambda c: c.path.name)
def test_negative_fixture(case: Case) -> None:
    assert case.negative_for, f"{case.path} has no '# negative:' line"
    assert set(case.negative_for) <= set(RULES)
    assert _lint(case) == []


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
