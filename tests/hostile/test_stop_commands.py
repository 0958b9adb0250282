"""Untrusted blocks go inside ``::stop-commands::`` under GitHub Actions (issue 24).

A plain log line cannot be escaped: the runner obeys any line of a step's output that starts
with ``::`` (``::add-mask::``, ``::error::``, ``::stop-commands::``). Blocks of text that came
from an input or a tool (a text report quoting the PR's files, Trivy's stderr quoted in an
error, a build's or a container's log tail) are printed between ``::stop-commands::TOKEN`` and
``::TOKEN::`` with a fresh random token when ``GITHUB_ACTIONS=true``, through one function
(``servelab.escape.untrusted_block``) used by the CLI's error printer and the text emitter.

The runner is played by :func:`obeyed`: the workflow commands it would act on in a log.
Commands run in child processes whose output is a pipe, as under the runner.

Test id named in docs/limits.md: hostile-stop-commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocitest import E, tar_bytes, write_layout
from servelab.escape import untrusted_block

#: a Dockerfile with findings, whose words (workflow commands among them) lint quotes
DATA = Path(__file__).resolve().parents[1] / "data"
DOCKERFILE = DATA / "hostile_same" / "stop-commands" / "Dockerfile"
NAMES = DATA / "hostile_same" / "names" / "hostile"
STOP = re.compile(r"^::stop-commands::([0-9a-f]{32})$")


def obeyed(log: str) -> list[str]:
    """The workflow commands a runner acts on in *log*: lines starting with ``::`` (after
    blanks), except inside a ``::stop-commands::TOKEN`` block, which ``::TOKEN::`` ends."""
    acted: list[str] = []
    token: str | None = None
    for line in log.splitlines():
        s = line.lstrip()
        if token is not None:
            if s == f"::{token}::":
                token = None
            continue
        if s.startswith("::stop-commands::"):
            token = s.removeprefix("::stop-commands::")
        elif s.startswith("::"):
            acted.append(s)
    return acted


def _servelab(argv: list[str], tmp: Path, *, github: bool,
              path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "SERVELAB_"))}
    env |= {"TMPDIR": str(tmp), "NO_COLOR": "1"}
    if github:
        env["GITHUB_ACTIONS"] = "true"
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "servelab", *argv], capture_output=True,
                          text=True, env=env, cwd=tmp, timeout=120, check=False)


def _blocks(out: str) -> list[str]:
    return [m.group(1) for m in map(STOP.match, out.splitlines()) if m]


@pytest.mark.parametrize("argv", [
    ["lint", "--no-hadolint", str(DOCKERFILE)],
    ["k8s-check", str(sorted(NAMES.glob("*.yaml"))[0])],
], ids=["lint", "k8s-check"])
def test_a_text_report_is_one_stopped_block_under_github(tmp_path: Path,
                                                        argv: list[str]) -> None:
    """hostile-stop-commands: the text report is inside one block; nothing in it is obeyed."""
    got = _servelab(argv, tmp_path, github=True)
    assert got.returncode in (0, 1), got.stderr
    tokens = _blocks(got.stdout)
    assert len(tokens) == 1, got.stdout
    lines = got.stdout.splitlines()
    assert lines[0] == f"::stop-commands::{tokens[0]}" and lines[-1] == f"::{tokens[0]}::"
    assert obeyed(got.stdout) == []
    plain = _servelab(argv, tmp_path, github=False)
    assert "\n".join(lines[1:-1]) + "\n" == plain.stdout, "the report itself changed"
    again = _servelab(argv, tmp_path, github=True)
    assert _blocks(again.stdout) != tokens, "the token must be new on every run"


def test_outside_github_and_other_formats_nothing_changes(tmp_path: Path) -> None:
    """No block outside GitHub Actions, none around --format github (the annotations are
    meant to be obeyed) or json, and none in a file written with -o."""
    df = str(DOCKERFILE)
    plain = _servelab(["lint", "--no-hadolint", df], tmp_path, github=False)
    assert "::stop-commands::" not in plain.stdout and plain.stdout
    notes = _servelab(["lint", "--no-hadolint", "-f", "github", df], tmp_path, github=True)
    assert "::stop-commands::" not in notes.stdout
    assert obeyed(notes.stdout) == notes.stdout.splitlines() != []
    js = _servelab(["lint", "--no-hadolint", "-f", "json", df], tmp_path, github=True)
    assert js.stdout.lstrip().startswith("{")
    out = tmp_path / "lint.txt"
    _servelab(["lint", "--no-hadolint", df, "-o", str(out)], tmp_path, github=True)
    assert out.read_text() == plain.stdout


FAKE_TRIVY = """#!/bin/sh
# stands in for a Trivy whose stderr an attacker shaped (an image's file names, a
# registry's error text): it fails with workflow commands in its message
printf '2026-12-01T00:00:00Z\\tFATAL\\tscan failed:\\n::add-mask::ghp_x\\n' >&2
printf '::error title=scan::all clean\\n  ::set-output name=gate::passed\\n' >&2
exit 1
"""


def test_a_tools_stderr_quoted_in_an_error_is_a_stopped_block(tmp_path: Path) -> None:
    """Trivy's stderr tail, quoted in scan's error (exit 3), is obeyed in no line."""
    import trivydb

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "trivy").write_text(FAKE_TRIVY)
    (bin_dir / "trivy").chmod(0o755)
    cache = tmp_path / "cache"
    trivydb.write_db(cache)
    write_layout(tmp_path / "img", [tar_bytes([E("etc/os-release", b"ID=debian\n")])])
    argv = ["scan", str(tmp_path / "img"), "--offline", "--cache-dir", str(cache)]
    path = f"{bin_dir}:{os.environ.get('PATH', '')}"
    got = _servelab(argv, tmp_path, github=True, path=path)
    assert got.returncode == 3, got.stderr
    assert "ghp_x" in got.stderr and len(_blocks(got.stderr)) == 1, got.stderr
    assert obeyed(got.stderr) == [] and obeyed(got.stdout) == []
    plain = _servelab(argv, tmp_path, github=False, path=path)
    assert plain.returncode == 3 and "::stop-commands::" not in plain.stderr


_WORDS = st.sampled_from(["::", "error", "add-mask", ":", " ", "x", "stop-commands", "%0A"])


@given(st.lists(st.lists(_WORDS, max_size=8).map("".join), min_size=2, max_size=8))
def test_property_nothing_in_a_block_is_obeyed(lines: list[str]) -> None:
    """Whatever lines the text holds (also a fake ``::stop-commands::`` or end token), the
    runner obeys none of them under GitHub Actions."""
    text = "\n".join(lines) + "\n"
    os.environ["GITHUB_ACTIONS"] = "true"
    try:
        block = untrusted_block(text)
    finally:
        os.environ.pop("GITHUB_ACTIONS")
    if "\n" in text.rstrip("\n"):
        assert obeyed(block) == [] and block.splitlines()[1:-1] == text.splitlines()
    else:
        assert block == text
