"""Command-line options that mirror the experiment's fields are checked as the fields are
(issue 24): ``smoke --port 0``, a health path without ``/``, a header with a line break and
``--expect-regex '('`` ended in exit 1 after a readiness timeout, or exit 3; the same values
in an experiment were refused at once. Now both are exit 2 before anything starts (no engine
is asked: these runs need no Docker), naming the option and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab import spec
from servelab.errors import UsageError

from .harness import run_servelab

CASES = [
    (["--port", "0"], "--port: 0 is less than the minimum of 1"),
    (["--port", "65536"], "--port: 65536 is greater than the maximum of 65535"),
    (["--health-path", "health"], "--health-path: 'health' does not match '^/'"),
    (["--request-path", "predict"], "--request-path: 'predict' does not match '^/'"),
    (["--request-path", "/p", "--request-header", "X-A: b\r\nInjected: 1"],
     "--request-header: 'b\\r\\nInjected: 1' is not valid"),
    (["--request-path", "/p", "--request-header", "Bad Name: 1"], "--request-header: "),
    (["--request-path", "/p", "--expect-regex", "("],
     "--expect-regex: '(' is not a regular expression Python can compile"),
    (["--request-path", "/p", "--expect-status", "99"], "--expect-status: 99 is less than"),
    (["--shm-size", "lots"], "--shm-size: 'lots' does not match"),
    (["--model-volume", "m", "--mount-path", "models"], "--mount-path: 'models' does not match"),
]


@pytest.mark.parametrize(("argv", "said"), CASES, ids=[c[1].split(":")[0] + "-" + str(n)
                                                       for n, c in enumerate(CASES)])
def test_smoke_options_are_checked_like_the_spec(tmp_path: Path, argv: list[str],
                                                 said: str) -> None:
    """trust-options-smoke"""
    out = run_servelab(["smoke", "no-such-image:1", *argv], cwd=tmp_path,
                       env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert out.problems() == [], out.explain()
    assert out.code == 2, out.explain()
    assert said in out.stderr, out.explain()
    assert out.seconds < 5


def test_the_experiment_refuses_the_same_values(tmp_path: Path) -> None:
    """The schema is the one judge: the same header and regex in an experiment are exit 2."""
    exp = tmp_path / "e.yaml"
    exp.write_text('apiVersion: servelab/v1\nkind: Experiment\nspec:\n  change: c\n'
                   '  request:\n    path: /p\n    headers: {"X-A": "b\\r\\nInjected: 1"}\n'
                   '    expect: {regex: "("}\n')
    messages = [f.message for f in spec.validate_files([exp]).findings]
    assert any("no CR, LF or NUL" in m for m in messages), messages
    assert any("not a regular expression" in m for m in messages), messages


@given(value=st.text(min_size=1, max_size=30))
def test_any_header_value_with_a_line_break_is_refused(value: str) -> None:
    data = {"path": "/p", "headers": {"X-A": value}}
    broken = any(c in value for c in "\r\n\x00")
    if broken:
        with pytest.raises(UsageError, match="--request-header"):
            spec.check_options("request", data, {"headers": "--request-header"})
    else:
        spec.check_options("request", data, {"headers": "--request-header"})


@pytest.mark.parametrize(("name", "value"), [("X-A", "\n"), ("X-A", "a\n"), ("X-A\n", "v"),
                                             ("", "v")],
                         ids=["lf", "trailing-lf", "name-trailing-lf", "empty-name"])
def test_a_trailing_line_break_is_refused_too(name: str, value: str) -> None:
    """A regex's ``$`` matches before a final newline (Python's re): the schema looks for the
    bad character instead, so "a\\n" and "X-A\\n" are refused like "a\\r\\nb"."""
    with pytest.raises(UsageError, match="--request-header"):
        spec.check_options("request", {"path": "/p", "headers": {name: value}},
                           {"headers": "--request-header"})
