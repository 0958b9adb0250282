"""A scan's result: the findings under a policy, the gate, the control comparison, and a stored
result read back. Plain data and pure functions; the stage that runs Trivy and writes the files
is :mod:`servelab.scan.stage`, the renderings are :mod:`servelab.scan.render`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from servelab.errors import InputError
from servelab.findings import parse_fail_on
from servelab.scan.trivy import (
    SEVERITIES,
    SEVERITY_RANK,
    DbInfo,
    TrivyFinding,
    TrivyReport,
    parse_report,
)
from servelab.spec import ScanPolicy

DESCENDING = tuple(reversed(SEVERITIES))


def normalise_fail_on(values: str | list[str] | tuple[str, ...]) -> list[str]:
    """The Trivy severities that fail, most severe first, by the one ``--fail-on`` grammar
    (:func:`servelab.findings.parse_fail_on`: ``error`` is CRITICAL, HIGH; ``none`` or an
    empty list is none); InputError for an unknown severity."""
    return list(parse_fail_on(values).trivy)


def policy_dict(policy: ScanPolicy) -> dict[str, Any]:
    return {
        "fail_on": normalise_fail_on(policy.fail_on),
        "ignore_unfixed": policy.ignore_unfixed,
        "ignore_file": str(policy.ignore_file) if policy.ignore_file else None,
        "vex": str(policy.vex) if policy.vex else None,
        "max_db_age_hours": policy.max_db_age_hours,
        "offline": policy.offline,
        "timeout_s": policy.timeout_s,
    }


# ---------------------------------------------------------------------------- results


def _sort(findings: list[TrivyFinding]) -> list[TrivyFinding]:
    return sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], f.id, f.package, f.path))


@dataclass
class GateOutcome:
    passed: bool
    fail_on: list[str]
    failing: list[TrivyFinding]

    @property
    def reason(self) -> str:
        if not self.fail_on:
            return "no severity fails the gate (fail-on: none)"
        if self.passed:
            return f"no finding at {', '.join(self.fail_on)}"
        return f"{len(self.failing)} finding(s) at {', '.join(self.fail_on)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "fail_on": self.fail_on,
            "reason": self.reason,
            "failing": [f.to_dict() for f in self.failing],
        }


@dataclass
class ScanResult:
    """One image's scan: its findings under the policy, where they came from, its files."""

    target: str
    digest: str
    findings: list[TrivyFinding]
    suppressed: list[TrivyFinding] = field(default_factory=list)
    gate: GateOutcome | None = None
    shared: bool = False
    scanned_target: str = ""
    trivy_version: str = ""
    db: DbInfo | None = None
    artifact: dict[str, str] = field(default_factory=dict)
    packages: int = 0
    policy: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: the platform scanned, and every platform of the image (OCI inputs)
    platform: str = ""
    platforms: list[str] = field(default_factory=list)
    #: the secret scan, a Trivy run of its own under its deadline: complete, or stopped at it
    #: (then no secret result exists: never read as "no secrets found")
    secret_scan: dict[str, Any] = field(default_factory=dict)

    def severity_counts(self) -> dict[str, int]:
        out = {s: 0 for s in DESCENDING}
        for f in self.findings:
            out[f.severity] += 1
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Per severity: total, fixable (a fixed version exists) and unfixed."""
        out = {s: {"total": 0, "fixable": 0, "unfixed": 0} for s in DESCENDING}
        for f in self.findings:
            row = out[f.severity]
            row["total"] += 1
            row["fixable" if f.fixable else "unfixed"] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "digest": self.digest,
            "shared": self.shared,
            "scanned_target": self.scanned_target or self.target,
            "trivy_version": self.trivy_version,
            "db": self.db.to_dict() if self.db else None,
            "artifact": self.artifact,
            "platform": self.platform or None,
            "platforms": self.platforms,
            "secret_scan": self.secret_scan or None,
            "packages": self.packages,
            "policy": self.policy,
            "counts": self.counts(),
            "by_severity": self.severity_counts(),
            "fixable": sum(1 for f in self.findings if f.fixable),
            "unfixed": sum(1 for f in self.findings if not f.fixable),
            "gate": self.gate.to_dict() if self.gate else None,
            "findings": [f.to_dict() for f in _sort(self.findings)],
            "suppressed": [f.to_dict() for f in _sort(self.suppressed)],
            "files": self.files,
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScanResult:
        db = d.get("db")
        gate_d = d.get("gate")
        res = cls(
            target=str(d.get("target", "")),
            digest=str(d.get("digest", "")),
            findings=[TrivyFinding.from_dict(f) for f in d.get("findings") or []],
            suppressed=[TrivyFinding.from_dict(f) for f in d.get("suppressed") or []],
            shared=bool(d.get("shared", False)),
            scanned_target=str(d.get("scanned_target", "")),
            trivy_version=str(d.get("trivy_version", "")),
            db=DbInfo(**db) if isinstance(db, dict) else None,
            artifact=dict(d.get("artifact") or {}),
            packages=int(d.get("packages") or 0),
            policy=dict(d.get("policy") or {}),
            files=dict(d.get("files") or {}),
            seconds=float(d.get("seconds") or 0.0),
            notes=list(d.get("notes") or []),
            platform=str(d.get("platform") or ""),
            platforms=[str(p) for p in d.get("platforms") or []],
        )
        if isinstance(gate_d, dict):
            res.gate = GateOutcome(
                bool(gate_d.get("passed")), list(gate_d.get("fail_on") or []),
                [TrivyFinding.from_dict(f) for f in gate_d.get("failing") or []],
            )
        return res


def gate(result: ScanResult, policy: ScanPolicy) -> GateOutcome:
    """Fail when a finding (not suppressed) has a severity the policy fails on."""
    fail_on = normalise_fail_on(policy.fail_on)
    failing = _sort([f for f in result.findings if f.severity in fail_on])
    return GateOutcome(passed=not failing, fail_on=fail_on, failing=failing)


@dataclass
class ScanDiff:
    """Findings of the treatment compared with the control (or a stored baseline)."""

    control: str
    treatment: str
    control_digest: str
    treatment_digest: str
    new: list[TrivyFinding]
    fixed: list[TrivyFinding]
    unchanged: list[TrivyFinding]

    def to_dict(self) -> dict[str, Any]:
        return {
            "control": self.control,
            "treatment": self.treatment,
            "control_digest": self.control_digest,
            "treatment_digest": self.treatment_digest,
            "counts": {
                "new": len(self.new), "fixed": len(self.fixed), "unchanged": len(self.unchanged)
            },
            "new": [f.to_dict() for f in self.new],
            "fixed": [f.to_dict() for f in self.fixed],
            "unchanged": [f.to_dict() for f in self.unchanged],
        }


def compare(control: ScanResult, treatment: ScanResult) -> ScanDiff:
    """New, fixed and unchanged findings, matched by (kind, id, package or secret file)."""
    before = {f.key(): f for f in control.findings}
    after = {f.key(): f for f in treatment.findings}
    return ScanDiff(
        control=control.target,
        treatment=treatment.target,
        control_digest=control.digest,
        treatment_digest=treatment.digest,
        new=_sort([f for k, f in after.items() if k not in before]),
        fixed=_sort([f for k, f in before.items() if k not in after]),
        unchanged=_sort([f for k, f in after.items() if k in before]),
    )


# ---------------------------------------------------------------------------- stored results


def _pick_result(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    if isinstance(doc.get("results"), list):
        results = [r for r in doc["results"] if isinstance(r, dict)]
        digests = {r.get("digest") for r in results}
        if len(results) >= 1 and len(digests) == 1:
            return results[0]
        raise InputError(
            f"{path} holds {len(results)} scan results of {len(digests)} images",
            file=str(path), hint="use a result file of one image as the baseline",
        )
    record = ((doc.get("stages") or {}).get("scan") or {}).get("record")
    if isinstance(record, dict):
        return record
    if isinstance(doc.get("scan"), dict):
        return dict(doc["scan"])
    return doc


def _check_servelab_doc(path: Path, doc: dict[str, Any]) -> None:
    """A run's result.json or summary.json as baseline goes through its schema first (scan's
    own --json document is told apart by its "tool" key)."""
    from servelab.spec import read_result, read_summary

    if doc.get("tool") == "servelab scan" or doc.get("schemaVersion") != 1:
        return
    if "arm" in doc:
        read_result(path)
    elif "results" in doc:
        read_summary(path)


def load_result(path: Path, policy: ScanPolicy | None = None) -> ScanResult:
    """A stored scan result: servelab's scan JSON, a run's result.json, or Trivy's own JSON."""
    from servelab.textio import read_json

    doc = read_json(path, what="baseline scan result",
                    hint="pass the --json output of servelab scan, a run's result.json or "
                    "summary.json, or Trivy's JSON report")
    if not isinstance(doc, dict):
        raise InputError("not a scan result (a JSON object)", file=str(path))
    _check_servelab_doc(path, doc)
    if doc.get("SchemaVersion") == 2 and "ArtifactName" in doc:
        report = parse_report(json.dumps(doc), source=str(path))
        return _result_from_report(report, str(path), report.image_id, policy or ScanPolicy())
    picked = _pick_result(doc, path)
    if "findings" not in picked or not isinstance(picked["findings"], list):
        raise InputError(
            f"{path} is not a servelab scan result (no findings list)", file=str(path),
            hint="pass the scan.json or --json output of servelab scan, or Trivy's JSON report",
        )
    try:
        return ScanResult.from_dict(picked)
    except (TypeError, ValueError, KeyError) as e:
        raise InputError(f"{path} is not a valid scan result: {e}", file=str(path)) from e


# ---------------------------------------------------------------------------- scanning


def _apply_ignore_unfixed(
    findings: list[TrivyFinding], ignore_unfixed: bool
) -> tuple[list[TrivyFinding], list[TrivyFinding]]:
    if not ignore_unfixed:
        return list(findings), []
    keep, drop = [], []
    for f in findings:
        if f.kind == "vulnerability" and not f.fixable:
            drop.append(replace(f, suppressed="ignore-unfixed (no fixed version)"))
        else:
            keep.append(f)
    return keep, drop


def _result_from_report(
    report: TrivyReport, target: str, digest: str, policy: ScanPolicy
) -> ScanResult:
    active, unfixed = _apply_ignore_unfixed(report.findings, policy.ignore_unfixed)
    notes = [f"trivy: {w}" for w in report.warnings]
    if report.packages == 0 and not report.findings:
        notes.append(
            "Trivy found no OS or language packages: an empty result means nothing was "
            "scanned, not that the image is clean"
        )
    res = ScanResult(
        target=target,
        digest=digest,
        findings=active,
        suppressed=[*report.suppressed, *unfixed],
        trivy_version=report.trivy_version,
        artifact={
            "name": report.artifact_name,
            "type": report.artifact_type,
            "os": f"{report.os_family} {report.os_name}".strip(),
            "image_id": report.image_id,
        },
        packages=report.packages,
        policy=policy_dict(policy),
        notes=notes,
    )
    res.gate = gate(res, policy)
    return res
