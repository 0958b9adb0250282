"""k8s-check's rules: one shared :class:`~servelab.findings.RuleRegistry`, and how a check
reports a finding at the file, line and field it concerns."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from servelab.findings import Finding, RuleRegistry, Severity
from servelab.k8s.measured import Measured
from servelab.k8s.model import Container, Inventory, K8sObject, Workload, json_path
from servelab.yamlsafe import JsonPath

#: A literal value of a committed Secret: the Secret, its key, and the path of the value.
SecretLiteral = tuple[K8sObject, str, JsonPath]

DOCS_URI = "https://github.com/servelab/servelab/blob/main/docs/k8s-check.md"


@dataclass
class Context:
    """What every check may look at besides the workload itself."""

    inventory: Inventory
    measured: Measured | None = None
    startup_margin: float = 1.5
    #: The workloads being checked, in order (object-level checks run on the first of each)
    checked: list[Workload] = field(default_factory=list)
    #: What a check could not decide (a value not in the manifests, ...), for the report
    notes: list[str] = field(default_factory=list)
    #: The literal values of the Secrets in the manifests (value -> where each is written)
    secret_literals: dict[str, list[SecretLiteral]] = field(default_factory=dict)
    #: (Secret ref, key) already named by a finding on a workload that holds the same value
    secrets_told: set[tuple[str, str]] = field(default_factory=set)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def leads(self, w: Workload) -> bool:
        """Whether *w* is the first checked pod template of its object."""
        return next((c for c in self.checked if c.obj is w.obj), w) is w


Check = Callable[[Workload, Context], Iterable[Finding]]

#: k8s-check's rules and their checks, in documentation order.
REGISTRY: RuleRegistry[Check] = RuleRegistry(docs_uri=f"{DOCS_URI}#")
#: Every rule id k8s-check can report -> its public Rule.
RULES = REGISTRY.rules
#: (rule, check) pairs, run for each checked workload.
CHECKS = REGISTRY.checks
rule = REGISTRY.rule


def object_hit(rule_id: str, obj: K8sObject, message: str, path: JsonPath, *,
               severity: Severity | None = None, fix: str | None = None) -> Finding:
    """A finding on an object that is no workload (a Secret), at *path* of it."""
    meta = RULES[rule_id]
    pos = obj.locate(path)
    return Finding(rule_id=rule_id, severity=severity or meta.severity, message=message,
                   file=obj.source.file, line=pos.line, column=pos.column,
                   fix=fix or meta.fix, context={"object": obj.ref, "path": json_path(path)})


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
    line: int | None = None,
) -> Finding:
    """A finding at *path* of *at* (default: the workload's object), with its context.

    *line* overrides the line of *path* (a line inside a script held in that field).
    """
    meta = RULES[rule_id]
    obj = at or w.obj
    if obj is w.obj and line is None:  # a merged pod: the object that wrote the field
        obj, path = w.source_of(path, container)
    pos = obj.locate(path)
    context = {"object": obj.ref}
    if obj is not w.obj:
        context["workload"] = w.ref
    elif w.part and path[:len(w.pod_path)] == w.pod_path:
        context["part"] = w.part
    if container is not None:
        context["container"] = container.name
    if w.pair:
        context["pair"] = w.pair
    context["path"] = json_path(path)
    return Finding(
        rule_id=rule_id,
        severity=severity or meta.severity,
        message=message,
        file=obj.source.file,
        line=line or pos.line,
        column=pos.column if line in (None, pos.line) else 1,
        fix=fix or meta.fix,
        context=context,
    )
