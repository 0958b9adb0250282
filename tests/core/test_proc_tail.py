"""proc.tail: the one helper that shows the end of a program's output in an error."""

from __future__ import annotations

from servelab import proc
from servelab.errors import CommandError


def test_tail_keeps_the_last_non_blank_lines_marked() -> None:
    text = "one\n\n  two\nthree\n\nfour\n"
    assert proc.tail(text, 2) == "  | three\n  | four"
    assert proc.tail(text, 3, inline=True) == "two | three | four"
    assert proc.tail("", 5) == "" and proc.tail("\n \n", 5, inline=True) == ""


def test_tail_cuts_long_lines_to_their_end() -> None:
    assert proc.tail("x" * 500 + "END", 1, width=10) == "  | " + "x" * 7 + "END"


def test_command_error_shows_the_tail_of_stderr() -> None:
    err = CommandError(["tool", "arg"], returncode=2,
                       stderr="\n".join(f"line {i}" for i in range(20)))
    text = str(err)
    assert "exit code 2: tool arg" in text
    assert "  | line 19" in text and "line 7\n" not in text and "  | line 8" in text
