"""Reporters: every registered name builds one, and each format says what it must."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from servelab.errors import UsageError
from servelab.findings import Finding, FindingsReport, Rule, Severity
from servelab.report import GITHUB_ANNOTATION_CAP, get_reporter, reporter_names

SARIF_SCHEMA = Path(__file__).resolve().parent.parent / "data" / "sarif-2.1.0.schema.json"


def _report(n: int = 2) -> FindingsReport:
    rule = Rule("demo-rule", Severity.ERROR, "a demo rule", "because", "do this")
    findings = [
        Finding("demo-rule", Severity.ERROR, f"bad thing {i}, with: commas\nand lines",
                file="Dockerfile", line=i + 1, column=2, fix="do this")
        for i in range(n)
    ]
    findings.append(Finding("other", Severity.WARNING, "warned", file="x.yaml", line=3))
    return FindingsReport("servelab test", findings, {"demo-rule": rule}, ["Dockerfile"])


def test_every_registered_name_builds_a_reporter() -> None:
    names = reporter_names()
    assert {"text", "json", "markdown", "sarif", "github"} <= set(names)
    for name in names:
        out = get_reporter(name).render(_report())
        assert out.endswith("\n")
        assert "bad thing" in out or "bad%20thing" in out or "bad thing 0" in out


def test_unknown_reporter_is_usage_error() -> None:
    with pytest.raises(UsageError) as e:
        get_reporter("xml")
    assert e.value.exit_code == 2
    assert "sarif" in str(e.value)


def test_json_round_trips() -> None:
    doc = json.loads(get_reporter("json").render(_report()))
    assert doc["counts"] == {"error": 2, "warning": 1, "info": 0}
    assert doc["findings"][0]["rule"] == "demo-rule"


def test_sarif_is_valid_and_every_rule_is_described() -> None:
    doc = json.loads(get_reporter("sarif").render(_report()))
    # the OASIS schema comes from npm at set-up (scripts/bootstrap.sh)
    jsonschema.validate(doc, json.loads(SARIF_SCHEMA.read_text()))
    run = doc["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for res in run["results"]:
        assert res["ruleId"] in ids
        assert ids[res["ruleIndex"]] == res["ruleId"]
    assert run["results"][0]["level"] == "error"


def test_github_escapes_and_caps() -> None:
    out = get_reporter("github").render(_report(GITHUB_ANNOTATION_CAP + 3))
    lines = out.splitlines()
    errors = [ln for ln in lines if ln.startswith("::error ")]
    assert len(errors) == GITHUB_ANNOTATION_CAP
    assert "3 more finding(s)" in lines[-1]
    # a newline in a message must not start a new workflow command
    assert all(ln.startswith("::") for ln in lines)
    assert "%0A" in errors[0]


def test_markdown_escapes_pipes() -> None:
    r = FindingsReport("t", [Finding("r", Severity.INFO, "a | b")], {}, [])
    assert "a \\| b" in get_reporter("markdown").render(r)
