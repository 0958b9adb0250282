"""The one --fail-on grammar (servelab.findings.parse_fail_on): both vocabularies, one mapping."""

from __future__ import annotations

import pytest

from servelab.errors import InputError
from servelab.findings import (
    FAIL_ON_WORDS,
    TRIVY_LEVEL,
    TRIVY_SEVERITIES,
    Finding,
    FindingsReport,
    Severity,
    parse_fail_on,
    reaches,
)

E, W, N = Severity.ERROR, Severity.WARNING, Severity.INFO


@pytest.mark.parametrize(("value", "levels", "trivy"), [
    # finding levels: that level and above; on Trivy, every severity mapped at or above it
    ("error", {E}, ("CRITICAL", "HIGH")),
    ("warning", {E, W}, ("CRITICAL", "HIGH", "MEDIUM")),
    ("info", {E, W, N}, TRIVY_SEVERITIES),
    ("none", set(), ()),
    # Trivy severities: each one itself; on findings, its level and above
    ("CRITICAL,HIGH", {E}, ("CRITICAL", "HIGH")),
    ("HIGH", {E}, ("HIGH",)),
    ("medium", {E, W}, ("MEDIUM",)),
    ("low", {E, W, N}, ("LOW",)),
    ("UNKNOWN", {E, W, N}, ("UNKNOWN",)),
    # mixed, any case, spaces and repeats
    (" Error , low ,LOW", {E, W, N}, ("CRITICAL", "HIGH", "LOW")),
    ("WARNING", {E, W}, ("CRITICAL", "HIGH", "MEDIUM")),
])
def test_both_vocabularies(value: str, levels: set[Severity], trivy: tuple[str, ...]) -> None:
    got = parse_fail_on(value)
    assert got.levels == levels
    assert got.trivy == trivy
    assert all(got.fails(s) == (s in levels) for s in Severity)
    assert all(got.fails_trivy(t.lower()) == (t in trivy) for t in TRIVY_SEVERITIES)


def test_canonical_text_parses_to_the_same() -> None:
    for value in ("Error,low", "medium", "NONE", "critical,HIGH"):
        got = parse_fail_on(value)
        assert parse_fail_on(got.text) == got
    assert parse_fail_on("Error,low").text == "error,LOW"
    assert parse_fail_on("NONE").text == "none"


def test_a_list_from_the_spec() -> None:
    assert parse_fail_on([]).trivy == ()  # failOn: [] fails on nothing
    assert parse_fail_on(["HIGH", "CRITICAL"]).trivy == ("CRITICAL", "HIGH")


def test_the_mapping_covers_every_trivy_severity() -> None:
    assert set(TRIVY_LEVEL) == set(TRIVY_SEVERITIES)
    assert {w.lower() for w in FAIL_ON_WORDS} == {
        "error", "warning", "info", "none", *(t.lower() for t in TRIVY_SEVERITIES)}


@pytest.mark.parametrize(("value", "needle"), [
    ("SEVERE", "unknown severity 'SEVERE'"),
    ("", "empty"),
    (" , ", "empty"),
    ("none,HIGH", "cannot be combined"),
    ("errors", "unknown severity"),
])
def test_bad_values_are_bad_input(value: str, needle: str) -> None:
    with pytest.raises(InputError) as e:
        parse_fail_on(value)
    assert e.value.exit_code == 2
    assert needle in str(e.value)
    assert e.value.hint


def test_findings_report_gate_takes_trivy_words() -> None:
    report = FindingsReport("t", [Finding("r", W, "warned")], {}, [])
    assert report.fails("MEDIUM") and report.fails("LOW") and report.fails("warning")
    assert not report.fails("HIGH") and not report.fails("error") and not report.fails("none")
    assert reaches(E, "CRITICAL") and not reaches(N, "MEDIUM")
