"""GitHub Actions glue: step outputs, the step summary, annotations and the artifact plan.

The only module that imports ``actions_toolkit``. ``servelab run`` calls :func:`publish_run`
when ``GITHUB_ACTIONS=true``; the composite action (``action.yml``) runs the hidden command
``python -m servelab action-outputs`` (:mod:`servelab.commands.action_outputs`), which calls
:func:`action_outputs` to turn a results directory into the action's outputs and its
per-repeat artifact plan. No CLI here; nothing here prints except the workflow commands and
file commands that are its purpose.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from actions_toolkit.command import Command

from servelab.errors import InputError, UsageError
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
    if results_dir is not None:
        out["summary-path"] = str(Path(results_dir) / "summary.md")
        out["results-dir"] = str(results_dir)
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
# Artifact plan: one artifact per repeat
# --------------------------------------------------------------------------------------------


def artifact_name(*parts: str) -> str:
    """An upload-artifact name: each run of characters outside [A-Za-z0-9._] becomes one "-"."""
    cleaned = (_ARTIFACT_BAD.sub("-", p).strip("-") for p in parts)
    return "-".join(p for p in cleaned if p) or "servelab"


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
) -> ArtifactPlan:
    """Names unique across a workflow run: prefix (carry the matrix key), job, arm, repeat.

    A re-run (attempt > 1) adds ``-attempt-<k>``, since upload-artifact refuses a name already
    used in the run.
    """
    suffix = f"attempt-{attempt}" if attempt > 1 else ""
    seen: set[str] = set()
    named: list[tuple[str, Path]] = []
    for arm, n, path in repeat_dirs(results_dir, arms):
        name = artifact_name(prefix, job, arm, f"repeat-{n}", suffix)
        base, k = name, 2
        while name in seen:
            name, k = f"{base}-{k}", k + 1
        seen.add(name)
        named.append((name, path))
    tops = sorted(p for p in results_dir.iterdir() if p.is_file()) if results_dir.is_dir() else []
    return ArtifactPlan(
        repeats=named[:slots],
        overflow=[p for _, p in named[slots:]],
        overflow_name=artifact_name(prefix, job, "overflow", suffix),
        summary_name=artifact_name(prefix, job, "summary", suffix),
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
    """What ``servelab run`` does in a GitHub step: outputs, step summary, annotations."""
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
    if isinstance(raw, list):
        annotate(
            (a for a in raw if isinstance(a, Mapping)),
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
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The composite action's outputs: the summary's values and the artifact plan.

    With *upload* false the plan is empty, so no upload slot is filled and no name is output.
    """
    try:
        summary = load_summary(results_dir)
    except InputError:
        summary = {}
    arms = summary.get("arms")
    arm_names = [str(a) for a in arms] if isinstance(arms, list) else []
    plan = (
        artifact_plan(
            results_dir, prefix=prefix, job=job, arms=arm_names, attempt=attempt, slots=slots
        )
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
