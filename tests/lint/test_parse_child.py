"""Large Dockerfiles are parsed in a child process (so Ctrl-C stops them at once): the child's
instructions are the same as the in-process parser's."""

from __future__ import annotations

import pytest

from servelab.errors import InputError
from servelab.lint import parse

TEXT = ("# syntax=docker/dockerfile:1\nFROM python:3.11 AS build\n"
        + "RUN --mount=type=cache,target=/root/.cache echo a && \\\n  echo b\n" * 3000
        + 'COPY --from=build ["/a", "/b"]\nRUN <<EOF\necho hi\nEOF\nUSER 1000\n')


def test_child_and_thread_parse_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(TEXT) > parse.CHILD_PARSE_BYTES
    in_child = parse.parse_text(TEXT, "Dockerfile")
    monkeypatch.setattr(parse, "CHILD_PARSE_BYTES", 10 * len(TEXT))
    in_thread = parse.parse_text(TEXT, "Dockerfile")
    assert in_child == in_thread
    assert in_child[-2].heredocs and in_child[-2].heredocs[0].content.strip() == "echo hi"


def test_child_reports_the_error_line() -> None:
    bad = TEXT + "ENV ONLYKEY\n"
    with pytest.raises(InputError, match="ENV must have two arguments") as e:
        parse.parse_text(bad, "Dockerfile")
    assert e.value.line == bad.count("\n")
