"""Reporters: every registered name builds one, and each format says what it must."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from servelab.errors import UsageError
from servelab.findings import Finding, FindingsReport, Rule, Severity
from servelab.report import (
    GITHUB_ANNOTATION_CAP,
    SarifLocation,
    SarifResult,
    SarifRule,
    get_reporter,
    reporter_names,
    sarif_log,
    sarif_text,
)

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


def test_sarif_writer_refuses_undescribed_or_repeated_rules() -> None:
    rule = SarifRule("r1", "s", "d", "h", "error")
    with pytest.raises(ValueError, match="undescribed rules: r2"):
        sarif_log([rule], [SarifResult("r2", "error", "m")])
    with pytest.raises(ValueError, match="given twice"):
        sarif_log([rule, rule], [])


def test_sarif_writer_indexes_rules_and_keeps_optional_parts_out() -> None:
    rules = [SarifRule("a", "s", "d", "h", "note"),
             SarifRule("b", "s", "d", "h", "error", help_uri="https://x/b", properties={"p": 1})]
    results = [SarifResult("b", "error", "m", SarifLocation("Dockerfile", 0, 3),
                           fingerprints={"k/v1": "f"}),
               SarifResult("a", "note", "m")]
    doc = sarif_log(rules, results, automation_id="id/1", properties={"image": "x"})
    jsonschema.validate(doc, json.loads(SARIF_SCHEMA.read_text()))
    run = doc["runs"][0]
    assert [r["ruleIndex"] for r in run["results"]] == [1, 0]
    first, second = run["results"]
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": 1,
                                                                   "startColumn": 3}
    assert first["partialFingerprints"] == {"k/v1": "f"}
    assert "locations" not in second and "partialFingerprints" not in second
    a, b = run["tool"]["driver"]["rules"]
    assert "helpUri" not in a and "properties" not in a
    assert b["helpUri"] == "https://x/b" and b["properties"] == {"p": 1}
    assert run["automationDetails"] == {"id": "id/1"} and run["properties"] == {"image": "x"}
    assert sarif_text(doc).endswith("}\n")
    plain = sarif_log([], [])["runs"][0]
    assert list(plain) == ["tool", "results"]


def test_findings_sarif_describes_rules_it_has_no_metadata_for() -> None:
    r = FindingsReport("t", [Finding("unknown-rule", Severity.INFO, "x")], {}, [])
    doc = json.loads(get_reporter("sarif").render(r))
    jsonschema.validate(doc, json.loads(SARIF_SCHEMA.read_text()))
    run = doc["runs"][0]
    assert run["tool"]["driver"]["rules"][0]["defaultConfiguration"] == {"level": "warning"}
    assert run["results"][0]["level"] == "note"
    assert "locations" not in run["results"][0]


def test_report_is_the_only_sarif_writer() -> None:
    """Everything else describes rules and results and calls report.sarif_log."""
    src = Path(__file__).resolve().parents[2] / "src" / "servelab"
    literal = re.compile(r"""["']2\.1\.0["']|sarif-2\.1\.0""")  # the version or schema URI
    writers = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                     if literal.search(p.read_text(encoding="utf-8")))
    assert writers == ["report.py"]


# ----------------------------------------------------------- SARIF artifact location URIs

#: an RFC 3986 relative-path reference as servelab writes one: unreserved characters, "/",
#: "@" and percent-encoded octets; no ":" (a scheme), "#" (a fragment), "?" (a query)
_URI_REF = re.compile(r"^(?:[A-Za-z0-9\-._~/@]|%[0-9A-F]{2})+$")

_HOSTILE_NAMES = ["with space/Dockerfile", "hash#1/Dockerfile", "q?x=1/Dockerfile",
                  "pct%41/Dockerfile", "c:/Dockerfile", "modèle/Döckerfile",
                  "bad\udcff/Dockerfile", "a\\b/Dockerfile"]


@pytest.mark.parametrize("name", _HOSTILE_NAMES, ids=range(len(_HOSTILE_NAMES)))
def test_sarif_artifact_uris_are_percent_encoded(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.parse

    monkeypatch.chdir(tmp_path)
    rep = FindingsReport("lint", [Finding("r1", Severity.ERROR, "m", file=name, line=1)], {})
    doc = json.loads(get_reporter("sarif").render(rep))
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"][
        "artifactLocation"]["uri"]
    assert _URI_REF.match(uri), uri
    assert urllib.parse.unquote(uri, errors="surrogateescape") == name
    jsonschema.validate(doc, json.loads(SARIF_SCHEMA.read_text()))


def test_sarif_absolute_uris_outside_the_directory_are_encoded_file_uris(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "out side#1" / "Dockerfile"
    elsewhere.parent.mkdir()
    elsewhere.write_text("FROM x\n")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    rep = FindingsReport("lint", [Finding("r1", Severity.ERROR, "m", file=str(elsewhere),
                                          line=1)], {})
    uri = json.loads(get_reporter("sarif").render(rep))["runs"][0]["results"][0][
        "locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and "out%20side%231/Dockerfile" in uri


def test_sarif_plain_paths_are_written_as_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other way: an ordinary relative path needs no encoding and gets none."""
    monkeypatch.chdir(tmp_path)
    rep = FindingsReport("lint", [Finding("r1", Severity.ERROR, "m", file="src/app-1_v2.0/"
                                          "Dockerfile", line=1)], {})
    uri = json.loads(get_reporter("sarif").render(rep))["runs"][0]["results"][0][
        "locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/app-1_v2.0/Dockerfile"
