"""Every fixture under tests/data/k8s: positives report exactly what they expect, negatives nothing.

A fixture states its expectations in leading comments:

* ``# expect: rule-id@line [severity]`` one per expected finding (repeat for duplicates);
* ``# result: results/x.json`` the --result file(s); ``# margin: 2.0``; ``# container: NAME``;
* ``# only: rule-a, rule-b`` compare only these rules (for deliberately partial manifests);
* ``# says: rule-id@line text`` a finding of that rule at that line says *text* (its message
  is checked against the fixture it describes); ``# never-says: text`` no message says it;
* ``# note: text`` a note of the report (said without a finding) contains *text*.

Without ``only``, the findings must equal the expectations exactly, over every rule.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab.findings import Finding
from servelab.k8s import RULES, check_manifests

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
POSITIVE = sorted((DATA / "positive").glob("*.yaml"))
NEGATIVE = sorted((DATA / "negative").glob("*.yaml"))
Reader = Callable[[Path], Any]


def _run(fx: Any) -> list[Finding]:
    report = check_manifests(
        [fx.path], result_paths=fx.results, startup_margin=fx.margin,
        serving_container=fx.container,
    )
    for text in fx.notes:
        assert any(text in n for n in report.notes), f"{fx.path.name}: no note says {text!r}: " \
            f"{report.notes}"
    return [f for f in report.findings if not fx.only or f.rule_id in fx.only]


def _show(findings: list[Finding]) -> str:
    return "\n".join(f"  {f.rule_id}@{f.line} {f.severity.value}: {f.message}" for f in findings)


@pytest.mark.parametrize("path", POSITIVE, ids=lambda p: p.stem)
def test_positive_fixture(path: Path, k8s_fixture: Reader) -> None:
    fx = k8s_fixture(path)
    assert fx.expect, f"{path.name} has no '# expect:' line"
    findings = _run(fx)
    got = Counter((f.rule_id, f.line or 0) for f in findings)
    assert got == fx.expect, f"{path.name}: findings differ from expectations:\n{_show(findings)}"
    with_severity = Counter((f.rule_id, f.line or 0, f.severity.value) for f in findings)
    missing = fx.severities - with_severity
    assert not missing, f"{path.name}: expected severities not found: {dict(missing)}"
    _check_messages(fx, findings)
    for f in findings:
        assert f.file == str(path)
        assert f.context.get("object"), "every finding names its object"
        assert f.fix, "every finding says how to fix it"


def _check_messages(fx: Any, findings: list[Finding]) -> None:
    for rule, line, text in fx.says:
        at = [f.message for f in findings if f.rule_id == rule and (f.line or 0) == line]
        assert any(text in m for m in at), f"{fx.path.name}: no {rule}@{line} says {text!r}: {at}"
    for text in fx.never_says:
        wrong = [f.message for f in findings if text in f.message]
        assert not wrong, f"{fx.path.name}: a message says {text!r}: {wrong}"


@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.stem)
def test_negative_fixture(path: Path, k8s_fixture: Reader) -> None:
    fx = k8s_fixture(path)
    assert not fx.expect, f"{path.name}: a negative fixture expects nothing"
    findings = _run(fx)
    assert not findings, f"{path.name}: unexpected findings:\n{_show(findings)}"


def test_every_rule_has_a_positive_fixture(k8s_fixture: Reader) -> None:
    """Here, or among the --image fixtures (image-provenance needs the image)."""
    with_image = sorted((DATA / "image" / "positive").glob("*.yaml"))
    covered = {rule for path in (*POSITIVE, *with_image) for rule, _ in k8s_fixture(path).expect}
    assert covered == set(RULES), f"rules without a positive fixture: {set(RULES) - covered}"


def test_there_are_fixtures() -> None:
    assert len(POSITIVE) >= 40
    assert len(NEGATIVE) >= 5


def test_a_file_without_workload_is_checked_and_says_so() -> None:
    """Only a Service and a ConfigMap: valid input (not exit 2), and the report says no workload
    was in it instead of naming checks it could not run."""
    report = check_manifests([DATA / "negative" / "no-workload-service-only.yaml"])
    assert not report.findings
    assert any(n.startswith("no workload in the input (only ConfigMap, Service)")
               for n in report.notes), report.notes
    assert not any("requests a GPU" in n for n in report.notes)


#: "Service" as a word of its own ("Service/x", "the Service"), not InferenceService.
SERVICE_WORD = re.compile(r"(?<![A-Za-z])Service\b")
EVERY = sorted([*POSITIVE, *NEGATIVE, *(DATA / "realistic").glob("*.yaml")])


@pytest.mark.parametrize("path", EVERY, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_message_names_a_service_the_input_lacks(path: Path, k8s_fixture: Reader) -> None:
    fx = k8s_fixture(path)
    if re.search(r"^\s*(-\s+)?kind:\s*Service\s*$", path.read_text(), flags=re.MULTILINE):
        return
    said = [f.message for f in _run(fx) if SERVICE_WORD.search(f.message)]
    assert not said, f"{path.name} has no Service, yet: {said}"


@pytest.mark.parametrize("path", [*POSITIVE, *NEGATIVE], ids=lambda p: p.stem)
def test_no_message_prints_an_unset_value(path: Path, k8s_fixture: Reader) -> None:
    """A field the input does not set is never shown as Python's None in a message."""
    fx = k8s_fixture(path)
    report = check_manifests([fx.path], result_paths=fx.results, startup_margin=fx.margin,
                             serving_container=fx.container)
    said = [f.message for f in report.findings if re.search(r"\bNone\b", f.message)]
    assert not said, f"{path.name}: {said}"
