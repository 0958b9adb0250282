"""findings.RuleRegistry: the one rule registry behind lint, k8s-check and the GPU rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from servelab.findings import Rule, RuleRegistry, Severity


def test_rule_decorator_registers_rule_and_check_in_order() -> None:
    reg: RuleRegistry[Callable[[int], list[str]]] = RuleRegistry("https://x/docs#")

    @reg.rule("b-rule", Severity.ERROR, "b", rationale="why b", fix="fix b")
    def check_b(n: int) -> list[str]:
        return ["b"] * n

    reg.add(Rule("a-rule", Severity.INFO, "a"))
    assert list(reg) == ["b-rule", "a-rule"]
    assert reg["b-rule"].help_uri == "https://x/docs#b-rule"
    assert reg["b-rule"].rationale == "why b" and reg["b-rule"].fix == "fix b"
    assert [(r.id, c(2)) for r, c in reg.checks] == [("b-rule", ["b", "b"])]
    assert "a-rule" in reg and len(reg) == 2


def test_a_rule_id_registers_once() -> None:
    reg: RuleRegistry[Callable[[], None]] = RuleRegistry()
    reg.add(Rule("x", Severity.INFO, "x"))
    with pytest.raises(ValueError, match="registered twice"):
        reg.add(Rule("x", Severity.ERROR, "again"))
