"""The scan stage's output module on captured real Trivy 0.76 reports (no Docker, no Trivy):
SARIF through the one writer, the severity mapping, the report of several targets, and the
gate under the one --fail-on grammar."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from servelab.findings import TRIVY_LEVEL, parse_fail_on
from servelab.report import SARIF_LEVEL, SARIF_SCHEMA, get_reporter
from servelab.scan import render, result, trivy
from servelab.scan import stage as scan
from servelab.spec import ScanPolicy

DATA = Path(__file__).resolve().parents[1] / "data"
SCHEMA = json.loads((DATA / "sarif-2.1.0.schema.json").read_text())


def _result(name: str, policy: ScanPolicy) -> scan.ScanResult:
    text = (DATA / "scan" / "reports" / f"{name}.json").read_text()
    return scan._result_from_report(trivy.parse_report(text), name, "sha256:" + name, policy)


@pytest.mark.parametrize("fail_on", [["CRITICAL", "HIGH"], [], ["LOW"], ["warning"]])
def test_sarif_is_valid_and_holds_the_policy_severities(fail_on: list[str]) -> None:
    policy = ScanPolicy(fail_on=fail_on)
    res = _result("control", policy)
    doc = render.sarif_document(res, policy)
    jsonschema.Draft4Validator(SCHEMA).validate(doc)
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    wanted = parse_fail_on(fail_on).trivy or trivy.SEVERITIES
    assert {r["ruleId"] for r in run["results"]} == {f.id for f in res.findings
                                                     if f.severity in wanted}
    for r in run["results"]:
        rule = rules[r["ruleIndex"]]
        assert rule["id"] == r["ruleId"]
        severity = rule["properties"]["tags"][-1]
        # the one mapping: Trivy severity -> finding severity -> SARIF level
        assert r["level"] == rule["defaultConfiguration"]["level"] == \
            SARIF_LEVEL[TRIVY_LEVEL[severity]]
        assert set(r["partialFingerprints"]) == {"servelabFinding/v1"}
    assert run["automationDetails"]["id"] == "servelab-scan/sha256:control"


def test_scan_and_findings_sarif_share_one_writer() -> None:
    """Both documents come from report.sarif_log: same schema URI and the same driver."""
    from servelab.findings import FindingsReport

    policy = ScanPolicy(fail_on=[])
    scan_doc = render.sarif_document(_result("control", policy), policy)
    findings_doc = json.loads(get_reporter("sarif").render(FindingsReport("t", [], {}, [])))
    assert scan_doc["$schema"] == findings_doc["$schema"] == SARIF_SCHEMA
    assert scan_doc["runs"][0]["tool"]["driver"]["name"] == "servelab"
    drop_rules = [{k: v for k, v in d["runs"][0]["tool"]["driver"].items() if k != "rules"}
                  for d in (scan_doc, findings_doc)]
    assert drop_rules[0] == drop_rules[1]


def test_a_rule_per_advisory_described_by_its_most_severe_finding() -> None:
    policy = ScanPolicy(fail_on=[])
    res = _result("control", policy)
    doc = render.sarif_document(res, policy)
    ids = [r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]]
    assert len(ids) == len(set(ids))
    assert ids == list(dict.fromkeys(f.id for f in result._sort(res.findings)))


def test_report_of_several_targets_says_what_was_shared() -> None:
    policy = ScanPolicy()
    control, treatment = _result("control", policy), _result("treatment", policy)
    diff = scan.compare(control, treatment)
    text = render.render_report([control, treatment, treatment], [None, diff, diff], "text")
    assert "gate FAILED: 3 finding(s) at CRITICAL, HIGH" in text
    assert "compared with control: 1 new, 4 fixed, 1 unchanged" in text
    assert text.endswith("3 target(s), 2 distinct digest(s): scanned 2 time(s), "
                         "1 result(s) shared\n")
    md = render.render_report([control, treatment], [None, diff], "markdown")
    assert md.count("### Vulnerability scan:") == 2
    assert "| MEDIUM | 2 | 1 | 1 |" in md
    doc = json.loads(render.render_report([control], [None], "json"))
    assert doc["passed"] is False and doc["scans"] == 1
    assert doc == json.loads(json.dumps(render.scan_document([control], [None])))


@pytest.mark.parametrize(("fail_on", "failing"), [
    (["error"], {"CVE-2099-2001", "github-pat", "CVE-2099-1001"}),
    (["warning"], {"CVE-2099-2001", "github-pat", "CVE-2099-1001", "CVE-2099-1002"}),
    (["info"], {"CVE-2099-2001", "github-pat", "CVE-2099-1001", "CVE-2099-1002",
                "CVE-2099-1003"}),
    (["MEDIUM"], {"CVE-2099-1002"}),
    (["none"], set()),
])
def test_gate_takes_the_one_grammar(fail_on: list[str], failing: set[str]) -> None:
    policy = ScanPolicy(fail_on=fail_on)
    outcome = scan.gate(_result("control", policy), policy)
    assert {f.id for f in outcome.failing} == failing
    assert outcome.passed == (not failing)
