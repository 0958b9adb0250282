"""Output of findings reports, and the one SARIF writer.

Where output is made (docs/output.md): a :class:`~servelab.findings.FindingsReport` (validate,
lint, k8s-check, pin) is rendered by a :class:`Reporter` registered here; the result of a stage
by its package's ``render`` module (``servelab.scan.render``, ``servelab.smoke.render``,
``servelab.build.render``, ``servelab.image.render``, ``servelab.gpu.render``). Every SARIF
document is made by :func:`sarif_log` here, whoever describes the rules and results.

``get_reporter("sarif").render(report)`` returns the text to write. Add a format by
subclassing :class:`Reporter` and decorating it with :func:`register`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from servelab import __version__
from servelab.errors import UsageError
from servelab.escape import command_data, command_property, md_code, md_text, terminal_text
from servelab.findings import (
    VERDICT_PARTLY,
    CoverageNote,
    Finding,
    FindingsReport,
    Rule,
    Severity,
)
from servelab.textio import write_text_atomic

_REGISTRY: dict[str, type[Reporter]] = {}


class Reporter(ABC):
    name: ClassVar[str]
    description: ClassVar[str]

    @abstractmethod
    def render(self, report: FindingsReport) -> str:
        """The whole output for *report*, ending with a newline when non-empty."""


def register(cls: type[Reporter]) -> type[Reporter]:
    _REGISTRY[cls.name] = cls
    return cls


def reporter_names() -> list[str]:
    """Every registered format, in registration order (text first): the --format choices."""
    return list(_REGISTRY)


def get_reporter(name: str) -> Reporter:
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise UsageError(
            f"unknown output format {name!r}",
            hint="use one of: " + ", ".join(reporter_names()),
        ) from None


def _where(f: Finding) -> str:
    parts = [f.file or "-"]
    if f.line is not None:
        parts.append(str(f.line))
        if f.column is not None:
            parts.append(str(f.column))
    return ":".join(parts)


def settings_line(settings: dict[str, Any]) -> str:
    """``settings: FILE (disables: a, b)``: which settings file decided what, in one line."""
    disabled = ", ".join(settings.get("disabled") or []) or "no rule"
    return f"settings: {settings.get('file')} (disables: {disabled})"


@register
class TextReporter(Reporter):
    name = "text"
    description = "human-readable lines: file:line:col severity [rule] message, then the fix"

    def render(self, report: FindingsReport) -> str:
        lines: list[str] = []
        found = report.sorted_findings()
        fixes = _fix_counts(found)
        shown: set[tuple[str | None, str, str]] = set()
        for f in found:
            ctx = "".join(f" ({k}: {v})" for k, v in f.context.items() if k != "path")
            path = f.context.get("path")
            at = f" at {path}" if path else ""
            lines.append(terminal_text(
                f"{_where(f)}: {f.severity.value} [{f.rule_id}] {f.message}{at}{ctx}"))
            key = (f.file, f.rule_id, f.fix or "")
            if f.fix and key not in shown:
                shown.add(key)
                n = fixes[key]
                more = f" (for all {n} [{f.rule_id}] findings in this file)" if n > 1 else ""
                lines.append(f"    fix: {terminal_text(f.fix)}{more}")
        if report.settings:
            lines.append(terminal_text(settings_line(report.settings)))
        lines.extend(f"note: {terminal_text(n)}" for n in report.notes)
        lines.extend(f"{terminal_text(_where_note(n))}: {terminal_text(n.text())}"
                     for n in report.coverage)
        c = report.counts()
        n_files = len(report.files)
        partly = (f"; partly checked: {len(report.coverage)} part(s) not fully read (see "
                  "'not fully checked' above)") if report.coverage else ""
        if report.findings:
            lines.append(
                f"{report.tool}: {len(report.findings)} finding(s) in {n_files} file(s): "
                f"{c['error']} error, {c['warning']} warning, {c['info']} info{partly}"
            )
        elif report.coverage:
            lines.append(f"{report.tool}: {n_files} file(s) {VERDICT_PARTLY}, no findings in "
                         f"what was read; {len(report.coverage)} part(s) not fully read (see "
                         "'not fully checked' above)")
        else:
            lines.append(f"{report.tool}: {n_files} file(s) checked, no findings")
        return "\n".join(lines) + "\n"


def _where_note(n: CoverageNote) -> str:
    if not n.file:
        return "note"
    return f"{n.file}:{n.line}" if n.line else n.file


def _fix_counts(found: list[Finding]) -> dict[tuple[str | None, str, str], int]:
    """How many findings share each (file, rule, fix text): the text report prints a fix
    once per rule per file, at its first finding, however often the rule fires there."""
    counts: dict[tuple[str | None, str, str], int] = {}
    for f in found:
        if f.fix:
            key = (f.file, f.rule_id, f.fix)
            counts[key] = counts.get(key, 0) + 1
    return counts


@register
class JsonReporter(Reporter):
    name = "json"
    description = "one JSON object: tool, version, files, counts, findings, rules"

    def render(self, report: FindingsReport) -> str:
        used = sorted({f.rule_id for f in report.findings})
        doc = {
            "tool": report.tool,
            "version": __version__,
            "files": report.files,
            "counts": report.counts(),
            "findings": [f.to_dict() for f in report.sorted_findings()],
            "rules": {
                rid: {
                    "severity": report.rules[rid].severity.value,
                    "summary": report.rules[rid].summary,
                    "fix": report.rules[rid].fix,
                }
                for rid in used
                if rid in report.rules
            },
            "notes": report.notes,
            "verdict": report.verdict(),
            "coverage": [n.to_dict() for n in report.coverage],
            "settings": report.settings,
        }
        import json  # only for this format: text output needs no json (3 ms of lint's start)

        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


_md_cell = md_text


#: the most bytes of Markdown a findings report renders: under GitHub's 1 MiB of job summary
#: per step (``GITHUB_STEP_SUMMARY``), with room for what else the step writes there
MARKDOWN_LIMIT = 1024 * 1024 - 64 * 1024


@register
class MarkdownReporter(Reporter):
    name = "markdown"
    description = "a Markdown table for a job summary or a PR comment"

    #: the byte budget of one report (a test may lower it)
    limit: ClassVar[int] = MARKDOWN_LIMIT

    def render(self, report: FindingsReport) -> str:
        c = report.counts()
        out = [
            f"### {report.tool}",
            "",
            f"{len(report.files)} file(s), {len(report.findings)} finding(s): "
            f"{c['error']} error, {c['warning']} warning, {c['info']} info",
            "",
        ]
        # rows are added while they fit, most severe first: a huge report (or one huge
        # message) cannot push a job summary past GitHub's limit and break the step
        budget = self.limit - 1024  # the truncation lines and the closing newline
        used = sum(len(x.encode("utf-8")) + 1 for x in out)
        cut = {"finding": 0, "note": 0, "part not fully read": 0}

        def add(line: str, kind: str) -> None:
            nonlocal used
            size = len(line.encode("utf-8")) + 1
            if cut[kind] or used + size > budget:
                cut[kind] += 1
                return
            used += size
            out.append(line)

        if report.findings:
            for line in ("| Severity | Rule | Where | Message | Fix |", "|---|---|---|---|---|"):
                add(line, "finding")
            for f in report.sorted_findings():
                add(f"| {f.severity.value} | {md_code(f.rule_id)} | {md_code(_where(f))} | "
                    f"{_md_cell(f.message)} | {_md_cell(f.fix or '')} |", "finding")
        if cut["finding"]:
            out += ["", f"**truncated: {cut['finding']} more finding(s)** not shown (GitHub keeps "
                    "1 MiB of job summary per step): see the JSON or SARIF output", ""]
        for n in report.notes:
            add(f"> {md_text(n)}", "note")
        if report.coverage:
            out += ["", f"**{VERDICT_PARTLY}**: {len(report.coverage)} part(s) not fully read", ""]
            for note in report.coverage:
                add(f"- {md_text(_where_note(note))}: {md_text(note.text())}",
                    "part not fully read")
        out += [f"**truncated: {n} more {kind}(s)** not shown: see the JSON or SARIF output"
                for kind, n in cut.items() if n and kind != "finding"]
        return "\n".join(out) + "\n"


# -------------------------------------------------------------------------------- SARIF
# The one SARIF writer: the findings reporter below and the scan stage's vulnerability SARIF
# (servelab.scan.render) describe their rules and results with these types and let
# sarif_log() write the document.

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
#: A finding severity's SARIF level.
SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
INFORMATION_URI = "https://github.com/servelab/servelab"


def sarif_plain(text: str) -> str:
    """*text* (it may quote an input: a Dockerfile line, a manifest's name, Trivy's
    description) as a SARIF message or description: lines kept, escape sequences removed,
    other controls, bidi controls and line separators shown escaped
    (:func:`servelab.escape.terminal_text`), as on the terminal."""
    return terminal_text(text, one_line=False)


class SarifRule(NamedTuple):
    """One ``reportingDescriptor`` of the tool's driver."""

    id: str
    summary: str
    description: str
    help: str
    level: str
    help_uri: str = ""
    properties: Mapping[str, Any] = MappingProxyType({})

    def to_dict(self) -> dict[str, Any]:
        rule: dict[str, Any] = {
            "id": self.id,
            "name": self.id,
            "shortDescription": {"text": sarif_plain(self.summary)},
            "fullDescription": {"text": sarif_plain(self.description)},
            "help": {"text": sarif_plain(self.help)},
            "defaultConfiguration": {"level": self.level},
        }
        if self.properties:
            rule["properties"] = dict(self.properties)
        if self.help_uri:
            rule["helpUri"] = self.help_uri
        return rule


class SarifLocation(NamedTuple):
    """Where a result is: an artifact URI and a 1-based line (and column)."""

    uri: str
    line: int = 1
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        region: dict[str, int] = {"startLine": max(self.line, 1)}
        if self.column:
            region["startColumn"] = max(self.column, 1)
        return {"physicalLocation": {"artifactLocation": {"uri": self.uri}, "region": region}}


class SarifResult(NamedTuple):
    """One result; its rule must be among the rules given to :func:`sarif_log`."""

    rule_id: str
    level: str
    message: str
    location: SarifLocation | None = None
    fingerprints: Mapping[str, str] = MappingProxyType({})

    def to_dict(self, rule_index: int) -> dict[str, Any]:
        res: dict[str, Any] = {
            "ruleId": self.rule_id,
            "ruleIndex": rule_index,
            "level": self.level,
            "message": {"text": sarif_plain(self.message)},
        }
        if self.location is not None:
            res["locations"] = [self.location.to_dict()]
        if self.fingerprints:
            res["partialFingerprints"] = dict(self.fingerprints)
        return res


def sarif_log(
    rules: Sequence[SarifRule],
    results: Sequence[SarifResult],
    *,
    automation_id: str = "",
    properties: Mapping[str, Any] | None = None,
    notifications: Sequence[tuple[str, SarifLocation | None]] = (),
) -> dict[str, Any]:
    """A SARIF 2.1.0 log of one run of servelab: every result's rule described, indexed.
    *notifications* (text, where) are what the run did not fully read: each becomes a
    warning ``toolExecutionNotification`` of the run's invocation (SARIF 2.1.0 §3.20.21).

    ValueError (a programming error) when a result names a rule not in *rules* or a rule id
    is given twice.
    """
    index: dict[str, int] = {}
    for i, rule in enumerate(rules):
        if rule.id in index:
            raise ValueError(f"SARIF rule {rule.id!r} given twice")
        index[rule.id] = i
    missing = sorted({r.rule_id for r in results} - set(index))
    if missing:
        raise ValueError(f"SARIF results name undescribed rules: {', '.join(missing)}")
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "servelab",
                "semanticVersion": __version__,
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [r.to_dict() for r in rules],
            }
        },
    }
    if automation_id:
        run["automationDetails"] = {"id": automation_id}
    run["results"] = [r.to_dict(index[r.rule_id]) for r in results]
    if notifications:
        run["invocations"] = [{"executionSuccessful": True, "toolExecutionNotifications": [
            _notification(text, where) for text, where in notifications]}]
    if properties:
        run["properties"] = dict(properties)
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _notification(text: str, where: SarifLocation | None) -> dict[str, Any]:
    out: dict[str, Any] = {"level": "warning", "message": {"text": sarif_plain(text)}}
    if where is not None:
        out["locations"] = [where.to_dict()]
    return out


def sarif_text(log: Mapping[str, Any]) -> str:
    """The text of a SARIF log, as every servelab SARIF file is written."""
    import json

    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def sarif_relative_uri(path: str) -> str:
    """A relative POSIX *path* as a SARIF ``artifactLocation.uri``: a valid URI reference
    (RFC 3986 relative path), every character but letters, digits, ``-._~@`` and ``/``
    percent-encoded (UTF-8; the bytes of a name that was not UTF-8 as they were), so a space,
    ``#`` (a fragment), ``?`` (a query), ``%`` or a ``:`` in the first segment (a scheme) is
    part of the path, as GitHub code scanning decodes it."""
    import urllib.parse

    return urllib.parse.quote(path, safe="/@", errors="surrogateescape")


def _artifact_uri(path: str) -> str:
    # os.path.realpath, not Path.resolve: a symlink loop (an input that links to itself,
    # reported as unreadable) is a path to show, never a RuntimeError
    p = Path(path)
    real = Path(os.path.realpath(p))
    try:
        return sarif_relative_uri(real.relative_to(os.path.realpath(Path.cwd())).as_posix())
    except ValueError:
        # Path.as_uri percent-encodes the same way (file:///...)
        return real.as_uri() if p.is_absolute() or p.exists() else \
            sarif_relative_uri(p.as_posix())


def _sarif_rule(rule_id: str, r: Rule | None) -> SarifRule:
    if r is None:
        return SarifRule(rule_id, rule_id, rule_id, rule_id, "warning")
    return SarifRule(rule_id, r.summary, r.rationale or r.summary, r.fix or r.summary,
                     SARIF_LEVEL[r.severity], help_uri=r.help_uri)


def _sarif_result(f: Finding) -> SarifResult:
    where = (SarifLocation(_artifact_uri(f.file), f.line or 1, f.column)
             if f.file else None)
    return SarifResult(f.rule_id, SARIF_LEVEL[f.severity],
                       f.message + (f" Fix: {f.fix}" if f.fix else ""), where)


@register
class SarifReporter(Reporter):
    name = "sarif"
    description = "SARIF 2.1.0 for GitHub code scanning; every result's rule is described"

    def render(self, report: FindingsReport) -> str:
        findings = report.sorted_findings()
        rule_ids = sorted({f.rule_id for f in findings} | set(report.rules))
        rules = [_sarif_rule(rid, report.rules.get(rid)) for rid in rule_ids]
        notes = [(n.text(), SarifLocation(_artifact_uri(n.file), n.line or 1) if n.file
                  else None) for n in report.coverage]
        props: dict[str, Any] = {"verdict": report.verdict()} if report.coverage else {}
        if report.notes:  # what was said without a finding (a CPU server, an unknown need)
            props["notes"] = [sarif_plain(n) for n in report.notes]
        return sarif_text(sarif_log(rules, [_sarif_result(f) for f in findings],
                                    properties=props or None, notifications=notes))


_GH_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
#: GitHub shows at most this many annotations of each level per step.
GITHUB_ANNOTATION_CAP = 10


@register
class GithubReporter(Reporter):
    """GitHub workflow-command annotations, most severe first, capped as GitHub caps them."""

    name = "github"
    description = "::error/::warning workflow commands (annotations on the PR diff)"

    def render(self, report: FindingsReport) -> str:
        ranked = sorted(report.findings, key=lambda f: (-f.severity.rank, f.sort_key()))
        shown: dict[Severity, int] = {s: 0 for s in Severity}
        lines: list[str] = []
        hidden = 0
        for f in ranked:
            if shown[f.severity] >= GITHUB_ANNOTATION_CAP:
                hidden += 1
                continue
            shown[f.severity] += 1
            lines.append(self._command(f))
        lines += [f"::warning {','.join(self._where(n))}::{command_data(terminal_text(n.text()))}"
                  for n in report.coverage]
        for note in report.notes:  # said without a finding: notices, under the same cap
            if shown[Severity.INFO] >= GITHUB_ANNOTATION_CAP:
                hidden += 1
                continue
            shown[Severity.INFO] += 1
            lines.append(f"::notice title={command_property('servelab note')}::"
                         f"{command_data(terminal_text(note))}")
        if hidden:
            lines.append(
                f"::notice title=servelab::{hidden} more finding(s) or note(s) not annotated "
                "(GitHub shows 10 per level); see the job summary or the JSON/SARIF output"
            )
        return "\n".join(lines) + ("\n" if lines else "")

    @staticmethod
    def _where(n: CoverageNote) -> list[str]:
        props = [f"file={command_property(n.file)}"] if n.file else []
        if n.file and n.line:
            props.append(f"line={n.line}")
        return [*props, f"title={command_property('servelab: ' + VERDICT_PARTLY)}"]

    @staticmethod
    def _command(f: Finding) -> str:
        props: list[str] = []
        if f.file:
            props.append(f"file={command_property(f.file)}")
            if f.line:
                props.append(f"line={f.line}")
                if f.column:
                    props.append(f"col={f.column}")
        props.append(f"title={command_property(f'servelab {f.rule_id}')}")
        msg = terminal_text(f.message + (f" (fix: {f.fix})" if f.fix else ""), one_line=False)
        return f"::{_GH_COMMAND[f.severity]} {','.join(props)}::{command_data(msg)}"


def write_output(text: str, path: str | None, printer: Callable[[str], Any]) -> None:
    """Write *text* to *path* (atomically, never a partial file) or hand it to *printer*."""
    if path is None or path == "-":
        printer(text)
        return
    write_text_atomic(Path(path), text)
