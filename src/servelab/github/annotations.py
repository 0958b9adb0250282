"""Workflow-command annotations (``::error file=...::``), ranked and capped as GitHub shows
them, and ``::stop-commands::`` around untrusted text. Annotations use the toolkit's
``Command`` escaping (``%``, CR, LF in data; also ``:`` and ``,`` in properties), which matches
GitHub's own toolkit. This is the only module that imports ``actions_toolkit``.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from actions_toolkit.command import Command

from servelab.escape import command_visible
from servelab.github.outputs import int_or_none as _int_or_none
from servelab.run.explain import FailedCheck, explain

#: GitHub shows at most 10 annotations of each level (error, warning, notice) per step.
ANNOTATIONS_PER_LEVEL = 10
LEVELS = ("error", "warning", "notice")

# --------------------------------------------------------------------------------------------
# Annotations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Annotation:
    """One annotation as summary.json lists it."""

    level: str
    message: str
    title: str | None = None
    file: str | None = None
    line: int | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Annotation:
        level = str(data.get("level") or "warning").lower()
        if level not in LEVELS:
            level = "error" if level in ("failure", "fatal") else "notice"
        line = _int_or_none(data.get("line"))
        file = data.get("file")
        title = data.get("title")
        return cls(
            level=level,
            message=str(data.get("message") or ""),
            title=str(title) if title else None,
            file=str(file) if file else None,
            line=line if line is not None and line > 0 else None,
        )

    def in_workspace(self, workspace: Path | None) -> Annotation:
        """The annotation with its file relative to *workspace*, where GitHub can place it; a
        file outside it (a worktree of another commit) moves into the message."""
        if not self.file or workspace is None or not Path(self.file).is_absolute():
            return self
        try:
            rel = Path(self.file).resolve().relative_to(workspace.resolve())
        except (ValueError, OSError):
            where = f"{self.file}:{self.line}" if self.line else self.file
            return replace(self, file=None, line=None, message=f"{where}: {self.message}")
        return replace(self, file=rel.as_posix())

    def command(self) -> str:
        """The ``::level key=value::message`` workflow command, escaped: controls and bidi
        characters of the file, title and message shown visible (:func:`command_visible`),
        then GitHub's escaping."""
        props: dict[str, object] = {}
        if self.title:
            props["title"] = command_visible(self.title)
        if self.file:
            props["file"] = command_visible(self.file)
            if self.line is not None:
                props["line"] = self.line
        return str(Command(self.level, props, command_visible(self.message)))


def rank_annotations(
    annotations: Iterable[Annotation | Mapping[str, Any]],
    *,
    per_level: int = ANNOTATIONS_PER_LEVEL,
    rest_hint: str = "see the job summary",
) -> list[Annotation]:
    """Errors first, then warnings, then notices; those with a file before those without.

    When a level has more than *per_level*, the first ``per_level - 1`` are kept and the last
    slot says how many more there are and where to find them.
    """
    items = [a if isinstance(a, Annotation) else Annotation.from_mapping(a) for a in annotations]
    ranked: list[Annotation] = []
    for level in LEVELS:
        group = sorted(
            (a for a in items if a.level == level), key=lambda a: (a.file is None, a.line is None)
        )
        if len(group) <= per_level:
            ranked.extend(group)
            continue
        keep = group[: per_level - 1]
        rest = len(group) - len(keep)
        noun = level if rest == 1 else f"{level}s"
        ranked.extend(keep)
        ranked.append(
            Annotation(
                level=level,
                title=f"servelab: {rest} more {noun}",
                message=(
                    f"{rest} more {noun} not shown here (GitHub shows {per_level} per step): "
                    f"{rest_hint}"
                ),
            )
        )
    return ranked


def annotate(
    annotations: Iterable[Annotation | Mapping[str, Any]],
    *,
    stream: TextIO | None = None,
    per_level: int = ANNOTATIONS_PER_LEVEL,
    rest_hint: str = "see the job summary",
) -> int:
    """Write ranked annotation commands to *stream* (stdout); returns how many were written."""
    out = sys.stdout if stream is None else stream
    ranked = rank_annotations(annotations, per_level=per_level, rest_hint=rest_hint)
    for a in ranked:
        out.write(a.command() + "\n")
    out.flush()
    return len(ranked)


@contextmanager
def stop_commands(stream: TextIO | None = None) -> Iterator[None]:
    """Stop the runner from reading workflow commands while untrusted text (logs) is printed."""
    out = sys.stdout if stream is None else stream
    token = secrets.token_hex(16)
    out.write(f"::stop-commands::{token}\n")
    out.flush()
    try:
        yield
    finally:
        out.write(f"::{token}::\n")
        out.flush()


def workspace_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """GITHUB_WORKSPACE, where annotation paths are relative to."""
    value = (os.environ if env is None else env).get("GITHUB_WORKSPACE")
    return Path(value) if value else None


def check_annotation(c: FailedCheck) -> Annotation:
    """An ``::error`` for one failed check: its cause, evidence and fix, at its file and line."""
    parts = [c.message, *c.evidence]
    if c.fix:
        parts.append(f"fix: {c.fix}")
    some = f" (repeats {', '.join(map(str, c.repeats))})" if len(c.repeats) > 1 else ""
    return Annotation(level="error" if c.severity == "error" else "warning",
                      title=f"servelab {c.arm}: {c.name}{some}",
                      message="\n".join(p.replace("`", "") for p in parts if p),
                      file=c.file, line=c.line)


_PER_CHECK = re.compile(r"^[^()]+ \([\w.-]+ r[0-9]+\): ")


def failure_annotations(summary: Mapping[str, Any]) -> list[Annotation]:
    """One ``::error`` per failed check of the treatment (lint findings are annotated one by
    one by the run itself), and one per gate or invalidity the summary names."""
    results = [r for r in summary.get("results") or [] if isinstance(r, Mapping)]
    out = [check_annotation(c) for a in explain(results) if a.arm == "treatment"
           for c in a.failed if c.stage != "lint"]
    verdict = str(summary.get("verdict") or "")
    if verdict in ("failed", "not reproducible", "invalid"):
        for reason in summary.get("reasons") or []:
            if isinstance(reason, str) and not _PER_CHECK.match(reason):
                out.append(Annotation(level="error", title=f"servelab: {verdict}",
                                      message=reason))
    return out
