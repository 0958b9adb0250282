"""``servelab validate``: every problem of every file, with file, line, column and JSON path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servelab import spec
from servelab.errors import InputError
from servelab.findings import Finding, FindingsReport, Rule, Severity

RULES = {
    "schema": Rule(
        "schema", Severity.ERROR, "the experiment does not match the schema",
        rationale="servelab refuses to run an experiment it cannot interpret exactly.",
        fix="change the value as the message says; see docs/spec.md",
    ),
    "input": Rule(
        "input", Severity.ERROR, "the file cannot be read as an experiment",
        rationale="malformed YAML, duplicate keys, non-UTF-8 bytes, oversized files, alias "
        "bombs and ambiguous multi-document files are refused rather than guessed at.",
        fix="fix the file as the message says",
    ),
}


def validate_files(paths: Sequence[Path], document: str | None = None) -> FindingsReport:
    """Validate each file; unreadable files become findings too, so all problems are listed."""
    findings: list[Finding] = []
    for path in paths:
        try:
            findings.extend(spec.check_file(path, document).findings)
        except InputError as e:
            findings.append(
                Finding("input", Severity.ERROR, e.message.split(": ", 1)[-1]
                        if e.file and e.message.startswith(e.file) else e.message,
                        file=str(path), line=e.line, column=e.column, fix=e.hint)
            )
    return FindingsReport("servelab validate", findings, dict(RULES), [str(p) for p in paths])
