"""The scan stage: Trivy findings under a policy, one scan per digest, gate, compare, outputs.

API (no printing, no exiting; errors are :mod:`servelab.errors` classes)::

    scanner = Scanner(policy, cache_dir=None, offline=None, run_id="...")  # spec.ScanPolicy
    result = scanner.scan(target, digest="sha256:...", out_dir=Path("out"))   # ScanResult
    # a second call with the same digest is not scanned again: result.shared is True and
    # the same files are written into its out_dir
    outcome = gate(result, policy)            # GateOutcome: passed, failing findings
    diff = compare(control, treatment)        # ScanDiff: new, fixed, unchanged
    baseline = load_result(Path("scan.json")) # a stored result (or a raw Trivy JSON report)

Its text, Markdown, JSON report and SARIF are made by :mod:`servelab.scan.render`.

Files written into ``out_dir``: ``trivy.json`` (Trivy's report), ``sbom.cdx.json``
(CycloneDX), ``scan.sarif`` (only findings whose severity the policy fails on), ``scan.json``
(``ScanResult.to_dict()``) and ``scan.md``. Fail closed: a missing, corrupt or stale DB, a
failing or timed-out Trivy and unparsable output raise CapabilityError (exit 3).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servelab.errors import InputError
from servelab.findings import parse_fail_on
from servelab.image.layout import prepared_input, target_digest
from servelab.report import sarif_text
from servelab.scan.trivy import (
    SEVERITIES,
    SEVERITY_RANK,
    DbInfo,
    Trivy,
    TrivyConfig,
    TrivyFinding,
    TrivyReport,
    default_cache_dir,
    parse_report,
)
from servelab.spec import ScanPolicy

FILES = {
    "trivy_json": "trivy.json",
    "sbom": "sbom.cdx.json",
    "sarif": "scan.sarif",
    "json": "scan.json",
    "markdown": "scan.md",
}
#: files copied as they are when a digest's result is shared
_SHARED_AS_IS = ("trivy_json", "sbom", "sarif")
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


def load_result(path: Path, policy: ScanPolicy | None = None) -> ScanResult:
    """A stored scan result: servelab's scan JSON, a run's result.json, or Trivy's own JSON."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read the baseline {path}: {e}", file=str(path)) from e
    if not isinstance(doc, dict):
        raise InputError(f"{path} is not a scan result", file=str(path))
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


class Scanner:
    """Scans images under one policy; each digest is scanned once per Scanner."""

    def __init__(
        self,
        policy: ScanPolicy,
        *,
        cache_dir: Path | None = None,
        offline: bool | None = None,
        db_repositories: list[str] | None = None,
        timeout_s: float | None = None,
        max_db_age_hours: float | None = None,
        run_id: str = "scan",
    ) -> None:
        normalise_fail_on(policy.fail_on)
        cache = Path(cache_dir or policy.cache_dir or default_cache_dir())
        self.policy = replace(
            policy,
            cache_dir=cache,
            offline=policy.offline if offline is None else offline,
            db_repositories=list(db_repositories or policy.db_repositories),
            timeout_s=int(timeout_s if timeout_s is not None else policy.timeout_s),
            max_db_age_hours=(
                policy.max_db_age_hours if max_db_age_hours is None else max_db_age_hours
            ),
        )
        for what, p in (("ignore file", policy.ignore_file), ("VEX document", policy.vex)):
            if p is not None:
                _check_policy_file(Path(p), what)
        self.trivy = Trivy(TrivyConfig(
            cache_dir=cache,
            offline=self.policy.offline,
            db_repositories=tuple(self.policy.db_repositories),
            timeout_s=float(self.policy.timeout_s),
        ))
        self.run_id = run_id
        self._by_digest: dict[str, ScanResult] = {}

    def scan(self, target: str | Path, *, digest: str | None = None, out_dir: Path,
             platform: str | None = None) -> ScanResult:
        """Scan *target* (image, OCI dir or archive), or share the result of its digest.

        A multi-platform OCI image is scanned for one platform: *platform*, by default the
        host's when the image has it, else its first; the result names it and the others.
        """
        start = time.monotonic()
        digest = digest or target_digest(target, platform)
        out_dir.mkdir(parents=True, exist_ok=True)
        first = self._by_digest.get(digest)
        if first is not None and all(Path(first.files[k]).is_file() for k in _SHARED_AS_IS):
            return self._share(first, str(target), out_dir, start)
        result = self._scan_once(str(target), digest, out_dir, start, platform)
        self._by_digest[digest] = result
        return result

    def _scan_once(self, target: str, digest: str, out_dir: Path, start: float,
                   platform: str | None) -> ScanResult:
        db = self.trivy.ensure_db(self.policy.max_db_age_hours, datetime.now(UTC))
        json_path = out_dir / FILES["trivy_json"]
        with prepared_input(target, self.run_id, platform) as inp:
            report = self.trivy.scan(inp, json_out=json_path,
                                     ignore_file=self.policy.ignore_file, vex=self.policy.vex)
        self.trivy.cyclonedx(report, out_dir / FILES["sbom"])
        res = _result_from_report(report, target, digest, self.policy)
        res.platform, res.platforms = inp.platform or "", list(inp.platforms)
        if len(inp.platforms) > 1:
            others = [p for p in inp.platforms if p != inp.platform]
            res.notes.append(f"multi-platform image ({', '.join(inp.platforms)}): scanned "
                             f"{inp.platform} only; scan {', '.join(others)} with --platform")
        res.db = db
        res.scanned_target = target
        res.files = {k: str(out_dir / v) for k, v in FILES.items()}
        res.seconds = time.monotonic() - start
        write_outputs(res, self.policy, out_dir)
        return res

    def _share(self, first: ScanResult, target: str, out_dir: Path,
               start: float) -> ScanResult:
        for key in _SHARED_AS_IS:
            src, dst = Path(first.files[key]), out_dir / FILES[key]
            if src.resolve() != dst.resolve():
                shutil.copyfile(src, dst)
        note = (f"digest {first.digest} was already scanned (as {first.target}): "
                "result shared, not scanned again")
        res = replace(first, target=target, shared=True,
                      files={k: str(out_dir / v) for k, v in FILES.items()},
                      notes=[*first.notes, note], seconds=time.monotonic() - start)
        write_outputs(res, self.policy, out_dir, sarif=False)
        return res


def write_outputs(result: ScanResult, policy: ScanPolicy, out_dir: Path, *,
                  sarif: bool = True) -> None:
    """scan.json, scan.md and (unless shared) scan.sarif into *out_dir*, made by
    :mod:`servelab.scan.render` (imported here: it imports this module)."""
    from servelab.scan.render import render_markdown, sarif_document

    if sarif:
        (out_dir / FILES["sarif"]).write_text(sarif_text(sarif_document(result, policy)),
                                              encoding="utf-8")
    (out_dir / FILES["json"]).write_text(
        json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out_dir / FILES["markdown"]).write_text(render_markdown(result), encoding="utf-8")


def _check_policy_file(path: Path, what: str) -> None:
    """An ignore file or VEX document Trivy will read: it must exist and be a regular file (a
    pipe or device would hang or feed Trivy without end)."""
    from servelab.image.blob import path_kind

    kind = path_kind(str(path))
    if kind is None:
        raise InputError(f"the {what} {path} does not exist", file=str(path),
                         hint=f"give the path of an existing {what}")
    if kind != "file":
        raise InputError(f"the {what} {path} is not a regular file", file=str(path),
                         hint=f"give a regular file as the {what}, not a pipe, device or folder")
