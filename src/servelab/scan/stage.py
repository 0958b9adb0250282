"""The scan stage: Trivy findings under a policy, one scan per digest, gate, compare, outputs.

API (no printing, no exiting; errors are :mod:`servelab.errors` classes)::

    scanner = Scanner(policy, cache_dir=None, offline=None, run_id="...")  # spec.ScanPolicy
    result = scanner.scan(target, digest="sha256:...", out_dir=Path("out"))   # ScanResult
    # a second call with the same digest is not scanned again: result.shared is True and
    # the same files are written into its out_dir
    outcome = gate(result, policy)            # GateOutcome: passed, failing findings
    diff = compare(control, treatment)        # ScanDiff: new, fixed, unchanged
    baseline = load_result(Path("scan.json")) # a stored result (or a raw Trivy JSON report)
    render_markdown(result, diff) / render_text(result, diff) / sarif_document(result, policy)

Files written into ``out_dir``: ``trivy.json`` (Trivy's report), ``sbom.cdx.json``
(CycloneDX), ``scan.sarif`` (only findings whose severity the policy fails on), ``scan.json``
(``ScanResult.to_dict()``) and ``scan.md``. Fail closed: a missing, corrupt or stale DB, a
failing or timed-out Trivy and unparsable output raise CapabilityError (exit 3).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import urllib.parse
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servelab import __version__
from servelab.errors import InputError
from servelab.report import SARIF_SCHEMA
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
    prepared_input,
    target_digest,
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


def normalise_fail_on(values: list[str] | tuple[str, ...]) -> list[str]:
    """Upper-case, validated, most severe first; InputError for an unknown severity."""
    out: list[str] = []
    for v in values:
        s = v.strip().upper()
        if s not in SEVERITY_RANK:
            raise InputError(f"unknown severity {v!r}", hint="use " + ", ".join(DESCENDING))
        if s not in out:
            out.append(s)
    return sorted(out, key=lambda s: -SEVERITY_RANK[s])


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
            if p is not None and not Path(p).is_file():
                raise InputError(f"the {what} {p} does not exist", file=str(p))
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
    """scan.json, scan.md and (unless shared) scan.sarif into *out_dir*."""
    if sarif:
        text = json.dumps(sarif_document(result, policy), indent=2, ensure_ascii=False)
        (out_dir / FILES["sarif"]).write_text(text + "\n", encoding="utf-8")
    (out_dir / FILES["json"]).write_text(
        json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out_dir / FILES["markdown"]).write_text(render_markdown(result), encoding="utf-8")


# ---------------------------------------------------------------------------- SARIF

_LEVEL = {"CRITICAL": "error", "HIGH": "error", "MEDIUM": "warning", "LOW": "note",
          "UNKNOWN": "note"}
#: GitHub code scanning reads rules' security-severity (critical >= 9, high >= 7, ...)
_SECURITY_SEVERITY = {"CRITICAL": "9.5", "HIGH": "8.0", "MEDIUM": "5.5", "LOW": "2.0",
                      "UNKNOWN": "0.0"}
_PKG_DB = {"debian": "var/lib/dpkg/status", "ubuntu": "var/lib/dpkg/status",
           "alpine": "lib/apk/db/installed"}


def in_sarif(f: TrivyFinding, fail_on: list[str]) -> bool:
    """SARIF holds the severities the policy fails on (all of them when it fails on none)."""
    return not fail_on or f.severity in fail_on


def _uri(f: TrivyFinding, os_family: str) -> str:
    where = f.path or _PKG_DB.get(os_family, "") or f.target or "image"
    return urllib.parse.quote(where.lstrip("/"), safe="/:@~-._")


def _message(f: TrivyFinding) -> str:
    if f.kind == "secret":
        return f"{f.severity} secret ({f.id}): {f.title} in /{f.path}"
    fix = f"fixed in {f.fixed_version}" if f.fixed_version else f"no fix yet ({f.status})"
    return (f"{f.severity} {f.id} in {f.package} {f.installed_version}: {f.title or f.id}; "
            f"{fix}")


def _rule(f: TrivyFinding) -> dict[str, Any]:
    help_text = (
        f"Upgrade {f.package} to {f.fixed_version} or later." if f.fixed_version
        else "Remove the secret from the image and rotate it." if f.kind == "secret"
        else "No fixed version yet: remove the package, or record a VEX statement."
    )
    rule: dict[str, Any] = {
        "id": f.id,
        "name": f.id,
        "shortDescription": {"text": f.title or f.id},
        "fullDescription": {"text": f.title or f.id},
        "help": {"text": help_text},
        "defaultConfiguration": {"level": _LEVEL[f.severity]},
        "properties": {
            "security-severity": _SECURITY_SEVERITY[f.severity],
            "tags": ["security", f.kind, f.severity],
        },
    }
    if f.url:
        rule["helpUri"] = f.url
    return rule


def _sarif_result(f: TrivyFinding, index: int, os_family: str) -> dict[str, Any]:
    key = "\0".join(f.key()) + "\0" + f.installed_version
    return {
        "ruleId": f.id,
        "ruleIndex": index,
        "level": _LEVEL[f.severity],
        "message": {"text": _message(f)},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": _uri(f, os_family)},
                "region": {"startLine": max(f.line or 1, 1)},
            },
        }],
        "partialFingerprints": {
            "servelabFinding/v1": hashlib.sha256(key.encode()).hexdigest(),
        },
    }


def sarif_document(result: ScanResult, policy: ScanPolicy) -> dict[str, Any]:
    """SARIF 2.1.0 of the findings whose severity the policy fails on."""
    fail_on = normalise_fail_on(policy.fail_on)
    shown = [f for f in _sort(result.findings) if in_sarif(f, fail_on)]
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for f in shown:
        if f.id not in index:
            index[f.id] = len(rules)
            rules.append(_rule(f))
    os_family = result.artifact.get("os", "").split(" ")[0]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "servelab",
                "semanticVersion": __version__,
                "version": __version__,
                "informationUri": "https://github.com/servelab/servelab",
                "rules": rules,
            }},
            "automationDetails": {"id": f"servelab-scan/{result.digest}"},
            "results": [_sarif_result(f, index[f.id], os_family) for f in shown],
            "properties": {
                "image": result.target,
                "digest": result.digest,
                "trivyVersion": result.trivy_version,
                "dbUpdatedAt": result.db.updated_at if result.db else "",
                "severities": fail_on or list(DESCENDING),
            },
        }],
    }


# ---------------------------------------------------------------------------- text, Markdown

MARKDOWN_ROWS = 200


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _where(f: TrivyFinding) -> str:
    if f.kind == "secret":
        return f"/{f.path}:{f.line or 1}"
    return f"{f.package} {f.installed_version}"


def _provenance(r: ScanResult) -> str:
    db = f"DB updated {r.db.updated_at}" if r.db else "DB unknown"
    return f"Trivy {r.trivy_version or '?'}, {db}"


def _on(r: ScanResult) -> str:
    """", linux/amd64" for a scan of one platform of a multi-platform image."""
    return f", {r.platform}" if len(r.platforms) > 1 else ""


def _scanned(r: ScanResult) -> str:
    if r.shared:
        return f"shared: same digest as {r.scanned_target}, not scanned again"
    return f"scanned in {r.seconds:.1f}s"


def render_text(result: ScanResult, diff: ScanDiff | None = None) -> str:
    """Plain lines for a terminal."""
    g = result.gate
    c = result.counts()
    lines = [
        f"{result.target} ({result.digest}{_on(result)}): {_scanned(result)}; "
        f"{_provenance(result)}",
        "  " + ", ".join(f"{s} {c[s]['total']}" for s in DESCENDING)
        + f"; fixable {sum(v['fixable'] for v in c.values())}, "
        f"unfixed {sum(v['unfixed'] for v in c.values())}, suppressed {len(result.suppressed)}",
    ]
    if g is not None:
        lines.append(f"  gate {'passed' if g.passed else 'FAILED'}: {g.reason}")
        lines += [f"    {f.severity} {f.id} {_where(f)}: {f.title}"
                  + (f" (fixed in {f.fixed_version})" if f.fixed_version else "")
                  for f in g.failing]
    if diff is not None:
        lines.append(f"  compared with {diff.control}: {len(diff.new)} new, "
                     f"{len(diff.fixed)} fixed, {len(diff.unchanged)} unchanged")
        lines += [f"    new {f.severity} {f.id} {_where(f)}" for f in diff.new]
        lines += [f"    fixed {f.severity} {f.id} {_where(f)}" for f in diff.fixed]
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines) + "\n"


def _finding_rows(findings: list[TrivyFinding], limit: int = MARKDOWN_ROWS) -> list[str]:
    rows = ["| Severity | ID | Package / file | Installed | Fixed | Title |",
            "|---|---|---|---|---|---|"]
    for f in findings[:limit]:
        name = f.package if f.kind == "vulnerability" else f"/{f.path}:{f.line or 1}"
        rows.append(f"| {f.severity} | `{_cell(f.id)}` | {_cell(name)} | "
                    f"{_cell(f.installed_version) or '–'} | {_cell(f.fixed_version) or '–'} | "
                    f"{_cell(f.title)} |")
    if len(findings) > limit:
        rows.append(f"| … | {len(findings) - limit} more in scan.json | | | | |")
    return rows


def render_markdown(result: ScanResult, diff: ScanDiff | None = None) -> str:
    """A Markdown section for a GitHub job summary."""
    g = result.gate
    verdict = "passed" if g is None or g.passed else "**failed**"
    out = [
        f"### Vulnerability scan: `{_cell(result.target)}`", "",
        f"Digest `{result.digest}`{_on(result)}, {_scanned(result)}. {_provenance(result)}.",
        "",
        f"Gate {verdict}: {g.reason if g else 'not evaluated'}.", "",
        "| Severity | Total | Fixable | Unfixed |", "|---|---|---|---|",
    ]
    out += [f"| {s} | {v['total']} | {v['fixable']} | {v['unfixed']} |"
            for s, v in result.counts().items()]
    out.append("")
    if result.findings:
        out += [*_finding_rows(_sort(result.findings)), ""]
    if result.suppressed:
        out.append(f"{len(result.suppressed)} suppressed: " + ", ".join(
            f"`{f.id}` ({_cell(f.suppressed)})" for f in _sort(result.suppressed)[:50]))
        out.append("")
    if diff is not None:
        out += render_diff_markdown(diff)
    out += [f"> {_cell(n)}" for n in result.notes]
    return "\n".join(out) + "\n"


def render_diff_markdown(diff: ScanDiff) -> list[str]:
    out = [f"#### Compared with `{_cell(diff.control)}`", "",
           f"{len(diff.new)} new, {len(diff.fixed)} fixed, {len(diff.unchanged)} unchanged.",
           ""]
    for title, items in (("New", diff.new), ("Fixed", diff.fixed)):
        if items:
            out += [f"**{title}**", "", *_finding_rows(items), ""]
    return out
