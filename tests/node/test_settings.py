"""The cold pull's settings are checked at the start of the run: a wrong registry storage or
log is bad input (exit 2) naming the path and the fix, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.node import ColdSettings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "experiment.yaml"


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servelab", "run", str(EXAMPLE), "--stages", "lint",
         "--out", str(tmp_path / "out"), "--cold-start-registry", "127.0.0.1:5000", *extra],
        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("option", "given", "says"), [
    ("--registry-data", "missing-dir", "no registry blobs there"),
    ("--registry-log", ".", "not a regular file"),
])
def test_a_wrong_registry_path_is_bad_input(tmp_path: Path, option: str, given: str,
                                            says: str) -> None:
    path = tmp_path / given
    res = _run(tmp_path, option, str(path))
    assert res.returncode == 2, res.stderr
    first, fix = res.stderr.strip().splitlines()[-2:]
    assert first.startswith(f"servelab run: {option} {path}: {says}")
    assert fix.startswith("  fix: give ")
    assert "Traceback" not in res.stderr


def test_the_registry_paths_from_the_environment(tmp_path: Path) -> None:
    env = {**os.environ, "SERVELAB_REGISTRY_LOG": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, "-m", "servelab", "run", str(EXAMPLE), "--stages", "lint",
         "--out", str(tmp_path / "out"), "--cold-start-registry", "127.0.0.1:5000"],
        capture_output=True, text=True, timeout=120, check=False, env=env)
    assert res.returncode == 2
    assert f"--registry-log {tmp_path}: not a regular file" in res.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to another user: needs root")
def test_drop_caches_needs_root() -> None:
    """In a child that gave up root (its effective uid is nobody's)."""
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 1
        try:
            os.seteuid(65534)
            ColdSettings(drop_caches=True)
        except InputError as e:
            code = 0 if "--drop-caches needs root" in e.message else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ColdSettings(drop_caches=True).drop_caches  # root may
