"""Label selectors, node constraints and int-or-percent values, as Kubernetes reads them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servelab.k8s.model import Workload, as_dict, as_int, as_list
from servelab.yamlsafe import JsonPath


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op = str(expr.get("key")), str(expr.get("operator"))
    values = {str(v) for v in as_list(expr.get("values"))}
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def selector_matches(selector: Any, labels: dict[str, str]) -> bool:
    """A LabelSelector: null selects nothing, ``{}`` selects everything."""
    if not isinstance(selector, dict):
        return False
    wanted = as_dict(selector.get("matchLabels"))
    if any(labels.get(str(k)) != str(v) for k, v in wanted.items()):
        return False
    exprs = [e for e in as_list(selector.get("matchExpressions")) if isinstance(e, dict)]
    return all(_expression_matches(e, labels) for e in exprs)


def service_selects(selector: Any, labels: dict[str, str]) -> bool:
    """A Service selector (a plain map); an empty one selects no pod (endpoints are manual)."""
    if not isinstance(selector, dict) or not selector:
        return False
    return all(labels.get(str(k)) == str(v) for k, v in selector.items())


def scaled(value: Any, total: int, *, round_up: bool) -> int | None:
    """An int-or-percent (``1``, ``"25%"``) applied to *total*; None when unreadable."""
    number = as_int(value)
    if number is not None:
        return number
    if isinstance(value, str) and value.strip().endswith("%"):
        pct = as_int(value.strip()[:-1])
        if pct is None:
            return None
        exact = pct * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return None


@dataclass(frozen=True)
class Requirement:
    """One node requirement: from nodeSelector (operator In) or a required node affinity term."""

    key: str
    operator: str
    values: tuple[str, ...]
    #: Path relative to the workload object.
    path: JsonPath

    def ints(self) -> list[int] | None:
        nums = [as_int(v) for v in self.values]
        if not nums or any(n is None for n in nums):
            return None
        return [n for n in nums if n is not None]


def _terms(w: Workload) -> list[list[Requirement]]:
    base = w.pod_field("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    required = as_dict(as_dict(as_dict(w.pod.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    out: list[list[Requirement]] = []
    for i, term in enumerate(as_list(required.get("nodeSelectorTerms"))):
        reqs: list[Requirement] = []
        for j, expr in enumerate(as_list(as_dict(term).get("matchExpressions"))):
            if not isinstance(expr, dict):
                continue
            values = tuple(str(v) for v in as_list(expr.get("values")))
            path = (*base, "nodeSelectorTerms", i, "matchExpressions", j)
            reqs.append(Requirement(str(expr.get("key")), str(expr.get("operator")), values, path))
        out.append(reqs)
    return out


def node_alternatives(w: Workload) -> list[list[Requirement]]:
    """The ways a pod can be placed: each list holds requirements that all apply (an AND).

    The nodeSelector applies to every alternative; required node affinity terms are ORed.
    Preferred affinity guarantees nothing and is left out.
    """
    selector = [
        Requirement(str(k), "In", (str(v),), w.pod_field("nodeSelector", str(k)))
        for k, v in as_dict(w.pod.get("nodeSelector")).items()
    ]
    terms = _terms(w)
    if not terms:
        return [selector]
    return [selector + t for t in terms]


def guaranteed(w: Workload, test: Callable[[list[Requirement]], bool]) -> bool:
    """Whether every placement the pod can get satisfies *test*."""
    return all(test(alt) for alt in node_alternatives(w))


def requirements_on(w: Workload, keys: set[str]) -> list[Requirement]:
    return [r for alt in node_alternatives(w) for r in alt if r.key in keys]
