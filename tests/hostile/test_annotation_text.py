"""Workflow-command annotations (``::error file=...,title=...::message``) from hostile text: a
file name, title or message holding controls or bidi characters (U+202A-202E, U+2066-2069,
U+200E/F) shows them as visible escapes, so an annotation cannot reorder or hide what GitHub
shows; ``%``, CR, LF (and ``:``, ``,`` in properties) are escaped as GitHub's toolkit does.
Both writers: ``--format github`` (report.GithubReporter) and the run's annotations
(github.annotations.Annotation)."""

from __future__ import annotations

import re
import urllib.parse

import pytest

from servelab.escape import command_data, command_property, command_visible
from servelab.findings import CoverageNote, Finding, FindingsReport, Severity
from servelab.github.annotations import Annotation
from servelab.report import get_reporter

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"
#: what no annotation line may carry raw: C0 (but the LF ending it), DEL, C1, bidi
RAW = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{BIDI}\u2028\u2029\ud800-\udfff]")

HOSTILE = [
    "src/\u202etxt.exe",
    "a\u2066b\u2069c.py",
    "mark\u200e\u200f",
    "bell\x07 esc\x1b[31mred\x1b[0m",
    "nul\x00 del\x7f c1\x9b",
    "tab\there",
    "sep\u2028line\u2029para",
]


def _lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_findings_as_annotations_show_hostile_text_escaped(text: str) -> None:
    rep = FindingsReport("lint", [Finding("r1", Severity.ERROR, f"msg {text}", file=text,
                                          line=2, fix=f"fix {text}")], {},
                         coverage=[CoverageNote(f"note {text}", "why", file=text, line=1)])
    out = get_reporter("github").render(rep)
    assert len(_lines(out)) == 2, out
    for line in _lines(out):
        assert line.startswith(("::error ", "::warning ")), line
        assert not RAW.search(line), ascii(line)
    assert "\\" in out  # each shown as a visible escape


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_run_annotations_show_hostile_text_escaped(text: str) -> None:
    a = Annotation(level="error", message=f"one {text}\ntwo", title=f"t {text}", file=text,
                   line=3)
    line = a.command()
    assert "\n" not in line and not RAW.search(line), ascii(line)
    message = line.split("::", 2)[2]
    assert urllib.parse.unquote(message) == command_visible(f"one {text}\ntwo")
    assert "%0A" in message  # the message's own line break stays a line break on GitHub


def test_properties_escape_gitHubs_characters() -> None:
    a = Annotation(level="warning", message="100% a:b,c\r\nx", title="a:b,c%",
                   file="d,e:f%g\r\nh.py", line=1)
    assert a.command() == ("::warning title=a%3Ab%2Cc%25,file=d%2Ce%3Af%25g%0D%0Ah.py,"
                           "line=1::100%25 a:b,c%0D%0Ax")
    assert command_property("a:b,c%\r\n") == "a%3Ab%2Cc%25%0D%0A"
    assert command_data("a:b,c%\r\n") == "a:b,c%25%0D%0A"


def test_plain_text_is_unchanged() -> None:
    """The other way: ordinary names, non-ASCII letters included, pass as written."""
    for text in ("src/app.py", "modèles/naïve — 模型.yaml", "emoji 🚀 ok", "Dockerfile"):
        assert command_visible(text) == text
        assert command_property(text) == text
        assert command_data(text) == text
    a = Annotation(level="notice", message="modèle ok", title="servelab", file="modèle.py")
    assert a.command() == "::notice title=servelab,file=modèle.py::modèle ok"


def test_bidi_characters_are_shown_by_code() -> None:
    assert command_visible("a\u202eb\u2066c\u200fd\x1be") == "a\\u202eb\\u2066c\\u200fd\\x1be"


def test_the_markdown_table_shows_hostile_text_escaped() -> None:
    """The job-summary form of the same findings: no raw control or bidi character in any
    cell, the rule id's included (a hadolint code comes from another program's output)."""
    rep = FindingsReport("lint", [Finding("DL3008\u202e", Severity.ERROR, "msg \u2066x\x07",
                                          file="a\u202eb.txt", line=2, fix="f\u200f")], {},
                         notes=["note \u202e"])
    out = get_reporter("markdown").render(rep)
    assert not RAW.search(out.replace("\n", "")), ascii(out)
    assert "`DL3008\\u202e`" in out
