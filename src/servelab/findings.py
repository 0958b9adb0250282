"""The finding model shared by every checker (validate, lint, k8s-check, scan gate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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
