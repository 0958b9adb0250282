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
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servelab import proc
from servelab.errors import InputError
from servelab.image.layout import ImageInput, prepared_input, target_digest
from servelab.report import sarif_text
from servelab.scan.render import render_markdown, sarif_document
from servelab.scan.result import (
    DESCENDING,
    GateOutcome,
    ScanDiff,
    ScanResult,
    _result_from_report,
    compare,
    gate,
    load_result,
    normalise_fail_on,
    policy_dict,
)
from servelab.scan.trivy import (
    SECRET_TIMEOUT_ENV,
    SECRET_TIMEOUT_S,
    Trivy,
    TrivyConfig,
    TrivyReport,
    default_cache_dir,
)
from servelab.spec import ScanPolicy
from servelab.textio import copy_file, write_file

#: the result types and functions live in :mod:`servelab.scan.result`; named here too, as the
#: stage's API (``from servelab.scan import stage as scan; scan.gate(...)``)
__all__ = [
    "DESCENDING", "FILES", "GateOutcome", "ScanDiff", "ScanResult", "Scanner", "compare", "gate",
    "load_result", "normalise_fail_on", "policy_dict", "write_outputs",
]

FILES = {
    "trivy_json": "trivy.json",
    "sbom": "sbom.cdx.json",
    "sarif": "scan.sarif",
    "json": "scan.json",
    "markdown": "scan.md",
}
#: Trivy's report of the secret scan, a run of its own (:meth:`Scanner._secrets`)
SECRET_JSON = "trivy-secret.json"  # noqa: S105 (a file name)
#: files copied as they are when a digest's result is shared
_SHARED_AS_IS = ("trivy_json", "sbom", "sarif")
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
            secret_scan = self._secrets(inp, report, out_dir)
        self.trivy.cyclonedx(report, out_dir / FILES["sbom"])
        res = _result_from_report(report, target, digest, self.policy)
        res.secret_scan = secret_scan
        if not secret_scan["complete"]:
            res.notes.append(secret_scan["note"])
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

    def _secrets(self, inp: ImageInput, report: TrivyReport, out_dir: Path) -> dict[str, Any]:
        """The secret scan under its own deadline (SERVELAB_SECRET_TIMEOUT): its findings
        join *report*'s; stopped at the deadline, it is said so, never "no secrets found"."""
        deadline = proc.deadline(SECRET_TIMEOUT_ENV, SECRET_TIMEOUT_S)
        found = self.trivy.secrets(inp, json_out=out_dir / SECRET_JSON, deadline_s=deadline,
                                   ignore_file=self.policy.ignore_file, vex=self.policy.vex)
        if found is None:
            note = (f"secret scan stopped at its deadline ({deadline:g} s, "
                    f"{SECRET_TIMEOUT_ENV}): the image's files were not all scanned for "
                    "secrets, so this result says nothing about secrets (not \"no secrets "
                    f"found\"); raise {SECRET_TIMEOUT_ENV} to scan them all")
            return {"complete": False, "deadline_s": deadline, "note": note}
        report.findings.extend(found.findings)
        report.suppressed.extend(found.suppressed)
        report.warnings.extend(found.warnings)
        return {"complete": True, "deadline_s": deadline}

    def _share(self, first: ScanResult, target: str, out_dir: Path,
               start: float) -> ScanResult:
        for key in _SHARED_AS_IS:
            src, dst = Path(first.files[key]), out_dir / FILES[key]
            if src.resolve() != dst.resolve():
                copy_file(dst, src, what=f"the scan's {key}")
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
    :mod:`servelab.scan.render`."""
    if sarif:
        write_file(out_dir / FILES["sarif"], sarif_text(sarif_document(result, policy)),
                   what="the scan's SARIF")
    write_file(out_dir / FILES["json"],
               json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n",
               what="the scan's JSON")
    write_file(out_dir / FILES["markdown"], render_markdown(result), what="the scan's report")


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
