"""Reporters: one extension point for every findings output format, registered by name.

``get_reporter("sarif").render(report)`` returns the text to write. Add a format by
subclassing :class:`Reporter` and decorating it with :func:`register`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from servelab import __version__
from servelab.errors import UsageError
from servelab.findings import Finding, FindingsReport, Severity
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
    return sorted(_REGISTRY)


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


@register
class TextReporter(Reporter):
    name = "text"
    description = "human-readable lines: file:line:col severity [rule] message, then the fix"

    def render(self, report: FindingsReport) -> str:
        lines: list[str] = []
        for f in report.sorted_findings():
            ctx = "".join(f" ({k}: {v})" for k, v in f.context.items() if k != "path")
            path = f.context.get("path")
            at = f" at {path}" if path else ""
            lines.append(f"{_where(f)}: {f.severity.value} [{f.rule_id}] {f.message}{at}{ctx}")
            if f.fix:
                lines.append(f"    fix: {f.fix}")
        lines.extend(f"note: {n}" for n in report.notes)
        c = report.counts()
        n_files = len(report.files)
        if report.findings:
            lines.append(
                f"{report.tool}: {len(report.findings)} finding(s) in {n_files} file(s): "
                f"{c['error']} error, {c['warning']} warning, {c['info']} info"
            )
        else:
            lines.append(f"{report.tool}: {n_files} file(s) checked, no findings")
        return "\n".join(lines) + "\n"


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
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@register
class MarkdownReporter(Reporter):
    name = "markdown"
    description = "a Markdown table for a job summary or a PR comment"

    def render(self, report: FindingsReport) -> str:
        c = report.counts()
        out = [
            f"### {report.tool}",
            "",
            f"{len(report.files)} file(s), {len(report.findings)} finding(s): "
            f"{c['error']} error, {c['warning']} warning, {c['info']} info",
            "",
        ]
        if report.findings:
            out += ["| Severity | Rule | Where | Message | Fix |", "|---|---|---|---|---|"]
            out += [
                f"| {f.severity.value} | `{f.rule_id}` | `{_md_cell(_where(f))}` | "
                f"{_md_cell(f.message)} | {_md_cell(f.fix or '')} |"
                for f in report.sorted_findings()
            ]
        out += [f"> {n}" for n in report.notes]
        return "\n".join(out) + "\n"


_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _artifact_uri(path: str) -> str:
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.resolve().as_uri() if p.is_absolute() or p.exists() else p.as_posix()


@register
class SarifReporter(Reporter):
    name = "sarif"
    description = "SARIF 2.1.0 for GitHub code scanning; every result's rule is described"

    def render(self, report: FindingsReport) -> str:
        findings = report.sorted_findings()
        rule_ids = sorted({f.rule_id for f in findings} | set(report.rules))
        index = {rid: i for i, rid in enumerate(rule_ids)}
        rules: list[dict[str, Any]] = []
        for rid in rule_ids:
            r = report.rules.get(rid)
            summary = r.summary if r else rid
            rule: dict[str, Any] = {
                "id": rid,
                "name": rid,
                "shortDescription": {"text": summary},
                "fullDescription": {"text": (r.rationale or summary) if r else summary},
                "help": {"text": (r.fix or summary) if r else summary},
                "defaultConfiguration": {
                    "level": _SARIF_LEVEL[r.severity] if r else "warning"
                },
            }
            if r and r.help_uri:
                rule["helpUri"] = r.help_uri
            rules.append(rule)
        results = [self._result(f, index[f.rule_id]) for f in findings]
        doc = {
            "$schema": SARIF_SCHEMA,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "servelab",
                            "semanticVersion": __version__,
                            "version": __version__,
                            "informationUri": "https://github.com/servelab/servelab",
                            "rules": rules,
                        }
                    },
                    "results": results,
                }
            ],
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

    @staticmethod
    def _result(f: Finding, rule_index: int) -> dict[str, Any]:
        text = f.message + (f" Fix: {f.fix}" if f.fix else "")
        res: dict[str, Any] = {
            "ruleId": f.rule_id,
            "ruleIndex": rule_index,
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": text},
        }
        if f.file:
            region: dict[str, int] = {"startLine": max(f.line or 1, 1)}
            if f.column:
                region["startColumn"] = max(f.column, 1)
            res["locations"] = [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _artifact_uri(f.file)},
                        "region": region,
                    }
                }
            ]
        return res


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


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
        if hidden:
            lines.append(
                f"::notice title=servelab::{hidden} more finding(s) not annotated "
                "(GitHub shows 10 per level); see the job summary or the JSON/SARIF output"
            )
        return "\n".join(lines) + ("\n" if lines else "")

    @staticmethod
    def _command(f: Finding) -> str:
        props: list[str] = []
        if f.file:
            props.append(f"file={_escape_property(f.file)}")
            if f.line:
                props.append(f"line={f.line}")
                if f.column:
                    props.append(f"col={f.column}")
        props.append(f"title={_escape_property(f'servelab {f.rule_id}')}")
        msg = f.message + (f" (fix: {f.fix})" if f.fix else "")
        return f"::{_GH_COMMAND[f.severity]} {','.join(props)}::{_escape_data(msg)}"


def write_output(text: str, path: str | None, printer: Callable[[str], Any]) -> None:
    """Write *text* to *path* (atomically, never a partial file) or hand it to *printer*."""
    if path is None or path == "-":
        printer(text)
        return
    write_text_atomic(Path(path), text)
