"""Numeric command-line options: ASCII digits only, finite, bounded; bad values are a usage
error (exit 2) naming the option, never an internal error."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from servelab.commands._common import ascii_int, finite_float


@pytest.mark.parametrize("text", ["٣", "²", "1e3", "", "+", "1" * 10, "0x10", "3.0", "１"])
def test_ascii_int_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        ascii_int(text)


@pytest.mark.parametrize(("text", "value"), [("3", 3), (" 42 ", 42), ("-1", -1), ("+7", 7)])
def test_ascii_int_accepts(text: str, value: int) -> None:
    assert ascii_int(text) == value


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "٣", "-1", "", "0x1p3"])
def test_finite_float_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        finite_float(text)


@pytest.mark.parametrize(("text", "value"), [("0", 0.0), ("2.5", 2.5), ("1e2", 100.0)])
def test_finite_float_accepts(text: str, value: float) -> None:
    assert finite_float(text) == value


@pytest.mark.parametrize("argv", [
    ["smoke", "img", "--timeout", "nan"], ["smoke", "img", "--port", "٣"],
    ["smoke", "img", "--request-count", "²"], ["scan", "img", "--timeout", "inf"],
    ["scan", "img", "--max-db-age", "nan"], ["run", "x.yaml", "--repeats", "٣"],
    ["build", "x.yaml", "--repeats", "1e3"], ["diff", "a", "b", "--max-entries", "9" * 5000],
])
def test_commands_refuse_with_exit_2(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "servelab", *argv], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    option = next(a for a in argv if a.startswith("--"))
    assert f"argument {option}" in proc.stderr and len(proc.stderr) < 2000
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("flag", ["--ignore-file", "--vex"])
def test_scan_policy_file_that_is_a_pipe_is_named(tmp_path: object, flag: str) -> None:
    import os
    from pathlib import Path

    fifo = Path(str(tmp_path)) / "policy"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "servelab", "scan", "img", flag, str(fifo),
                           "--offline"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "is not a regular file" in proc.stderr and "Traceback" not in proc.stderr
