"""The documentation and --help describe every rule id k8s-check can report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servelab.cli import main
from servelab.k8s import RULE_ORDER, RULES, all_rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "k8s-check.md"


def test_rule_order_lists_every_rule() -> None:
    assert sorted(RULE_ORDER) == sorted(RULES)
    assert list(all_rules()) == list(RULE_ORDER)


def test_docs_have_a_section_per_rule() -> None:
    headings = re.findall(r"^### ([a-z0-9-]+)$", DOC.read_text(), flags=re.MULTILINE)
    assert headings == list(RULE_ORDER)


def test_rules_link_to_their_section() -> None:
    for rid, rule in RULES.items():
        assert rule.help_uri.endswith(f"docs/k8s-check.md#{rid}")
        assert rule.rationale and rule.fix and rule.summary


def test_help_names_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s-check", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for rid in RULES:
        assert rid in out
