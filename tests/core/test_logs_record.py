"""Logging configured on first use (servelab.logs), the Record base (servelab.findings.Record),
and what `servelab lint` does not import: the start-time budget of bench/lint_speed.py rests on
these."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from servelab.findings import Record


def _py(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, check=True, cwd=cwd)


@pytest.mark.parametrize("order", ["configure-first", "logger-first"])
def test_verbose_logs_each_command_whichever_comes_first(order: str) -> None:
    first, second = ("from servelab import logs; logs.configure(1)",
                     "from servelab import proc")
    if order == "logger-first":
        first, second = second, first
    out = _py(f"""
        {first}
        {second}
        from servelab import logs, proc
        proc.run(["true"])
    """)
    assert re.search(r"^servelab: \$ \S*true$", out.stderr, re.M), out.stderr
    assert re.search(r"^servelab: exit 0 after ", out.stderr, re.M), out.stderr


def test_quiet_shows_warnings_with_the_prefix_and_no_commands() -> None:
    out = _py("""
        from servelab import logs, proc
        logs.configure(0)
        proc.run(["true"])
        logs.get("servelab.x").warning("careful: %s", "disk")
    """)
    assert out.stderr.splitlines() == ["servelab: careful: disk"]


def test_library_use_leaves_logging_alone() -> None:
    """Without the CLI, servelab adds no handler: the caller's logging set-up decides."""
    out = _py("""
        import logging
        from servelab import proc
        proc.run(["true"])
        print(len(logging.getLogger().handlers))
    """)
    assert out.stdout.strip() == "0"
    assert out.stderr == ""


class _Point(Record):
    __slots__ = ("x", "y")

    def __init__(self, x: int, y: list[int] | None = None) -> None:
        self.x = x
        self.y: list[int] = [] if y is None else y


def test_record_repr_eq_copy() -> None:
    p = _Point(1, [2])
    assert repr(p) == "_Point(x=1, y=[2])"
    assert p == _Point(1, [2])
    assert p != _Point(1, [3])
    assert p != (1, [2])
    q = p.copy(x=5)
    assert (q.x, q.y, p.x) == (5, [2], 1)
    assert q.y is p.y  # shallow, as dataclasses.replace
    with pytest.raises(TypeError, match="no field"):
        p.copy(z=1)
    with pytest.raises(TypeError):
        hash(p)
    with pytest.raises(AttributeError):
        p.z = 1  # type: ignore[attr-defined]


#: modules that cost `servelab lint` its start-time target (bench/lint_speed.py) or that only
#: other commands need
NOT_FOR_LINT = {"dataclasses", "inspect", "logging", "json", "shutil", "tomllib", "docker",
                "jsonschema", "yaml", "tarfile", "urllib.request", "subprocess"}


def test_lint_of_one_file_loads_none_of_the_heavy_modules(tmp_path: Path) -> None:
    df = tmp_path / "Dockerfile"
    df.write_text("FROM python:3.12-slim@sha256:" + "a" * 64 + "\nUSER 1000\n"
                  'CMD ["python", "-m", "http.server"]\n')
    out = _py(f"""
        import sys
        from servelab.cli import main
        code = main(["lint", "--no-hadolint", "--fail-on", "none", {str(df)!r}])
        print("MODULES", code, *sorted(sys.modules))
    """, cwd=tmp_path)
    line = next(x for x in out.stdout.splitlines() if x.startswith("MODULES "))
    code, *loaded = line.split()[1:]
    assert code == "0"
    assert "servelab.lint" in loaded  # the check ran
    assert sorted(NOT_FOR_LINT & set(loaded)) == []
