"""The real Trivy on images built by the tests: gate, policy, compare, sharing, outputs."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import scanfixtures
from scanfixtures import DATA, Image

from servelab.scan import render
from servelab.scan import stage as scan
from servelab.spec import ScanPolicy

pytestmark = [pytest.mark.docker, pytest.mark.trivy]

SARIF_SCHEMA = Path(__file__).resolve().parents[1] / "data" / "sarif-2.1.0.schema.json"
POLICIES = sorted((DATA / "policies").iterdir())


def _scanner(cache: Path, **policy: object) -> scan.Scanner:
    return scan.Scanner(ScanPolicy(**policy), cache_dir=cache, offline=True)  # type: ignore[arg-type]


def _ids(findings: list[scan.TrivyFinding]) -> set[str]:
    return {f.id for f in findings}


def test_vulnerable_image_fails_the_gate(
    images: dict[str, Image], trivy_cache: Path, tmp_path: Path
) -> None:
    img = images["control"]
    res = _scanner(trivy_cache).scan(img.archive, digest=img.digest, out_dir=tmp_path)
    assert {f.id: f.severity for f in res.findings} == img.spec.expect
    assert res.gate is not None and not res.gate.passed
    assert {(f.id, f.severity) for f in res.gate.failing} == {
        ("CVE-2099-2001", "CRITICAL"), ("github-pat", "CRITICAL"), ("CVE-2099-1001", "HIGH")
    }
    openssl = next(f for f in res.findings if f.id == "CVE-2099-1001")
    assert (openssl.package, openssl.installed_version, openssl.fixed_version) == (
        "openssl", "3.0.11-1~deb12u2", "3.0.13-1~deb12u1")
    assert res.trivy_version == "0.76.0"
    assert res.db is not None and res.db.updated_at
    assert not res.shared


def test_fixed_image_passes(images: dict[str, Image], trivy_cache: Path, tmp_path: Path) -> None:
    img = images["treatment"]
    res = _scanner(trivy_cache).scan(img.layout, out_dir=tmp_path)
    assert res.digest == img.digest
    assert {f.id: f.severity for f in res.findings} == img.spec.expect
    assert res.gate is not None and res.gate.passed


@pytest.mark.parametrize("policy_file", POLICIES, ids=lambda p: p.name)
def test_ignore_file_and_vex_suppress_exactly(
    policy_file: Path, images: dict[str, Image], trivy_cache: Path, tmp_path: Path
) -> None:
    want = scanfixtures.read_expect_header(policy_file)
    key = "vex" if "vex" in policy_file.name else "ignore_file"
    img = images["control"]
    res = _scanner(trivy_cache, **{key: policy_file}).scan(img.layout, out_dir=tmp_path)
    assert _ids(res.suppressed) == want
    assert _ids(res.findings) == set(img.spec.expect) - want


def test_ignore_unfixed_suppresses_only_unfixed(
    images: dict[str, Image], trivy_cache: Path, tmp_path: Path
) -> None:
    img = images["control"]
    res = _scanner(trivy_cache, ignore_unfixed=True).scan(img.layout, out_dir=tmp_path)
    assert _ids(res.suppressed) == {"CVE-2099-1002"}
    assert _ids(res.findings) == set(img.spec.expect) - {"CVE-2099-1002"}
    assert all(f.fixable for f in res.findings)


def test_control_vs_treatment(images: dict[str, Image], trivy_cache: Path,
                              tmp_path: Path) -> None:
    s = _scanner(trivy_cache)
    control = s.scan(images["control"].archive, out_dir=tmp_path / "c")
    treatment = s.scan(images["treatment"].archive, out_dir=tmp_path / "t")
    diff = scan.compare(control, treatment)
    assert _ids(diff.new) == {"CVE-2099-2002"}
    assert _ids(diff.fixed) == {"CVE-2099-1001", "CVE-2099-1003", "CVE-2099-2001", "github-pat"}
    assert _ids(diff.unchanged) == {"CVE-2099-1002"}
    md = render.render_markdown(treatment, diff)
    assert "1 new, 4 fixed, 1 unchanged" in md


def test_same_digest_is_scanned_once(
    images: dict[str, Image], trivy_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _scanner(trivy_cache)
    calls: list[str] = []
    real = s.trivy.scan
    monkeypatch.setattr(s.trivy, "scan", lambda inp, **kw: calls.append(inp.target)
                        or real(inp, **kw))
    img = images["control"]
    first = s.scan(img.archive, digest=img.digest, out_dir=tmp_path / "1")
    second = s.scan(img.layout, digest=img.digest, out_dir=tmp_path / "2")
    assert calls == [str(img.archive)]
    assert second.shared and not first.shared
    assert second.scanned_target == str(img.archive)
    assert any("not scanned again" in n for n in second.notes)
    assert second.to_dict()["findings"] == first.to_dict()["findings"]
    for name in ("trivy.json", "sbom.cdx.json", "scan.sarif", "scan.json", "scan.md"):
        assert (tmp_path / "2" / name).is_file(), name
    assert (tmp_path / "2" / "scan.sarif").read_bytes() == (tmp_path / "1" / "scan.sarif"
                                                            ).read_bytes()
    assert json.loads((tmp_path / "2" / "scan.json").read_text())["shared"] is True


def test_sarif_is_valid_and_holds_only_policy_severities(
    images: dict[str, Image], trivy_cache: Path, tmp_path: Path
) -> None:
    img = images["control"]
    res = _scanner(trivy_cache, fail_on=["CRITICAL", "HIGH"]).scan(img.layout, out_dir=tmp_path)
    doc = json.loads((tmp_path / "scan.sarif").read_text())
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(doc)
    run = doc["runs"][0]
    got = {(r["ruleId"], run["tool"]["driver"]["rules"][r["ruleIndex"]]["properties"]
            ["tags"][-1]) for r in run["results"]}
    assert got == {("CVE-2099-2001", "CRITICAL"), ("github-pat", "CRITICAL"),
                   ("CVE-2099-1001", "HIGH")}
    assert len(res.findings) > len(run["results"])  # MEDIUM and LOW were left out
    assert all(r["level"] == "error" for r in run["results"])
    assert run["properties"]["digest"] == img.digest


def test_sbom_is_valid_cyclonedx(images: dict[str, Image], trivy_cache: Path,
                                 tmp_path: Path) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    _scanner(trivy_cache).scan(images["treatment"].archive, out_dir=tmp_path)
    text = (tmp_path / "sbom.cdx.json").read_text()
    doc = json.loads(text)
    version = SchemaVersion.from_version(doc["specVersion"])
    assert JsonStrictValidator(version).validate_str(text) is None
    names = {c["name"]: c.get("version") for c in doc["components"]}
    assert names["openssl"] == "3.0.13-1~deb12u1"
    assert names["urllib3"] == "2.2.1"
    assert not doc.get("vulnerabilities")  # an inventory: findings live in JSON and SARIF


def test_image_in_the_engine(loaded_control: str, images: dict[str, Image],
                             trivy_cache: Path, tmp_path: Path) -> None:
    s = _scanner(trivy_cache)
    res = s.scan(loaded_control, out_dir=tmp_path)
    assert res.digest == images["control"].digest  # containerd store: ID = manifest digest
    assert _ids(res.findings) == set(images["control"].spec.expect)
