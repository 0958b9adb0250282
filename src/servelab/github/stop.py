"""A run that stopped before its summary (exit 2 or 3, or a crash): what ran, what stopped
it, and the fix in terms of the action's inputs, as an ``::error`` annotation, the job summary
and summary.md (so that the action's ``summary-path`` points at a real file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from servelab.errors import ExitCode
from servelab.escape import md_fence, md_prose
from servelab.github.annotations import Annotation, annotate, workspace_dir
from servelab.github.outputs import write_summary
from servelab.run.explain import code
from servelab.textio import write_file

# --------------------------------------------------------------------------------------------
# A run that stopped before its summary: what ran, what stopped it, the fix
# --------------------------------------------------------------------------------------------

#: What each exit code means, as the action's reports say it.
EXIT_MEANINGS = {
    0: "ok",
    1: "a gate or check of the treatment failed",
    2: "bad input, usage or an invalid run",
    3: "a missing tool, engine or capability (or a bug in servelab)",
    130: "interrupted (SIGINT)",
    143: "terminated (SIGTERM)",
}

#: servelab run's flags and the action's inputs that set them, longest first. Hints in errors
#: name the flags; the action's reports name the inputs instead.
FLAG_INPUTS: tuple[tuple[str, str], ...] = (
    ("--db-repository MIRROR", "a mirror in the `trivy-db-repositories` input"),
    ("--max-db-age / ", ""),
    ("--timeout / ", ""),
    ("--db-repository", "the `trivy-db-repositories` input"),
    ("--trivy-cache-dir", "the `trivy-cache-dir` input"),
    ("--cache-dir", "the `trivy-cache-dir` input"),
    ("--offline", '`offline: "true"`'),
    ("--no-gpu", '`gpu: "false"`'),
    ("--gpu", '`gpu: "true"`'),
    ("--repeats", "the `repeats` input"),
    ("--stages", "the `stages` input"),
    ("--fail-on", "the `fail-on` input"),
    ("--run-name", "the `artifact-prefix` input"),
)
_FLAG_RE = re.compile("|".join(
    rf"(?<![\w-]){re.escape(flag)}" + (r"(?![\w-])" if flag[-1].isalnum() else "")
    for flag, _ in FLAG_INPUTS))
_INPUT_OF = dict(FLAG_INPUTS)


def action_hint(text: str) -> str:
    """*text* (a hint that names servelab run's flags) with the action's inputs instead."""
    return _FLAG_RE.sub(lambda m: _INPUT_OF[m.group(0)], text)


_REPEAT_LINE = re.compile(r"^\[(?P<arm>[^\s\]]+) (?P<n>[0-9]+)/(?P<total>[0-9]+)\] (?P<what>.*)$")
_STAGE_START = re.compile(r"^(?P<stage>lint|build|scan|smoke) \.\.\.$")
_STAGE_END = re.compile(r"^(?P<stage>lint|build|scan|smoke): (?P<status>.*)$")
_INPUT_PLACE = re.compile(r"^(?P<file>[^\s:][^:\n]*?)(?::(?P<line>[0-9]+))?(?::[0-9]+)?: ")
#: the first line the action's run step writes to the log: the command it ran
COMMAND_PREFIX = "servelab-action: command: "


@dataclass(frozen=True)
class RunLog:
    """What the log of ``servelab run`` (its standard output and error) tells of a stop."""

    command: str | None = None
    #: its progress lines ("servelab: ..."), the prefix removed, in order
    progress: tuple[str, ...] = ()
    #: the error that stopped it (``servelab run: <message>``) and its fix, if it printed one
    error: str | None = None
    hint: str | None = None
    #: annotations (``::error``) the run already wrote, e.g. each problem of an invalid spec
    errors_annotated: int = 0
    tail: tuple[str, ...] = ()

    @property
    def stopped_in(self) -> str | None:
        """``the scan stage of control repeat 1``: the last stage started and never ended."""
        where, open_stage = None, None
        for line in self.progress:
            m = _REPEAT_LINE.match(line)
            if m:
                where = f"{m['arm']} repeat {m['n']}"
                continue
            text = line.strip()
            start, end = _STAGE_START.match(text), _STAGE_END.match(text)
            if start:
                open_stage = start["stage"]
            elif end and end["stage"] == open_stage:
                open_stage = None
        if open_stage is None:
            return None
        return f"the {open_stage} stage" + (f" of {where}" if where else "")

    def ran(self) -> list[str]:
        """What ran: each lint line, then one line per repeat (``control repeat 1 of 3: build
        ok (...); scan ok (...)``)."""
        out: list[str] = []
        current: list[str] = []
        for line in self.progress:
            m = _REPEAT_LINE.match(line)
            if m and m["what"] == "start":
                current = []
                out.append(f"{m['arm']} repeat {m['n']} of {m['total']}: started")
                continue
            end = _STAGE_END.match(line.strip())
            if end and out and not line.startswith("lint "):
                current.append(f"{end['stage']} {end['status']}")
                out[-1] = out[-1].split(": ", 1)[0] + ": " + "; ".join(current)
            elif line.startswith("lint "):
                out.append(line)
        return out


def parse_run_log(text: str, command: str = "run") -> RunLog:
    """Read the log of ``servelab <command>`` for what ran and what stopped it."""
    lines = text.replace("\r\n", "\n").split("\n")
    head = f"servelab {command}: "
    cmd = next((x[len(COMMAND_PREFIX):] for x in lines[:3] if x.startswith(COMMAND_PREFIX)),
               None)
    progress = tuple(x[len("servelab: "):] for x in lines if x.startswith("servelab: "))
    start = max((i for i, x in enumerate(lines) if x.startswith(head)), default=None)
    error = hint = None
    if start is not None:
        block = "\n".join([lines[start][len(head):], *lines[start + 1:]]).rstrip()
        message, _, fix = block.partition("\n  fix: ")
        error = message.removeprefix("error: ").strip() or None
        hint = " ".join(fix.split()) or None
    tail = tuple(x for x in lines if x.strip())[-15:]
    return RunLog(command=cmd, progress=progress, error=error, hint=hint,
                  errors_annotated=sum(1 for x in lines if x.startswith("::error")), tail=tail)


def _error_place(error: str, roots: Sequence[Path]) -> tuple[str | None, int | None]:
    """The file (and line) an input error names at its start, when it is a file here."""
    m = _INPUT_PLACE.match(error)
    if not m:
        return None, None
    for root in roots:
        path = root / m["file"]
        if path.is_file():
            return str(path.resolve()), int(m["line"]) if m["line"] else None
    return None, None


def _fenced(lines: Sequence[str]) -> list[str]:
    """*lines* in a text code block that no line of theirs can close
    (:func:`servelab.escape.md_fence`)."""
    return md_fence("\n".join(lines))


@dataclass(frozen=True)
class StopReport:
    """A run that ended without summary.json: the annotation and the job summary to write."""

    exit_code: int
    log: RunLog
    file: str | None = None
    line: int | None = None

    @property
    def meaning(self) -> str:
        return EXIT_MEANINGS.get(self.exit_code, "an unexpected exit code")

    @property
    def cause(self) -> str:
        if self.log.error:
            return self.log.error
        if self.exit_code == 0:
            return "servelab run exited 0 but wrote no summary.json"
        return f"servelab run exited with {self.exit_code} and printed no error"

    @property
    def fix(self) -> str:
        if self.log.hint:
            return action_hint(self.log.hint)
        if self.exit_code == ExitCode.BAD_INPUT:
            return "check the experiment file and the action's inputs (docs/action.md)"
        return ("read the log of the step 'Run the experiment'; for a bug in servelab, set "
                "SERVELAB_DEBUG=1 in the job's env to get the traceback, and report it")

    def annotation(self) -> Annotation:
        where = self.log.stopped_in
        title = f"servelab stopped (exit {self.exit_code})" + (f" in {where}" if where else "")
        return Annotation(level="error", title=title, message=f"{self.cause}\nfix: {self.fix}",
                          file=self.file, line=self.line)

    def markdown(self) -> str:
        out = [f"# servelab: ⛔ stopped (exit {self.exit_code}: {self.meaning})", "",
               "servelab run stopped before it could judge the experiment: there is no "
               "verdict.", "", "**What stopped it:**", "", *_fenced(self.cause.splitlines()),
               "", f"**Fix:** {md_prose(self.fix)}", ""]
        if self.log.stopped_in:
            out += [f"**Where:** in {md_prose(self.log.stopped_in)}.", ""]
        ran = self.log.ran()
        out += ["**What ran:**", ""]
        out += [f"- {md_prose(x)}" for x in ran] if ran else [
            "- nothing yet: it stopped before the first stage"]
        out.append("")
        if self.log.command:
            out += [f"**Command:** {code(self.log.command, 600)}", ""]
        if not self.log.error and self.log.tail:
            out += ["<details><summary>The log's last lines</summary>", "",
                    *_fenced(self.log.tail), "", "</details>", ""]
        out += ["The step 'Run the experiment' holds the whole log. Exit codes: 0 ok, 1 a gate "
                "failed, 2 bad input, 3 a missing tool or capability.", ""]
        return "\n".join(out)


def stop_report(exit_code: int, log_text: str, *,
                roots: Sequence[Path] = ()) -> StopReport:
    """The report of a run that ended without summary.json, from its exit code and log."""
    log = parse_run_log(log_text)
    file, line = _error_place(log.error, roots) if log.error else (None, None)
    return StopReport(exit_code=exit_code, log=log, file=file, line=line)


def publish_stop(
    results_dir: Path,
    report: StopReport,
    *,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """A stop where GitHub shows it: summary.md in *results_dir*, the job summary, and an
    ``::error`` (unless the run already annotated its errors, as an invalid spec's)."""
    md = report.markdown()
    results_dir.mkdir(parents=True, exist_ok=True)
    target = results_dir / "summary.md"
    if not os.path.lexists(target):
        write_file(target, md, what="the stop report (summary.md)")
    write_summary(md, note=f"the full report is {target}", env=env)
    if report.log.errors_annotated == 0:
        annotate([report.annotation().in_workspace(workspace_dir(env))], stream=stream)
