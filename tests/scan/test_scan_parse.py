"""The Trivy report parser, on captured real Trivy 0.76 output, and its fail-closed cases.

Each captured report in tests/data/scan/reports carries what it must parse to under the key
``servelab_expect`` (Trivy and servelab ignore unknown keys).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from servelab.errors import CapabilityError, ExitCode, InputError
from servelab.scan import stage as scan
from servelab.scan import trivy
from servelab.spec import ScanPolicy

DATA = Path(__file__).resolve().parents[1] / "data" / "scan"
REPORTS = sorted((DATA / "reports").glob("*.json"))


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_captured_report(path: Path) -> None:
    text = path.read_text()
    expect = json.loads(text)["servelab_expect"]
    report = trivy.parse_report(text)
    got = {f"{f.id} {f.package or f.path}": f.severity for f in report.findings}
    assert got == expect["findings"]
    assert sorted(f.id for f in report.findings if f.fixable) == expect["fixable"]
    assert sorted(f.id for f in report.suppressed) == expect["suppressed"]
    assert all(f.suppressed for f in report.suppressed)
    assert report.packages == expect["packages"]
    assert report.trivy_version == expect["trivy_version"]
    assert f"{report.os_family} {report.os_name}".strip() == expect["os"]


def test_reports_were_found() -> None:
    assert len(REPORTS) >= 4


@pytest.mark.parametrize("text", [
    "", "not json", "[]", '{"SchemaVersion": 1, "Results": []}', '{"Results": []}',
    '{"SchemaVersion": 2, "ArtifactName": "x", "Results": {"a": 1}}',
    '{"SchemaVersion": 2, "ArtifactName": "x", "Results": [{"Vulnerabilities": [{}]}]}',
])
def test_unparsable_output_fails_closed(text: str) -> None:
    with pytest.raises(CapabilityError) as err:
        trivy.parse_report(text)
    assert err.value.exit_code == ExitCode.MISSING_TOOL


def _result(name: str) -> scan.ScanResult:
    text = (DATA / "reports" / f"{name}.json").read_text()
    return scan._result_from_report(trivy.parse_report(text), name, "sha256:" + name,
                                    ScanPolicy())


def test_gate_names_the_failing_findings() -> None:
    res = _result("control")
    outcome = scan.gate(res, ScanPolicy(fail_on=["HIGH", "CRITICAL"]))
    assert not outcome.passed
    assert outcome.fail_on == ["CRITICAL", "HIGH"]
    assert [(f.id, f.severity) for f in outcome.failing] == [
        ("CVE-2099-2001", "CRITICAL"), ("github-pat", "CRITICAL"), ("CVE-2099-1001", "HIGH")
    ]
    assert scan.gate(res, ScanPolicy(fail_on=[])).passed
    low = scan.gate(res, ScanPolicy(fail_on=["LOW"]))
    assert [f.id for f in low.failing] == ["CVE-2099-1003"]


def test_counts_fixable_and_unfixed() -> None:
    counts = _result("control").counts()
    assert counts["MEDIUM"] == {"total": 1, "fixable": 0, "unfixed": 1}
    assert counts["CRITICAL"] == {"total": 2, "fixable": 2, "unfixed": 0}


def test_compare_sets() -> None:
    diff = scan.compare(_result("control"), _result("treatment"))
    assert {f.id for f in diff.new} == {"CVE-2099-2002"}
    assert {f.id for f in diff.fixed} == {
        "CVE-2099-1001", "CVE-2099-1003", "CVE-2099-2001", "github-pat"
    }
    assert {f.id for f in diff.unchanged} == {"CVE-2099-1002"}
    assert diff.to_dict()["counts"] == {"new": 1, "fixed": 4, "unchanged": 1}


def test_result_round_trips_through_json(tmp_path: Path) -> None:
    res = _result("control")
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(res.to_dict()))
    back = scan.load_result(path)
    assert back.to_dict()["findings"] == res.to_dict()["findings"]
    assert back.gate is not None and not back.gate.passed
    # Trivy's own JSON works as a baseline too
    raw = scan.load_result(DATA / "reports" / "treatment.json")
    assert {f.id for f in raw.findings} == {"CVE-2099-1002", "CVE-2099-2002"}


def test_bad_baseline_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(InputError):
        scan.load_result(path)


def test_unknown_severity_is_bad_input() -> None:
    with pytest.raises(InputError):
        scan.normalise_fail_on(["SEVERE"])


def test_db_age_check() -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)
    info = trivy.DbInfo("x", 2, "2026-01-08T14:00:00.123456789Z", "", "")
    trivy.check_db_age(info, 48, now)
    with pytest.raises(CapabilityError, match="34 hours ago"):
        trivy.check_db_age(info, 24, now)
    assert trivy.DbInfo("x", 2, (now - timedelta(hours=2)).isoformat(), "", "").age_hours(
        now) == pytest.approx(2.0)
