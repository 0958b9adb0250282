"""Drive the Trivy binary: DB checks and download, image scans, SBOMs, and its JSON parsed.

API::

    trivy = Trivy(TrivyConfig(cache_dir=Path(...), offline=True, timeout_s=1800))
    db = trivy.ensure_db(max_age_hours=168)        # DbInfo; CapabilityError when unusable
    with prepared_input(target, run_id) as inp:    # servelab.image.layout: OCI dir / docker
        report = trivy.scan(inp, json_out=path)    # tar / image ref; TrivyReport (fail-closed)
    trivy.cyclonedx(path, sbom_out)                # CycloneDX SBOM from the same JSON

Preparing the image (unpacking an OCI archive, narrowing a multi-platform layout to one
platform, the digest repeats are shared by) is OCI work: :mod:`servelab.image.layout`.

Every call passes ``--disable-telemetry --skip-version-check --skip-check-update`` (where the
subcommand has them; ``trivy convert`` has none and makes no connection), and in offline mode
``--skip-db-update --skip-java-db-update --offline-scan --skip-vex-repo-update``. The DB is
checked (present, a bbolt file, metadata readable, not older than allowed) before a scan, and
a failed, timed-out or unparsable scan raises :class:`~servelab.errors.CapabilityError`
(exit 3): a failure never reads as zero findings.
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servelab import logs, proc
from servelab.errors import CapabilityError, CommandError
from servelab.image.layout import ImageInput
from servelab.textio import write_file

SEVERITIES = ("UNKNOWN", "LOW", "MEDIUM", "HIGH", "CRITICAL")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}
#: passed to every subcommand that accepts them: Trivy otherwise phones home
QUIET_FLAGS = ("--disable-telemetry", "--skip-version-check", "--skip-check-update")
OFFLINE_FLAGS = (
    "--skip-db-update", "--skip-java-db-update", "--offline-scan", "--skip-vex-repo-update",
)
DB_SCHEMA_VERSION = 2
BOLT_MAGIC = 0xED0CDAED
#: servelab kills Trivy this long after its own --timeout: 5 s plus 5 %, at most 60 s
KILL_GRACE_S = 60.0
DB_HINT = (
    "keep the Trivy cache directory between runs (actions/cache on --cache-dir), run once "
    "without --offline to download the DB, or pass --db-repository MIRROR"
)


def default_cache_dir() -> Path:
    """Trivy's own default: ``$XDG_CACHE_HOME/trivy`` or ``~/.cache/trivy``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trivy"


# ---------------------------------------------------------------------------- the DB


@dataclass(frozen=True)
class DbInfo:
    """What the vulnerability DB in use says about itself (metadata.json)."""

    path: str
    version: int
    updated_at: str
    next_update: str
    downloaded_at: str
    #: the --db-repository it was downloaded from in this run ("" when it was already there)
    repository: str = ""

    def age_hours(self, now: datetime) -> float:
        return (now - _parse_time(self.updated_at)).total_seconds() / 3600.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "version": self.version,
            "updated_at": self.updated_at,
            "next_update": self.next_update,
            "downloaded_at": self.downloaded_at,
            "repository": self.repository,
        }


def _parse_time(text: str) -> datetime:
    """An RFC 3339 time as Go writes it (nanoseconds, Z) as an aware datetime."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text.strip())
    if not m:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    frac = (m.group(2) or ".0")[:7]
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + frac + zone).astimezone(UTC)


def check_bolt_file(path: Path) -> None:
    """CapabilityError unless *path* is a readable bbolt file with a valid meta page."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096 + 80)
    except FileNotFoundError as e:
        raise CapabilityError(f"no Trivy vulnerability DB at {path}", hint=DB_HINT) from e
    except OSError as e:
        raise CapabilityError(f"the Trivy DB {path} cannot be read: {e}", hint=DB_HINT) from e
    if len(head) < 80:
        raise CapabilityError(f"the Trivy DB {path} is truncated", hint=DB_HINT)
    magic, version, page_size = struct.unpack_from("<III", head, 16)
    if magic != BOLT_MAGIC or version != 2:
        raise CapabilityError(
            f"the Trivy DB {path} is corrupt (not a bbolt database)",
            hint="delete it and download it again; " + DB_HINT,
        )
    if not _meta_valid(head, 0):
        raise CapabilityError(
            f"the Trivy DB {path} is corrupt (bad meta page checksum, page size {page_size})",
            hint="delete it and download it again; " + DB_HINT,
        )


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _meta_valid(data: bytes, offset: int) -> bool:
    start = offset + 16
    stored = struct.unpack_from("<Q", data, start + 56)[0]
    return bool(stored == _fnv1a64(data[start : start + 56]))


def read_db_info(cache_dir: Path) -> DbInfo:
    """The DB's metadata; CapabilityError when the DB or its metadata is missing or bad."""
    db_dir = cache_dir / "db"
    check_bolt_file(db_dir / "trivy.db")
    meta_path = db_dir / "metadata.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        info = DbInfo(
            path=str(db_dir / "trivy.db"),
            version=int(meta["Version"]),
            updated_at=str(meta["UpdatedAt"]),
            next_update=str(meta.get("NextUpdate", "")),
            downloaded_at=str(meta.get("DownloadedAt", "")),
        )
        _parse_time(info.updated_at)
    except FileNotFoundError as e:
        raise CapabilityError(f"the Trivy DB has no metadata ({meta_path})", hint=DB_HINT) from e
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CapabilityError(
            f"the Trivy DB metadata {meta_path} is unreadable: {e}", hint=DB_HINT
        ) from e
    if info.version != DB_SCHEMA_VERSION:
        raise CapabilityError(
            f"the Trivy DB in {db_dir} has schema version {info.version}; this Trivy reads "
            f"version {DB_SCHEMA_VERSION}",
            hint="download a current DB: " + DB_HINT,
        )
    return info


def check_db_age(info: DbInfo, max_age_hours: float, now: datetime) -> None:
    """CapabilityError when the DB was updated more than *max_age_hours* ago."""
    age = info.age_hours(now)
    if age > max_age_hours:
        raise CapabilityError(
            f"the Trivy DB was updated at {info.updated_at}, {age:.0f} hours ago: older than "
            f"the {max_age_hours:g} hours allowed (a stale DB misses recent vulnerabilities)",
            hint="update it (run without --offline, or restore a fresh cache) or raise "
            "--max-db-age / scan.maxDbAgeHours",
        )


def needs_download(cache_dir: Path, now: datetime) -> bool:
    """Whether Trivy would fetch the DB: missing, unreadable or past its NextUpdate."""
    try:
        info = read_db_info(cache_dir)
        return not info.next_update or _parse_time(info.next_update) <= now
    except (CapabilityError, ValueError):
        return True


# ---------------------------------------------------------------------------- inputs


def _loopback_registry(ref: str) -> bool:
    host = ref.split("/", 1)[0] if "/" in ref else ""
    return host.split(":")[0] in ("127.0.0.1", "localhost", "[::1]")


# ---------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class TrivyFinding:
    """One vulnerability or secret as Trivy reported it."""

    kind: str  # "vulnerability" or "secret"
    id: str  # CVE/GHSA id, or the secret rule id
    severity: str
    title: str
    target: str
    package: str = ""
    installed_version: str = ""
    fixed_version: str = ""
    status: str = ""
    path: str = ""
    line: int | None = None
    purl: str = ""
    url: str = ""
    data_source: str = ""
    #: why Trivy suppressed it ("" when it was not): "ignored (FILE)", "not_affected (VEX)"
    suppressed: str = ""

    @property
    def fixable(self) -> bool:
        """A fixed version exists (a secret is always fixable: remove it)."""
        return self.kind == "secret" or bool(self.fixed_version)

    def key(self) -> tuple[str, str, str]:
        """Identity across images: the same advisory on the same package (or secret file)."""
        return (self.kind, self.id, self.package if self.kind == "vulnerability" else self.path)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "target": self.target,
            "package": self.package,
            "installed": self.installed_version,
            "fixed": self.fixed_version,
            "status": self.status,
            "fixable": self.fixable,
            "path": self.path,
            "line": self.line,
            "purl": self.purl,
            "url": self.url,
            "data_source": self.data_source,
            "suppressed": self.suppressed,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrivyFinding:
        names = cls.__dataclass_fields__
        kwargs = {k: v for k, v in d.items() if k in names and v is not None}
        kwargs.setdefault("installed_version", d.get("installed") or "")
        kwargs.setdefault("fixed_version", d.get("fixed") or "")
        kwargs["line"] = d.get("line") if isinstance(d.get("line"), int) else None
        kwargs["severity"] = _severity(str(d.get("severity", "UNKNOWN")))
        kwargs.setdefault("kind", "vulnerability")
        kwargs.setdefault("title", "")
        kwargs.setdefault("target", "")
        return cls(**kwargs)


@dataclass
class TrivyReport:
    """The parsed Trivy JSON report."""

    trivy_version: str
    artifact_name: str
    artifact_type: str
    os_family: str
    os_name: str
    image_id: str
    findings: list[TrivyFinding]
    suppressed: list[TrivyFinding]
    packages: int
    targets: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the decoded report itself (for the SBOM conversion)
    document: dict[str, Any] = field(default_factory=dict, repr=False)


def _severity(text: str) -> str:
    s = text.upper()
    return s if s in SEVERITY_RANK else "UNKNOWN"


def _vuln(v: dict[str, Any], target: str, suppressed: str = "") -> TrivyFinding:
    ident = v.get("PkgIdentifier") or {}
    source = v.get("DataSource") or {}
    return TrivyFinding(
        kind="vulnerability",
        id=str(v["VulnerabilityID"]),
        severity=_severity(str(v.get("Severity", "UNKNOWN"))),
        title=str(v.get("Title") or v.get("Description") or "")[:300],
        target=target,
        package=str(v.get("PkgName", "")),
        installed_version=str(v.get("InstalledVersion", "")),
        fixed_version=str(v.get("FixedVersion", "")),
        status=str(v.get("Status", "")),
        path=str(v.get("PkgPath", "")),
        purl=str(ident.get("PURL", "")) if isinstance(ident, dict) else "",
        url=str(v.get("PrimaryURL", "")),
        data_source=str(source.get("ID", "")) if isinstance(source, dict) else "",
        suppressed=suppressed,
    )


def _secret(s: dict[str, Any], target: str, suppressed: str = "") -> TrivyFinding:
    return TrivyFinding(
        kind="secret",
        id=str(s["RuleID"]),
        severity=_severity(str(s.get("Severity", "UNKNOWN"))),
        title=str(s.get("Title", "")),
        target=target,
        path=target.lstrip("/"),
        line=int(s["StartLine"]) if isinstance(s.get("StartLine"), int) else None,
        suppressed=suppressed,
    )


def _modified(m: dict[str, Any], target: str) -> TrivyFinding | None:
    why = f"{m.get('Status', 'suppressed')} ({m.get('Source', '?')})"
    if m.get("Statement"):
        why += f": {m['Statement']}"
    finding = m.get("Finding")
    if not isinstance(finding, dict):
        return None
    if m.get("Type") == "vulnerability":
        return _vuln(finding, target, why)
    if m.get("Type") == "secret":
        return _secret(finding, target, why)
    return None


def _parse_result(r: dict[str, Any], report: TrivyReport) -> None:
    target = str(r.get("Target", ""))
    report.targets.append(target)
    report.packages += len(r.get("Packages") or [])
    for v in r.get("Vulnerabilities") or []:
        report.findings.append(_vuln(v, target))
    for s in r.get("Secrets") or []:
        report.findings.append(_secret(s, target))
    for m in r.get("ExperimentalModifiedFindings") or r.get("ModifiedFindings") or []:
        got = _modified(m, target) if isinstance(m, dict) else None
        if got is not None:
            report.suppressed.append(got)


def parse_report(text: str, *, source: str = "trivy output") -> TrivyReport:
    """Parse Trivy's JSON report; CapabilityError when it is not one (never zero findings)."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise CapabilityError(f"{source} is not JSON: {e}", hint=_PARSE_HINT) from e
    return parse_document(doc, source=source)


_PARSE_HINT = "rerun with -vv to see Trivy's command and output; check the Trivy version"


def parse_document(doc: Any, *, source: str = "trivy output") -> TrivyReport:
    """Like :func:`parse_report`, from the decoded JSON."""
    hint = _PARSE_HINT
    if not isinstance(doc, dict) or doc.get("SchemaVersion") != 2:
        got = doc.get("SchemaVersion") if isinstance(doc, dict) else type(doc).__name__
        raise CapabilityError(
            f"{source} is not a Trivy JSON report of schema version 2 (got {got!r})", hint=hint
        )
    meta = doc.get("Metadata") or {}
    os_info = meta.get("OS") or {}
    report = TrivyReport(
        trivy_version=str((doc.get("Trivy") or {}).get("Version", "unknown")),
        artifact_name=str(doc.get("ArtifactName", "")),
        artifact_type=str(doc.get("ArtifactType", "")),
        os_family=str(os_info.get("Family", "")),
        os_name=str(os_info.get("Name", "")),
        image_id=str(meta.get("ImageID", "")),
        findings=[],
        suppressed=[],
        packages=0,
        document=doc,
    )
    results = doc.get("Results") or []
    try:
        if not isinstance(results, list):
            raise TypeError("Results is not a list")
        for r in results:
            _parse_result(r, report)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CapabilityError(f"{source} has an unexpected shape: {e!r}", hint=hint) from e
    return report


# ---------------------------------------------------------------------------- running


@dataclass(frozen=True)
class TrivyConfig:
    cache_dir: Path
    offline: bool = False
    db_repositories: tuple[str, ...] = ()
    timeout_s: float = 1800.0
    #: the main run's scanners; the secret scan is a run of its own (:meth:`Trivy.secrets`)
    scanners: tuple[str, ...] = ("vuln",)


#: the secret scan's own deadline: Trivy's secret scanner reads every file (a layer of 200,000
#: small text files took 24 s, the vulnerability scan of it 1 s); past it, the scan's result
#: says the secret scan stopped, never "no secrets found"
SECRET_TIMEOUT_ENV = "SERVELAB_SECRET_TIMEOUT"  # noqa: S105 (a variable name)
SECRET_TIMEOUT_S = 120.0


class Trivy:
    """One configured Trivy: the same cache, mode and timeout for every call."""

    def __init__(self, config: TrivyConfig) -> None:
        self.config = config

    def _common(self) -> list[str]:
        c = self.config
        return [
            "--cache-dir", str(c.cache_dir),
            "--timeout", f"{max(1, int(c.timeout_s))}s",
            "--config", "",  # no trivy.yaml from the working directory
        ]

    @property
    def kill_after_s(self) -> float:
        t = self.config.timeout_s
        return t + min(KILL_GRACE_S, 5.0 + 0.05 * t)

    def _run(self, args: list[str], what: str) -> proc.Completed:
        try:
            with logs.progress(f"Trivy {what}") as shown:
                return proc.run(["trivy", *args], timeout=self.kill_after_s,
                                on_stderr=shown.note)
        except CommandError as e:
            timed_out = e.timed_out or "deadline exceeded" in e.stderr
            why = (f"timed out (--timeout {self.config.timeout_s:g}s)" if timed_out
                   else f"failed (exit code {e.returncode})")
            raise CapabilityError(
                f"Trivy {what} {why}; the scan cannot be trusted\n{proc.tail(e.stderr, 8)}",
                hint="raise --timeout / scan.timeoutSeconds for large images"
                if timed_out else "see Trivy's message above; rerun with -vv for the command",
            ) from e

    def ensure_db(self, max_age_hours: float, now: datetime | None = None) -> DbInfo:
        """Download the DB when needed (online: mirrors in order), then check it."""
        now = now or datetime.now(UTC)
        repo = ""
        if not self.config.offline and needs_download(self.config.cache_dir, now):
            repo = self._download_db()
        info = read_db_info(self.config.cache_dir)
        check_db_age(info, max_age_hours, now)
        return DbInfo(**{**info.to_dict(), "repository": repo})

    def _download_db(self) -> str:
        repos = list(self.config.db_repositories) or [""]
        errors: list[str] = []
        for repo in repos:
            args = ["image", "--download-db-only", *QUIET_FLAGS, "--no-progress",
                    *self._common()]
            if repo:
                args += ["--db-repository", repo]
            try:
                where = repo or "Trivy's default repository"
                with logs.progress(f"Trivy DB download from {where}") as shown:
                    proc.run(["trivy", *args], timeout=self.kill_after_s,
                             on_stderr=shown.note)
                return repo or "(Trivy default)"
            except CommandError as e:
                errors.append(f"{repo or 'Trivy default'}: {_last_line(e.stderr)}")
        raise CapabilityError(
            "the Trivy DB could not be downloaded from any repository:\n  "
            + "\n  ".join(errors),
            hint="pass a reachable mirror with --db-repository (tried in order), or restore "
            "a cached DB and use --offline",
        )

    def scan_args(self, inp: ImageInput, *, ignore_file: Path | None = None,
                  vex: Path | None = None, scanners: tuple[str, ...] = ()) -> list[str]:
        """The arguments of ``trivy image`` writing the JSON report (all packages listed)."""
        c = self.config
        args = ["image", *QUIET_FLAGS, "--no-progress", *self._common(),
                "--skip-db-update", "--format", "json", "--list-all-pkgs",
                "--scanners", ",".join(scanners or c.scanners), "--show-suppressed",
                "--ignorefile", str(ignore_file) if ignore_file else ""]
        if c.offline:
            args += [f for f in OFFLINE_FLAGS if f != "--skip-db-update"]
        if vex is not None:
            args += ["--vex", str(vex)]
        if inp.image is not None:
            if inp.platform:
                args += ["--platform", inp.platform]
            if c.offline:
                src = "docker,containerd" + (",remote" if _loopback_registry(inp.image) else "")
                args += ["--image-src", src]
            args.append(inp.image)
        else:
            args += ["--input", str(inp.path)]
        return args

    def scan(self, inp: ImageInput, *, json_out: Path, ignore_file: Path | None = None,
             vex: Path | None = None) -> TrivyReport:
        """Scan *inp*, write Trivy's JSON to *json_out*, and return it parsed."""
        args = self.scan_args(inp, ignore_file=ignore_file, vex=vex)
        done = self._run([*args, "--output", str(json_out)], f"scan of {inp.target}")
        return _report_of(json_out, done.stderr, f"report on {inp.target}")

    def secrets(self, inp: ImageInput, *, json_out: Path, deadline_s: float,
                ignore_file: Path | None = None, vex: Path | None = None) -> TrivyReport | None:
        """The secret scan of *inp*, a Trivy run of its own under *deadline_s* (Trivy's
        ``--timeout``, and the process killed a little after); None when it stopped at that
        deadline: the caller must then say the secret scan is incomplete."""
        args = self.scan_args(inp, ignore_file=ignore_file, vex=vex, scanners=("secret",))
        args[args.index("--timeout") + 1] = f"{max(1, int(deadline_s))}s"
        try:
            with logs.progress(f"Trivy secret scan of {inp.target}") as shown:
                done = proc.run(["trivy", *args, "--output", str(json_out)],
                                timeout=deadline_s + min(KILL_GRACE_S, 5.0 + 0.05 * deadline_s),
                                on_stderr=shown.note)
        except CommandError as e:
            if e.timed_out or "deadline exceeded" in e.stderr:
                return None
            raise CapabilityError(
                f"Trivy secret scan of {inp.target} failed (exit code {e.returncode}); the "
                f"scan cannot be trusted\n{proc.tail(e.stderr, 8)}",
                hint="see Trivy's message above; rerun with -vv for the command") from e
        return _report_of(json_out, done.stderr, f"secret report on {inp.target}")

    def cyclonedx(self, report: TrivyReport, out: Path) -> None:
        """A CycloneDX SBOM (packages only, like ``trivy image --format cyclonedx``)."""
        doc = report.document
        packages_only = {**doc, "Results": [
            {k: v for k, v in r.items() if k not in _FINDING_KEYS}
            for r in doc.get("Results") or [] if isinstance(r, dict)
        ]}
        tmp = out.with_name(f".{out.name}.packages.json")
        write_file(tmp, json.dumps(packages_only), what="the SBOM's package list")
        try:
            self._run(["convert", *self._common(), "--format", "cyclonedx",
                       "--output", str(out), str(tmp)], "SBOM conversion")
        finally:
            tmp.unlink(missing_ok=True)
        try:
            with out.open("rb") as fh:
                head = fh.read(4096)
        except OSError as e:
            raise CapabilityError(f"Trivy wrote no SBOM ({out}): {e}") from e
        if b'"bomFormat": "CycloneDX"' not in head and b'"bomFormat":"CycloneDX"' not in head:
            raise CapabilityError(f"Trivy's SBOM {out} is not a CycloneDX document")


_FINDING_KEYS = ("Vulnerabilities", "Secrets", "ExperimentalModifiedFindings", "ModifiedFindings")


def _warnings(stderr: str) -> list[str]:
    out = []
    for line in stderr.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1] in ("WARN", "ERROR"):
            out.append(" ".join(p for p in parts[2:] if p).strip())
    return out


def _last_line(text: str) -> str:
    rows = [r for r in text.strip().splitlines() if r.strip()]
    return rows[-1][-300:] if rows else "(no output)"


def _report_of(json_out: Path, stderr: str, what: str) -> TrivyReport:
    """The report Trivy wrote to *json_out* (its *what*), parsed, with its stderr warnings."""
    try:
        text = json_out.read_text(encoding="utf-8")
    except OSError as e:
        raise CapabilityError(f"Trivy wrote no {what}: {e}") from e
    report = parse_report(text, source=f"Trivy's {what}")
    report.warnings = _warnings(stderr)
    return report
