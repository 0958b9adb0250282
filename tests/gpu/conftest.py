"""Fixtures of the GPU tests: fixture folders, and a stand-in for nvidia-smi.

There is no GPU on the test machines, so nvidia-smi is absent. ``fake_smi`` writes a small
executable that replays one synthetic fixture folder of tests/data/gpu/hosts (its stdout,
exit code, or a hang) and points servelab at it with SERVELAB_NVIDIA_SMI, so that
servelab.gpu.host_gpus runs a real subprocess through servelab.proc.run. It stands in only
for the missing tool; the parsers are also tested directly on the same files.
"""

from __future__ import annotations

import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from servelab.gpu.smi import QUERY_FIELDS

DATA = Path(__file__).resolve().parent.parent / "data" / "gpu"
HOSTS = DATA / "hosts"
REQUIRE = DATA / "require"

FAKE_SMI = '''#!{python}
# Stand-in for nvidia-smi: replays the synthetic fixture folder in $FAKE_SMI_DIR.
import os, pathlib, sys, time
d = pathlib.Path(os.environ["FAKE_SMI_DIR"])
args = sys.argv[1:]
query = [a for a in args if a.startswith("--query-gpu=")]
if query:
    asked = query[0].split("=", 1)[1].split(",")
    missing = [f for f in {fields!r} if f not in asked]
    name = "query-gpu" + ("-without-" + "-".join(missing) if missing else "")
elif "-q" in args:
    name = "q-xml" if "-x" in args else "q"
elif "-L" in args:
    name = "L"
else:
    name = "other"
pause = d / (name + ".sleep")
if pause.exists():
    time.sleep(float(pause.read_text()))
out = d / (name + ".out")
sys.stdout.write(out.read_text() if out.exists() else "")
rc = d / (name + ".rc")
sys.exit(int(rc.read_text()) if rc.exists() else (0 if out.exists() else 2))
'''


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], Path]:
    """Make nvidia-smi replay a fixture folder; returns the stand-in's path."""

    def use(folder: Path) -> Path:
        exe = tmp_path / "nvidia-smi"
        exe.write_text(FAKE_SMI.format(python=sys.executable, fields=QUERY_FIELDS))
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("SERVELAB_NVIDIA_SMI", str(exe))
        monkeypatch.setenv("FAKE_SMI_DIR", str(folder))
        return exe

    return use


@pytest.fixture
def no_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without nvidia-smi (the real situation of these machines, made certain)."""
    monkeypatch.delenv("SERVELAB_NVIDIA_SMI", raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
