"""The rule registry: each check is a small function registered with its public Rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from servelab.findings import Finding, Rule, Severity
from servelab.k8s.measured import Measured
from servelab.k8s.model import Container, Inventory, K8sObject, Workload, json_path
from servelab.yamlsafe import JsonPath

DOCS_URI = "https://github.com/servelab/servelab/blob/main/docs/k8s-check.md"


@dataclass
class Context:
    """What every check may look at besides the workload itself."""

    inventory: Inventory
    measured: Measured | None = None
    startup_margin: float = 1.5


Check = Callable[[Workload, Context], Iterable[Finding]]

#: Every rule id k8s-check can report, in documentation order.
RULES: dict[str, Rule] = {}
#: (rule, check) pairs, run for each checked workload.
CHECKS: list[tuple[Rule, Check]] = []


def rule(
    rule_id: str, severity: Severity, summary: str, *, rationale: str, fix: str
) -> Callable[[Check], Check]:
    """Register the decorated function as the check of a new rule."""
    meta = Rule(rule_id, severity, summary, rationale, fix, help_uri=f"{DOCS_URI}#{rule_id}")
    RULES[rule_id] = meta

    def decorate(check: Check) -> Check:
        CHECKS.append((meta, check))
        return check

    return decorate


def hit(
    rule_id: str,
    w: Workload,
    message: str,
    path: JsonPath,
    *,
    container: Container | None = None,
    severity: Severity | None = None,
    fix: str | None = None,
    at: K8sObject | None = None,
) -> Finding:
    """A finding at *path* of *at* (default: the workload's object), with its context."""
    meta = RULES[rule_id]
    obj = at or w.obj
    pos = obj.locate(path)
    context = {"object": obj.ref}
    if at is not None and at is not w.obj:
        context["workload"] = w.obj.ref
    if container is not None:
        context["container"] = container.name
    context["path"] = json_path(path)
    return Finding(
        rule_id=rule_id,
        severity=severity or meta.severity,
        message=message,
        file=obj.source.file,
        line=pos.line,
        column=pos.column,
        fix=fix or meta.fix,
        context=context,
    )
