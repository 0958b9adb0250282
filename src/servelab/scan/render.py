"""Every output of the scan stage: text, Markdown, the JSON document and the SARIF.

API (no printing)::

    render_text(result, diff) / render_markdown(result, diff)  # one image
    render_report(results, diffs, fmt)     # `servelab scan`'s report: text, markdown or json
    scan_document(results, diffs)          # the JSON document of --format json and --json
    sarif_document(result, policy)         # SARIF 2.1.0, through servelab.report.sarif_log

The SARIF holds only the findings whose Trivy severity the policy fails on (all of them when it
fails on none); a severity's SARIF level comes from the one mapping
:data:`servelab.findings.TRIVY_LEVEL`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from servelab import __version__
from servelab.escape import md_code, md_text, terminal_text
from servelab.findings import TRIVY_LEVEL
from servelab.report import (
    SARIF_LEVEL,
    SarifLocation,
    SarifResult,
    SarifRule,
    sarif_log,
    sarif_relative_uri,
)
from servelab.scan.result import DESCENDING, ScanDiff, ScanResult, _sort, normalise_fail_on
from servelab.scan.trivy import TrivyFinding
from servelab.spec import ScanPolicy

FORMATS = ("text", "markdown", "json")
MARKDOWN_ROWS = 200

# ---------------------------------------------------------------------------- report


def scan_document(results: list[ScanResult], diffs: list[ScanDiff | None]) -> dict[str, Any]:
    """The JSON document of ``servelab scan --format json`` and ``--json FILE``."""
    return {
        "tool": "servelab scan",
        "version": __version__,
        "passed": all(r.gate is None or r.gate.passed for r in results),
        "scans": len({r.digest for r in results}),
        "results": [r.to_dict() for r in results],
        "diffs": [d.to_dict() if d else None for d in diffs],
    }


def render_report(results: list[ScanResult], diffs: list[ScanDiff | None], fmt: str) -> str:
    """``servelab scan``'s report on several targets, as text, markdown or json."""
    if fmt == "json":
        return json.dumps(scan_document(results, diffs), indent=2, ensure_ascii=False) + "\n"
    render = render_markdown if fmt == "markdown" else render_text
    parts = [render(r, d) for r, d in zip(results, diffs, strict=True)]
    scans = len({r.digest for r in results})
    if len(results) > 1:
        parts.append(f"{len(results)} target(s), {scans} distinct digest(s): scanned {scans} "
                     f"time(s), {len(results) - scans} result(s) shared\n")
    return ("\n" if fmt == "markdown" else "").join(parts)


# ---------------------------------------------------------------------------- text, Markdown


def _cell(text: str) -> str:
    """Text from the image or Trivy as Markdown (a table cell, a note)."""
    return md_text(text)


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
    # a target's name, Trivy's titles and paths come from the image: one line each, no escapes
    return "\n".join(terminal_text(line) for line in lines) + "\n"


def _finding_rows(findings: list[TrivyFinding], limit: int = MARKDOWN_ROWS) -> list[str]:
    rows = ["| Severity | ID | Package / file | Installed | Fixed | Title |",
            "|---|---|---|---|---|---|"]
    for f in findings[:limit]:
        name = f.package if f.kind == "vulnerability" else f"/{f.path}:{f.line or 1}"
        rows.append(f"| {f.severity} | {md_code(f.id)} | {_cell(name)} | "
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
        f"### Vulnerability scan: {md_code(result.target)}", "",
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
            f"{md_code(f.id)} ({_cell(f.suppressed)})" for f in _sort(result.suppressed)[:50]))
        out.append("")
    if diff is not None:
        out += render_diff_markdown(diff)
    out += [f"> {_cell(n)}" for n in result.notes]
    return "\n".join(out) + "\n"


def render_diff_markdown(diff: ScanDiff) -> list[str]:
    """The comparison with the control or baseline, as Markdown lines."""
    out = [f"#### Compared with {md_code(diff.control)}", "",
           f"{len(diff.new)} new, {len(diff.fixed)} fixed, {len(diff.unchanged)} unchanged.",
           ""]
    for title, items in (("New", diff.new), ("Fixed", diff.fixed)):
        if items:
            out += [f"**{title}**", "", *_finding_rows(items), ""]
    return out


# ---------------------------------------------------------------------------- SARIF

#: GitHub code scanning reads rules' security-severity (critical >= 9, high >= 7, ...)
_SECURITY_SEVERITY = {"CRITICAL": "9.5", "HIGH": "8.0", "MEDIUM": "5.5", "LOW": "2.0",
                      "UNKNOWN": "0.0"}
_PKG_DB = {"debian": "var/lib/dpkg/status", "ubuntu": "var/lib/dpkg/status",
           "alpine": "lib/apk/db/installed"}


def in_sarif(f: TrivyFinding, fail_on: list[str]) -> bool:
    """SARIF holds the severities the policy fails on (all of them when it fails on none)."""
    return not fail_on or f.severity in fail_on


def sarif_level(severity: str) -> str:
    """The SARIF level of a Trivy severity: error, warning or note."""
    return SARIF_LEVEL[TRIVY_LEVEL[severity]]


def _uri(f: TrivyFinding, os_family: str) -> str:
    where = f.path or _PKG_DB.get(os_family, "") or f.target or "image"
    return sarif_relative_uri(where.lstrip("/"))


def _message(f: TrivyFinding) -> str:
    if f.kind == "secret":
        return f"{f.severity} secret ({f.id}): {f.title} in /{f.path}"
    fix = f"fixed in {f.fixed_version}" if f.fixed_version else f"no fix yet ({f.status})"
    return (f"{f.severity} {f.id} in {f.package} {f.installed_version}: {f.title or f.id}; "
            f"{fix}")


def _rule(f: TrivyFinding) -> SarifRule:
    help_text = (
        f"Upgrade {f.package} to {f.fixed_version} or later." if f.fixed_version
        else "Remove the secret from the image and rotate it." if f.kind == "secret"
        else "No fixed version yet: remove the package, or record a VEX statement."
    )
    return SarifRule(
        f.id, f.title or f.id, f.title or f.id, help_text, sarif_level(f.severity),
        help_uri=f.url,
        properties={"security-severity": _SECURITY_SEVERITY[f.severity],
                    "tags": ["security", f.kind, f.severity]},
    )


def _result(f: TrivyFinding, os_family: str) -> SarifResult:
    key = "\0".join(f.key()) + "\0" + f.installed_version
    return SarifResult(
        f.id, sarif_level(f.severity), _message(f), SarifLocation(_uri(f, os_family), f.line or 1),
        fingerprints={"servelabFinding/v1": hashlib.sha256(key.encode()).hexdigest()},
    )


def sarif_document(result: ScanResult, policy: ScanPolicy) -> dict[str, Any]:
    """SARIF 2.1.0 of the findings whose severity the policy fails on."""
    fail_on = normalise_fail_on(policy.fail_on)
    shown = [f for f in _sort(result.findings) if in_sarif(f, fail_on)]
    rules: dict[str, SarifRule] = {}
    for f in shown:  # a rule per advisory, described by its first (most severe) finding
        if f.id not in rules:
            rules[f.id] = _rule(f)
    os_family = result.artifact.get("os", "").split(" ")[0]
    return sarif_log(
        list(rules.values()), [_result(f, os_family) for f in shown],
        automation_id=f"servelab-scan/{result.digest}",
        properties={
            "image": result.target,
            "digest": result.digest,
            "trivyVersion": result.trivy_version,
            "dbUpdatedAt": result.db.updated_at if result.db else "",
            "severities": fail_on or list(DESCENDING),
        },
    )
