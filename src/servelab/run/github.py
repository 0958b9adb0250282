"""GitHub Actions glue: step outputs, the step summary, annotations and the artifact plan.

The only module that imports ``actions_toolkit``. ``servelab run`` calls :func:`publish_run`
when ``GITHUB_ACTIONS=true``: outputs, the job summary, the lint findings and every failed
check of the treatment as annotations. The composite action (``action.yml``) runs the hidden
command ``python -m servelab action-outputs`` (:mod:`servelab.commands.action_outputs`), which
calls :func:`action_outputs`: the action's outputs, its per-repeat artifact plan and, when
``servelab run`` stopped before writing its summary (exit 2 or 3, or a crash), a stop report
(:func:`publish_stop`): an ``::error`` annotation with the cause, a job summary saying what
ran, what stopped it and the fix in terms of the action's inputs (:func:`action_hint`), and
that summary as summary.md so that ``summary-path`` points at a real file. No CLI here;
nothing here prints except the workflow commands and file commands that are its purpose.

Why GITHUB_OUTPUT is written here and not with ``actions_toolkit.core.set_output``: the
toolkit (0.1.15) builds a random ``ghadelimiter_<uuid4>`` heredoc, which is sound for the value,
but it does not check the output *name* (a name holding a newline, ``=`` or ``<<`` forges other
outputs), raises a bare ``Exception`` instead of picking another delimiter, and when
``GITHUB_OUTPUT`` is unset it falls back to the removed ``::set-output`` stdout command. So
:func:`format_output` checks the name, draws a delimiter until it occurs in neither name nor
value, and writes the file itself. Annotations use the toolkit's ``Command`` escaping (``%``,
CR, LF in data; also ``:`` and ``,`` in properties), which matches GitHub's own toolkit.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from actions_toolkit.command import Command

from servelab.errors import ExitCode, InputError, UsageError
from servelab.run.explain import FailedCheck, code, explain
from servelab.run.prcomment import (
    CommentOutcome,
    GitHubApi,
    comment_body,
    load_event,
    post_sticky_comment,
    pull_request,
)
from servelab.run.summary import truncate_markdown

#: GitHub keeps at most 1 MiB of step summary per step.
SUMMARY_LIMIT = 1024 * 1024
#: GitHub shows at most 10 annotations of each level (error, warning, notice) per step.
ANNOTATIONS_PER_LEVEL = 10
#: Upload slots in action.yml: one artifact per repeat, 10 repeats x 2 arms.
MAX_ARTIFACT_SLOTS = 20

LEVELS = ("error", "warning", "notice")
FINDING_LEVELS = ("CRITICAL", "HIGH", "MEDIUM", "LOW")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_ARTIFACT_BAD = re.compile(r"[^A-Za-z0-9._]+")  # runs of "-" collapse too
_REPEAT_RE = re.compile(r"^repeat-([0-9]+)$")


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    """True when running as a GitHub Actions step (``GITHUB_ACTIONS=true``)."""
    return (os.environ if env is None else env).get("GITHUB_ACTIONS") == "true"


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------


def output_text(value: object) -> str:
    """The text of an output value: '' for None, true/false, numbers as written, else JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)


def new_delimiter(*texts: str) -> str:
    """A random heredoc delimiter that occurs in none of *texts*."""
    while True:
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        if not any(delimiter in t for t in texts):
            return delimiter


def format_output(name: str, value: object) -> str:
    """One GITHUB_OUTPUT entry in heredoc form; no value can end it early or forge a name."""
    if not _NAME_RE.match(name):
        raise UsageError(
            f"invalid output name {name!r}",
            hint="use letters, digits, '_' and '-', starting with a letter or '_'",
        )
    text = output_text(value)
    delimiter = new_delimiter(name, text)
    return f"{name}<<{delimiter}\n{text}\n{delimiter}\n"


def _file_from_env(var: str, env: Mapping[str, str] | None) -> Path:
    value = (os.environ if env is None else env).get(var)
    if not value:
        raise UsageError(
            f"{var} is not set: not running as a GitHub Actions step",
            hint="call this only when in_github_actions() is true",
        )
    return Path(value)


def set_outputs(
    outputs: Mapping[str, object],
    *,
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Append *outputs* to GITHUB_OUTPUT (or *path*), each as a delimiter-safe heredoc."""
    target = path if path is not None else _file_from_env("GITHUB_OUTPUT", env)
    text = "".join(format_output(k, v) for k, v in outputs.items())
    with target.open("a", encoding="utf-8", newline="\n") as f:
        f.write(text)


# --------------------------------------------------------------------------------------------
# Step summary
# --------------------------------------------------------------------------------------------


def write_summary(
    markdown: str,
    *,
    limit: int = SUMMARY_LIMIT,
    note: str = "the full summary is summary.md in the results directory",
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> bool:
    """Append *markdown* to GITHUB_STEP_SUMMARY within *limit* bytes for the step.

    What the step already wrote counts against the limit. Returns True when it was truncated.
    """
    target = path if path is not None else _file_from_env("GITHUB_STEP_SUMMARY", env)
    used = target.stat().st_size if target.exists() else 0
    room = max(limit - used, 0)
    text = truncate_markdown(markdown, room, note)
    with target.open("a", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return text != markdown


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
        """The ``::level key=value::message`` workflow command, escaped."""
        props: dict[str, object] = {}
        if self.title:
            props["title"] = self.title
        if self.file:
            props["file"] = self.file
            if self.line is not None:
                props["line"] = self.line
        return str(Command(self.level, props, self.message))


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


# --------------------------------------------------------------------------------------------
# Outputs from summary.json
# --------------------------------------------------------------------------------------------


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def outputs_from_summary(
    summary: Mapping[str, Any], *, results_dir: str | Path | None = None
) -> dict[str, str]:
    """The action's outputs from a summary.json mapping (empty strings for unknown values)."""
    reproducible = summary.get("reproducible")
    size = _int_or_none(summary.get("size_bytes"))
    p50 = summary.get("startup_p50_s")
    findings = summary.get("findings")
    counts: Mapping[str, Any] = findings if isinstance(findings, Mapping) else {}
    digest = summary.get("digest")
    out = {
        "verdict": str(summary.get("verdict") or ""),
        "reproducible": output_text(reproducible) if isinstance(reproducible, bool) else "",
        "digest": digest if isinstance(digest, str) else "",
        "size": "" if size is None else str(size),
        "startup-p50": (
            f"{float(p50):.3f}"
            if isinstance(p50, int | float) and not isinstance(p50, bool)
            else ""
        ),
    }
    for level in FINDING_LEVELS:
        out[f"findings-{level.lower()}"] = str(_int_or_none(counts.get(level)) or 0)
    out.update(_node_outputs(summary))
    if results_dir is not None:
        out["summary-path"] = str(Path(results_dir) / "summary.md")
        out["results-dir"] = str(results_dir)
    return out


#: the start-up cost on a node (summary.json key -> output, and whether it is seconds)
NODE_OUTPUTS = (("pulled_bytes_cold", "pulled-bytes-cold", False),
                ("pulled_bytes_warm_base", "pulled-bytes-warm-base", False),
                ("node_ready_cold_s", "node-ready-cold", True),
                ("node_ready_warm_base_s", "node-ready-warm-base", True),
                ("model_bytes_read", "model-bytes-read", False))


def _node_outputs(summary: Mapping[str, Any]) -> dict[str, str]:
    """The treatment's start-up cost on a node; empty strings when it was not measured."""
    out = {}
    for key, name, seconds in NODE_OUTPUTS:
        value = summary.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            out[name] = ""
        else:
            out[name] = f"{float(value):.3f}" if seconds else str(int(value))
    return out


def load_summary(results_dir: Path) -> dict[str, Any]:
    """summary.json of *results_dir*; InputError when it is missing or not a JSON object."""
    path = results_dir / "summary.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise InputError("no summary.json: servelab run did not finish", file=str(path)) from e
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read summary.json: {e}", file=str(path)) from e
    if not isinstance(data, dict):
        raise InputError("summary.json is not a JSON object", file=str(path))
    return data


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
_FENCE = "```"


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
    """*lines* in a text code block that no line of theirs can close."""
    return [f"{_FENCE}text", *(x.replace(_FENCE, "'''") for x in lines), _FENCE]


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
               "", f"**Fix:** {self.fix}", ""]
        if self.log.stopped_in:
            out += [f"**Where:** in {self.log.stopped_in}.", ""]
        ran = self.log.ran()
        out += ["**What ran:**", ""]
        out += [f"- {x}" for x in ran] if ran else ["- nothing yet: it stopped before the "
                                                   "first stage"]
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
    if not target.exists():
        target.write_text(md, encoding="utf-8")
    write_summary(md, note=f"the full report is {target}", env=env)
    if report.log.errors_annotated == 0:
        annotate([report.annotation().in_workspace(workspace_dir(env))], stream=stream)


# --------------------------------------------------------------------------------------------
# Artifact plan: one artifact per repeat
# --------------------------------------------------------------------------------------------


def artifact_name(*parts: str) -> str:
    """An upload-artifact name: each run of characters outside [A-Za-z0-9._] becomes one "-"."""
    cleaned = (_ARTIFACT_BAD.sub("-", p).strip("-") for p in parts)
    return "-".join(p for p in cleaned if p) or "servelab"


#: a leg named by its matrix values longer than this is named by its index instead
LEG_MAX = 48


def _matrix_values(value: object) -> list[str]:
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in _matrix_values(v)]
    if isinstance(value, list):
        return [json.dumps(value, separators=(",", ":"))]
    if value is None or value == "":
        return []
    return [output_text(value)]


def matrix_leg(matrix: str = "", job_index: str = "", job_total: str = "") -> str:
    """The part of artifact names that keeps matrix legs apart; empty outside a matrix.

    *matrix* is ``toJSON(matrix)`` and *job_index*, *job_total* the ``strategy`` context, which
    GitHub gives composite actions: a leg is named by its matrix values (``ubuntu-24.04-2``), or
    ``leg-<index>`` when they are long. act gives composite actions neither (*job_total* is
    empty): a short random part then keeps legs apart.
    """
    total = job_total.strip()
    if not total:
        return f"run-{secrets.token_hex(3)}"
    if total == "1":
        return ""
    try:
        values = _matrix_values(json.loads(matrix)) if matrix.strip() else []
    except ValueError:
        values = []
    name = artifact_name(*values) if values else ""
    if not values or name == "servelab" or len(name) > LEG_MAX:
        return f"leg-{job_index.strip() or '0'}"
    return name


@dataclass(frozen=True)
class ArtifactPlan:
    """What the action uploads: repeat directories in slots, the rest in one overflow artifact."""

    repeats: list[tuple[str, Path]] = field(default_factory=list)
    overflow: list[Path] = field(default_factory=list)
    overflow_name: str = ""
    summary_name: str = ""
    #: The files at the top of the results directory: summary.md, summary.json, SARIF.
    summary_paths: list[Path] = field(default_factory=list)


def repeat_dirs(results_dir: Path, arms: Sequence[str] = ()) -> list[tuple[str, int, Path]]:
    """``(arm, n, path)`` of each ``<arm>/repeat-<n>/``, ordered by repeat, then arm."""
    found: list[tuple[str, int, Path]] = []
    if not results_dir.is_dir():
        return found
    for arm_dir in results_dir.iterdir():
        if not arm_dir.is_dir():
            continue
        for rep in arm_dir.iterdir():
            m = _REPEAT_RE.match(rep.name)
            if m and rep.is_dir():
                found.append((arm_dir.name, int(m.group(1)), rep))
    order = {a: i for i, a in enumerate(arms)}
    found.sort(key=lambda t: (t[1], order.get(t[0], len(order)), t[0]))
    return found


def artifact_plan(
    results_dir: Path,
    *,
    prefix: str,
    job: str,
    arms: Sequence[str] = (),
    attempt: int = 1,
    slots: int = MAX_ARTIFACT_SLOTS,
    leg: str = "",
) -> ArtifactPlan:
    """Names unique across a workflow run: prefix, job, matrix leg (:func:`matrix_leg`), arm,
    repeat.

    A re-run (attempt > 1) adds ``-attempt-<k>``, since upload-artifact refuses a name already
    used in the run.
    """
    suffix = f"attempt-{attempt}" if attempt > 1 else ""
    seen: set[str] = set()
    named: list[tuple[str, Path]] = []
    for arm, n, path in repeat_dirs(results_dir, arms):
        name = artifact_name(prefix, job, leg, arm, f"repeat-{n}", suffix)
        base, k = name, 2
        while name in seen:
            name, k = f"{base}-{k}", k + 1
        seen.add(name)
        named.append((name, path))
    tops = sorted(p for p in results_dir.iterdir() if p.is_file()) if results_dir.is_dir() else []
    return ArtifactPlan(
        repeats=named[:slots],
        overflow=[p for _, p in named[slots:]],
        overflow_name=artifact_name(prefix, job, leg, "overflow", suffix),
        summary_name=artifact_name(prefix, job, leg, "summary", suffix),
        summary_paths=[p for p in tops if p.is_file()],
    )


def plan_outputs(plan: ArtifactPlan) -> dict[str, str]:
    """Outputs read by action.yml's upload steps (``artifact-name-<i>``, ``artifact-path-<i>``)."""
    out: dict[str, str] = {"artifact-count": str(len(plan.repeats))}
    for i, (name, path) in enumerate(plan.repeats, start=1):
        out[f"artifact-name-{i}"] = name
        out[f"artifact-path-{i}"] = str(path)
    out["summary-artifact-name"] = plan.summary_name if plan.summary_paths else ""
    out["summary-artifact-paths"] = "\n".join(str(p) for p in plan.summary_paths)
    out["overflow-count"] = str(len(plan.overflow))
    out["overflow-artifact-name"] = plan.overflow_name if plan.overflow else ""
    out["overflow-artifact-paths"] = "\n".join(str(p) for p in plan.overflow)
    names = [name for name, _ in plan.repeats]
    names += [n for n in (out["overflow-artifact-name"], out["summary-artifact-name"]) if n]
    out["artifact-names"] = "\n".join(names)
    return out


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def publish_run(
    results_dir: Path,
    *,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """What ``servelab run`` does in a GitHub step: outputs, step summary, annotations (the
    lint findings of the treatment, then one ``::error`` per other failed check)."""
    summary = load_summary(results_dir)
    set_outputs(outputs_from_summary(summary, results_dir=results_dir), env=env)
    md = results_dir / "summary.md"
    if md.is_file():
        write_summary(
            md.read_text(encoding="utf-8"),
            note=f"the full summary is {md} (also in the summary artifact)",
            env=env,
        )
    raw = summary.get("annotations")
    found = [Annotation.from_mapping(a) for a in raw if isinstance(a, Mapping)] \
        if isinstance(raw, list) else []
    found += failure_annotations(summary)
    workspace = workspace_dir(env)
    annotate(
        [a.in_workspace(workspace) for a in found],
        stream=stream,
        rest_hint=f"the job summary and the SARIF files in {results_dir} list them all",
    )


def action_outputs(
    results_dir: Path,
    *,
    prefix: str,
    job: str,
    attempt: int = 1,
    slots: int = MAX_ARTIFACT_SLOTS,
    upload: bool = True,
    leg: str = "",
    exit_code: int | None = None,
    log_text: str = "",
    roots: Sequence[Path] = (),
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The composite action's outputs: the summary's values and the artifact plan.

    With *upload* false the plan is empty, so no upload slot is filled and no name is output.
    When servelab run stopped without summary.json (*exit_code* known), its stop is reported
    first (:func:`publish_stop`, from *log_text*; *roots* are where a file an error names may
    be), so that summary.md exists and goes into the summary artifact.
    """
    try:
        summary = load_summary(results_dir)
    except InputError:
        summary = {}
        if exit_code is not None:
            publish_stop(results_dir, stop_report(exit_code, log_text, roots=roots),
                         stream=stream, env=env)
    arms = summary.get("arms")
    arm_names = [str(a) for a in arms] if isinstance(arms, list) else []
    plan = (
        artifact_plan(results_dir, prefix=prefix, job=job, arms=arm_names, attempt=attempt,
                      slots=slots, leg=leg)
        if upload
        else ArtifactPlan()
    )
    outputs = outputs_from_summary(summary, results_dir=results_dir)
    outputs.update(plan_outputs(plan))
    set_outputs(outputs, env=env)
    if plan.overflow:
        annotate(
            [
                {
                    "level": "warning",
                    "title": "servelab: more repeats than artifact slots",
                    "message": (
                        f"{len(plan.repeats) + len(plan.overflow)} repeat directories but "
                        f"{slots} upload slots: the last {len(plan.overflow)} go together in "
                        f"the artifact {plan.overflow_name}; spread repeats over a matrix "
                        "(workflows-examples/matrix-fanout.yml) for one artifact each"
                    ),
                }
            ],
            stream=stream,
        )
    return outputs


def comment_on_pr(
    results_dir: Path,
    *,
    key: str,
    token: str,
    env: Mapping[str, str] | None = None,
) -> CommentOutcome:
    """The sticky PR comment (:mod:`servelab.run.prcomment`) with the run's summary.md up to its
    per-repeat table: the verdict, why, and the control-vs-treatment table. Skipped outside a
    pull request and on a fork's."""
    e = os.environ if env is None else env
    event_path = e.get("GITHUB_EVENT_PATH")
    pr = pull_request(load_event(Path(event_path)), e.get("GITHUB_REPOSITORY", "")) \
        if event_path else None
    if pr is None:
        return CommentOutcome("skipped", "not a pull_request event: no PR to comment on")
    if pr.from_fork:
        return CommentOutcome("skipped", f"pull request #{pr.number} comes from the fork "
                              f"{pr.head_repository}: no comment (its token is read-only)")
    md_path = results_dir / "summary.md"
    md = md_path.read_text(encoding="utf-8") if md_path.is_file() else \
        "# servelab: no summary\n\nservelab run wrote no summary.md; see the workflow run.\n"
    head = md.split("\n## Per repeat", 1)[0]
    server, repo, run_id = (e.get("GITHUB_SERVER_URL"), e.get("GITHUB_REPOSITORY"),
                            e.get("GITHUB_RUN_ID"))
    run_url = f"{server}/{repo}/actions/runs/{run_id}" if server and repo and run_id else None
    api = GitHubApi(e.get("GITHUB_API_URL") or "https://api.github.com", token)
    return post_sticky_comment(api, pr, key, comment_body(head, key, run_url))
