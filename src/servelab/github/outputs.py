"""GitHub's step files: outputs (``GITHUB_OUTPUT``, heredoc-delimited, names checked), the job
summary (``GITHUB_STEP_SUMMARY``, capped at GitHub's 1 MiB) and the outputs a run's summary.json
gives.

Why GITHUB_OUTPUT is written here and not with ``actions_toolkit.core.set_output``: the
toolkit (0.1.15) builds a random ``ghadelimiter_<uuid4>`` heredoc, which is sound for the value,
but it does not check the output *name* (a name holding a newline, ``=`` or ``<<`` forges other
outputs), raises a bare ``Exception`` instead of picking another delimiter, and when
``GITHUB_OUTPUT`` is unset it falls back to the removed ``::set-output`` stdout command. So
:func:`format_output` checks the name, draws a delimiter until it occurs in neither name nor
value, and writes the file itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from servelab.errors import ServelabError, UsageError
from servelab.run.summary import truncate_markdown
from servelab.textio import append_file

#: GitHub keeps at most 1 MiB of step summary per step.
SUMMARY_LIMIT = 1024 * 1024
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


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
    warn: TextIO | None = None,
) -> bool:
    """Append *outputs* to GITHUB_OUTPUT (or *path*), each as a delimiter-safe heredoc.

    The file is only appended to (:func:`servelab.textio.append_file`). One that cannot be
    written (a directory, a missing path, a full disk) is a warning on stderr, not an error:
    the command keeps its own exit code (a push that succeeded stays a success). False then."""
    target = path if path is not None else _file_from_env("GITHUB_OUTPUT", env)
    text = "".join(format_output(k, v) for k, v in outputs.items())
    try:
        append_file(target, text, what="the step outputs (GITHUB_OUTPUT)")
    except ServelabError as e:
        _warn(f"the step outputs were not written: {e}", warn)
        return False
    return True


def _warn(message: str, stream: TextIO | None) -> None:
    """A warning on stderr (*stream*), on one line per line of *message*."""
    out = sys.stderr if stream is None else stream
    with contextlib.suppress(OSError, ValueError):
        out.write("".join(f"servelab: warning: {line}\n" for line in message.splitlines()))
        out.flush()


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
    warn: TextIO | None = None,
) -> bool:
    """Append *markdown* to GITHUB_STEP_SUMMARY within *limit* bytes for the step.

    What the step already wrote counts against the limit. Returns True when it was truncated.
    A summary file that cannot be written is a warning on stderr, as in :func:`set_outputs`.
    """
    target = path if path is not None else _file_from_env("GITHUB_STEP_SUMMARY", env)
    used = _size_or_zero(target)
    room = max(limit - used, 0)
    text = truncate_markdown(markdown, room, note)
    try:
        append_file(target, text, what="the job summary (GITHUB_STEP_SUMMARY)")
    except ServelabError as e:
        _warn(f"the job summary was not written: {e}", warn)
    return text != markdown


def _size_or_zero(path: Path) -> int:
    try:
        st = path.stat()
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


# --------------------------------------------------------------------------------------------
# Outputs from summary.json
# --------------------------------------------------------------------------------------------


FINDING_LEVELS = ("CRITICAL", "HIGH", "MEDIUM", "LOW")


def int_or_none(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def outputs_from_summary(
    summary: Mapping[str, Any], *, results_dir: str | Path | None = None
) -> dict[str, str]:
    """The action's outputs from a summary.json mapping (empty strings for unknown values)."""
    reproducible = summary.get("reproducible")
    size = int_or_none(summary.get("size_bytes"))
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
        out[f"findings-{level.lower()}"] = str(int_or_none(counts.get(level)) or 0)
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
    """summary.json of *results_dir*, read by the safe reader (a regular file, capped) and
    checked against its schema; InputError (exit 2) naming the file otherwise."""
    from servelab.spec import read_summary

    return read_summary(results_dir / "summary.json",
                             missing="no summary.json: servelab run did not finish")
