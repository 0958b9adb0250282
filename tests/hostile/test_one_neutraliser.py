"""One set of functions neutralises text for the terminal (issue 24): ``servelab diff``'s
file names go through ``servelab.escape.terminal_text`` like every other command's text,
keeping what diff showed before: bytes that were not UTF-8 as ``\\xNN``, an escape sequence
shown (never removed, so two names stay told apart), tabs and newlines kept in a block.

Test id named in docs/limits.md: one_neutraliser."""

from __future__ import annotations

import ast
import unicodedata
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from servelab.escape import terminal_text
from servelab.image import diff

DIFF_SOURCE = Path(diff.__file__)


def test_one_neutraliser_diff_has_no_table_of_its_own() -> None:
    """diff.py neither builds a translation table nor calls str.translate: it calls the
    shared neutraliser."""
    tree = ast.parse(DIFF_SOURCE.read_text(encoding="utf-8"))
    calls = {n.func.attr for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert "translate" not in calls
    assert "terminal_text" in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def test_one_neutraliser_keeps_diffs_way_of_showing_names() -> None:
    latin1 = b"etc/\xff\xfe-latin1".decode("utf-8", "surrogateescape")
    assert diff.printable(latin1) == "etc/\\xff\\xfe-latin1"
    assert terminal_text(latin1) == "etc/\\xff\\xfe-latin1"
    assert diff.printable("bin/\x1b[31mred") == "bin/\\x1b[31mred"
    assert terminal_text("bin/\x1b[31mred") == "bin/red"  # a log line: the sequence goes
    assert diff.printable("a\tb\nc") == "a\tb\nc"
    assert diff.printable("a\tb\nc", one_line=True) == "a\\tb\\nc"
    assert diff.printable("rtl\u202efdp.exe") == "rtl\\u202efdp.exe"


@given(st.text())
def test_one_neutraliser_property(text: str) -> None:
    """For any name: one line, no control, surrogate or bidi character, and two different
    names are never shown alike."""
    shown = diff.printable(text, one_line=True)
    assert len((shown + "x").splitlines()) == 1
    assert not [c for c in shown if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")
                or "\u202a" <= c <= "\u202e" or "\u2066" <= c <= "\u2069"]
    assert shown == terminal_text(text, show_escapes=True)
    other = text + "\x1b"
    assert diff.printable(other, one_line=True) != shown
