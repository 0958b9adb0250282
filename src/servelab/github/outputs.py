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

import json
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servelab.errors import InputError, UsageError
from servelab.run.summary import truncate_markdown

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
