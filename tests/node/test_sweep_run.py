"""A run that measures cold starts first removes the private containerds killed runs left,
and its summary says so; a live run's instance stays."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.cleanup import owner_id
from servelab.node.containerd import OWNER_FILE, PREFIX, temp_parent
from servelab.run.options import RunOptions
from servelab.run.runner import RunResult, run_experiment
from servelab.spec import load_experiment

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "experiment.yaml"
#: above the kernel's default pid_max (4194304): no process has it
DEAD_PID = 2**22 + 17


@pytest.fixture
def instance_dir() -> Iterator[Path]:
    """An instance dir as a run leaves it (containerd's root, the owner file to be written)."""
    d = Path(tempfile.mkdtemp(prefix=f"{PREFIX}test-sweep-", dir=temp_parent()))
    (d / "root" / "io.containerd.content.v1.content").mkdir(parents=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _owned_by(d: Path, pid: int, owner: str) -> None:
    (d / OWNER_FILE).write_text(json.dumps({"pid": pid, "owner": owner}), encoding="utf-8")


def _lint_run(out: Path) -> RunResult:
    return run_experiment(load_experiment(EXAMPLE), RunOptions(
        out_dir=out, stages=("lint",), repeats=1, cold_start_registry="127.0.0.1:5000"))


def test_a_cold_start_run_sweeps_killed_runs_and_says_so(instance_dir: Path,
                                                         tmp_path: Path) -> None:
    _owned_by(instance_dir, DEAD_PID, f"{socket.gethostname()}:{DEAD_PID}:12345")
    res = _lint_run(tmp_path / "out")
    assert not instance_dir.exists()
    assert f"removed a private containerd left by a killed run: {instance_dir}" in \
        res.summary["notes"]


def test_a_live_runs_instance_stays(instance_dir: Path, tmp_path: Path) -> None:
    _owned_by(instance_dir, os.getpid(), owner_id())
    res = _lint_run(tmp_path / "out")
    assert instance_dir.is_dir()
    assert not any(str(instance_dir) in n for n in res.summary["notes"])
