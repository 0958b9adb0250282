"""Text from inputs is neutralised for its medium (issue 24). Object and container names in
k8s-check's output and ``run.machine`` in report could carry a line break followed by
``::error::`` or ``::add-mask::`` (a workflow command the runner obeys), terminal escape
sequences, or Markdown and HTML.

Test ids named in docs/limits.md: hostile-same-k8s-names, hostile-same-report-machine,
hostile-same-escape-property, hostile-same-pr-mentions, hostile-same-scan-titles,
hostile-same-smoke-log-tail, hostile-same-error-messages,
hostile-same-summary-lint-message."""

from __future__ import annotations

import json
import re
import unicodedata
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostile.harness import run_servelab
from servelab.escape import (
    command_data,
    command_property,
    command_visible,
    log_text,
    md_code,
    md_text,
    no_mentions,
    terminal_text,
)
from servelab.github.prcomment import comment_body

from .runs import D1, result, write_run

NAMES = Path(__file__).resolve().parents[1] / "data" / "hostile_same" / "names"
HOSTILE = sorted((NAMES / "hostile").glob("*.yaml"))
CLEAN = sorted((NAMES / "clean").glob("*.yaml"))
#: a workflow command at the start of a line: what the runner would obey
COMMAND = re.compile(r"^\s*::", re.MULTILINE)
#: what servelab itself writes in --format github: one annotation per line
ANNOTATION = re.compile(r"^::(error|warning|notice) [^\n]*::[^\n]*$")
#: a Markdown table cell separator: a | not escaped with a backslash
CELL = re.compile(r"(?<!\\)\|")


#: bidi overrides and isolates: they reorder what a reader sees
BIDI = {*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}


def _no_control(text: str) -> None:
    """No C0/C1 control (but LF), lone surrogate, line or paragraph separator, bidi override."""
    bad = {c for c in text if c != "\n" and (unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")
                                             or c in BIDI)}
    assert not bad, sorted(map(hex, map(ord, bad)))


@pytest.mark.parametrize("fmt", ["text", "markdown", "github"])
@pytest.mark.parametrize("manifest", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_same_k8s_names(tmp_path: Path, manifest: Path, fmt: str) -> None:
    out = run_servelab(["k8s-check", "-f", fmt, str(manifest)], cwd=tmp_path)
    assert out.code == 1 and not out.problems(), out.explain()
    _no_control(out.stdout)
    if fmt == "github":
        for line in out.stdout.splitlines():
            assert ANNOTATION.match(line), line
        return
    assert not COMMAND.search(out.stdout), out.stdout
    if fmt == "markdown":
        assert "<img" not in out.stdout and "<b>" not in out.stdout
        rows = [x for x in out.stdout.splitlines() if x.startswith("| ")]
        assert rows and {len(CELL.findall(x)) for x in rows} == {6}, rows


@pytest.mark.parametrize("manifest", CLEAN, ids=[p.stem for p in CLEAN])
def test_clean_names_are_shown_as_written(tmp_path: Path, manifest: Path) -> None:
    out = run_servelab(["k8s-check", str(manifest)], cwd=tmp_path)
    assert out.code == 1 and not out.problems(), out.explain()
    assert "Deployment/llm-chat-7b" in out.stdout and "'vllm-server'" in out.stdout


MACHINES = ["gpu-1\n::add-mask::ghp_example", "gpu-1\r::error title=x::all good",
            "gpu|1 `x` <script>", "gpu\x1b]0;title\x07-1\x1b[2J"]


@pytest.mark.parametrize("machine", MACHINES)
def test_hostile_same_report_machine(tmp_path: Path, machine: str) -> None:
    run = write_run(tmp_path / "r", [result("treatment", 1, D1, machine)])
    out = run_servelab(["report", str(run)], cwd=tmp_path)
    assert out.code == 0 and not out.problems(), out.explain()
    assert not COMMAND.search(out.stdout), out.stdout
    _no_control(out.stdout)
    assert "<script" not in out.stdout
    row = next(x for x in out.stdout.splitlines() if x.startswith("| treatment |"))
    assert len(CELL.findall(row)) == 6, row


def _unescape(text: str) -> str:
    return urllib.parse.unquote(text)


@given(st.text())
def test_hostile_same_escape_property(text: str) -> None:
    """Every text survives each medium's neutralising: nothing of it can start a line or end a
    cell, and the workflow-command escapes decode back to the text as shown, its controls and
    bidi characters visible (as the runner decodes them)."""
    for escaped in (command_data(text), command_property(text)):
        assert "\r" not in escaped and "\n" not in escaped
        assert _unescape(escaped) == command_visible(text)
        _no_control(_unescape(escaped).replace("\r", "").replace("\n", ""))
    assert ":" not in command_property(text) and "," not in command_property(text)
    assert len(log_text(text + "x").splitlines()) == 1
    for shown in (terminal_text(text), md_text(text), md_code(text)):
        assert len((shown + "x").splitlines()) == 1
        _no_control(shown)
        assert "\x1b" not in shown
    assert not CELL.search(md_text(text)) and not CELL.search(md_code(text))
    assert "<" not in md_text(text) and ">" not in md_text(text)
    assert terminal_text(text, one_line=False).count("\n") == text.count("\n")


@pytest.mark.parametrize(("markdown", "kept", "gone"), [
    ("object @octocat asked for #12", [], ["@octocat", "#12"]),
    ("team @org/admins, see #3 and GH#4", [], ["@org/admins", "#3 "]),
    ("digest `img@sha256:ab` and\n```\n@x #5\n```", ["`img@sha256:ab`", "@x #5"], []),
    # CommonMark: a ``` line starts a fenced block, so the first ``` has no closer and
    # @x #5 is live text (markdown-it-py reads it so)
    ("digest `img@sha256:ab` and ```\n@x #5\n```", ["`img@sha256:ab`"], ["@x #5"]),
    ("in ````\n```\n@y\n````", ["@y"], []),
    ("mail a@b.example, heading\n# Title, entity &#124;", ["a@b.example", "# Title", "&#124;"],
     []),
    ("see [why](#why) and #section-name", ["(#why)", "#section-name"], []),
])
def test_hostile_same_pr_mentions(markdown: str, kept: list[str], gone: list[str]) -> None:
    body = comment_body(markdown, "k", None)
    assert no_mentions(markdown) in body
    for k in kept:
        assert k in body
    for g in gone:
        assert g not in body


SCAN_REPORT = Path(__file__).resolve().parents[1] / "data" / "scan" / "reports" / "control.json"


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_hostile_same_scan_titles(fmt: str) -> None:
    """Trivy's titles and package names come from the image and its advisories: a title with
    a line break and a workflow command, HTML and escape sequences is shown inert."""
    from servelab.scan import render, trivy
    from servelab.scan import stage as scan
    from servelab.spec import ScanPolicy

    doc = json.loads(SCAN_REPORT.read_text())
    vuln = doc["Results"][0]["Vulnerabilities"][0]
    vuln["Title"] = "overflow\n::error title=scan::all clean\r\n::add-mask::x <img src=x> \x1b[2J"
    vuln["PkgName"] = "openssl|`x`\n::warning::pkg"
    policy = ScanPolicy(fail_on=["CRITICAL", "HIGH", "MEDIUM", "LOW"])
    res = scan._result_from_report(trivy.parse_report(json.dumps(doc)), "img\n::error::t",
                                   "sha256:" + "a" * 64, policy)
    out = render.render_report([res], [None], fmt)
    assert "overflow" in out
    assert not COMMAND.search(out), out
    _no_control(out)
    if fmt == "markdown":
        assert "<img" not in out
        rows = [x for x in out.splitlines() if x.startswith("| ") and "overflow" in x]
        assert rows and all(len(CELL.findall(x)) == 7 for x in rows), rows


def test_hostile_same_smoke_log_tail() -> None:
    """The server's own log lines, shown when a start fails, cannot start a command line."""
    from servelab.smoke.render import render_text
    from servelab.smoke.result import ContainerState, SmokeResult

    res = SmokeResult("tiny:1\n::error::image", "r1", True, {}, verdict="crashed",
                      message="the container exited")
    res.container = ContainerState("c1", "servelab-r1", "exited", exit_code=1, log_tail=[
        "loading model", "::add-mask::hf_secret", "x\r::error title=t::injected",
        "\x1b]0;owned\x07\x1b[31mTraceback\x1b[0m"])
    out = render_text(res)
    assert "Traceback" in out and "add-mask" in out
    assert not COMMAND.search(out), out
    _no_control(out)


@pytest.mark.parametrize("argv", [
    ["lint", "Dockerfile\n::error::pwned"],
    ["k8s-check", "deploy\r\n  ::add-mask::secret.yaml"],
    ["validate", "x\n::stop-commands::t\n::error::y.yaml"],
])
def test_hostile_same_error_messages(tmp_path: Path, argv: list[str]) -> None:
    """An error that quotes an argument or a file name keeps its words off the start of a
    line: the runner would obey ``::error::`` there (leading blanks or not)."""
    out = run_servelab(argv, cwd=tmp_path)
    assert out.code == 2 and not out.problems(), out.explain()
    assert "y.yaml" in out.stderr + out.stdout or "no such file" in out.stderr
    assert not COMMAND.search(out.stderr + out.stdout), out.stderr
    _no_control(out.stderr + out.stdout)


def test_hostile_same_summary_lint_message() -> None:
    """summary.md (the job summary and the PR comment) quotes lint findings, which quote the
    PR's Dockerfile: HTML, a table break or a workflow command there stays text."""
    from servelab.run import aggregate, summary

    rows = [result("treatment", 1, D1)]
    rows[0]["verdicts"].append({"check": "lint", "stage": "lint", "passed": False,
                                "reason": "1 finding"})
    rows[0].setdefault("stages", {})["lint"] = {"record": {"findings": [{
        "rule": "base-unpinned", "severity": "error", "file": "Dockerfile", "line": 1,
        "message": "FROM <img src=x onerror=alert(1)> | `x`\n::error::pwned @octocat #1",
        "fix": "pin <b>it</b>"}]}}
    t = aggregate.arm_stats("treatment", rows)
    data = {"verdict": "failed", "reasons": [], "repeats": 1,
            "experiment": {"change": "c", "fixed": [], "metrics": []}}
    md = summary.render_markdown(data, None, t, [], rows)
    assert "base-unpinned" in md and "pwned" in md
    assert "<img" not in md and "<b>" not in md
    assert not COMMAND.search(md)
    body = comment_body(md, "k", None)
    assert "@octocat" not in body and "#1 " not in body
