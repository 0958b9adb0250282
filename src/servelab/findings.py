"""The finding model shared by every checker (validate, lint, k8s-check, scan gate)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Generic, TypeVar

CheckT = TypeVar("CheckT", bound=Callable[..., Any])


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or info)") from None


FAIL_ON_CHOICES = ("error", "warning", "info", "none")


def reaches(severity: Severity, fail_on: str) -> bool:
    """Whether a finding of *severity* fails a check run with ``--fail-on fail_on``."""
    if fail_on == "none":
        return False
    return severity.rank >= Severity.parse(fail_on).rank


@dataclass(frozen=True)
class Rule:
    """A rule's public description: its id is part of servelab's interface."""

    id: str
    severity: Severity
    summary: str
    rationale: str = ""
    fix: str = ""
    help_uri: str = ""


@dataclass
class Finding:
    rule_id: str
    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    fix: str | None = None
    source: str = "servelab"
    #: Extra location context (JSON path, object, container, stage, ...).
    context: dict[str, str] = field(default_factory=dict)

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.file or "", self.line or 0, self.column or 0, self.rule_id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule_id,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "fix": self.fix,
            "source": self.source,
        }
        if self.context:
            out["context"] = dict(self.context)
        return out


@dataclass
class FindingsReport:
    """What a checker returns: findings, the rules they refer to, and what was checked."""

    tool: str
    findings: list[Finding]
    rules: dict[str, Rule]
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=Finding.sort_key)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def fails(self, fail_on: str) -> bool:
        return any(reaches(f.severity, fail_on) for f in self.findings)


class RuleRegistry(Generic[CheckT]):
    """One registry of rules and their checks: lint, k8s-check and the GPU rules each hold one.

    ::

        RULES = RuleRegistry[Check](docs_uri="https://.../docs/rules.md#")
        @RULES.rule("base-unpinned", Severity.ERROR, "summary", rationale="...", fix="...")
        def check_base_unpinned(ctx): ...
        RULES.add(Rule(...))              # a rule with no check function (reported elsewhere)
        RULES.rules["base-unpinned"]      # the public Rule, help_uri filled in
        for rule, check in RULES.checks: ...

    A rule id is registered once: a second registration is a programming error (ValueError).
    """

    def __init__(self, docs_uri: str = "") -> None:
        self.docs_uri = docs_uri
        #: Every rule id, in registration (documentation) order.
        self.rules: dict[str, Rule] = {}
        #: (rule, check) pairs, in registration order.
        self.checks: list[tuple[Rule, CheckT]] = []

    def add(self, rule: Rule) -> Rule:
        """Register *rule* (no check function); its help_uri defaults to the docs anchor."""
        if rule.id in self.rules:
            raise ValueError(f"rule {rule.id!r} is registered twice")
        if not rule.help_uri and self.docs_uri:
            rule = replace(rule, help_uri=f"{self.docs_uri}{rule.id}")
        self.rules[rule.id] = rule
        return rule

    def rule(self, rule_id: str, severity: Severity, summary: str, *, rationale: str,
             fix: str) -> Callable[[CheckT], CheckT]:
        """Register the decorated function as the check of a new rule."""
        meta = self.add(Rule(rule_id, severity, summary, rationale, fix))

        def decorate(check: CheckT) -> CheckT:
            self.checks.append((meta, check))
            return check

        return decorate

    def __getitem__(self, rule_id: str) -> Rule:
        return self.rules[rule_id]

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self.rules

    def __iter__(self) -> Iterator[str]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)
