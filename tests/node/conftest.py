"""Fixtures of the node tests: the registry's storage and access log, and what a private
containerd could leave on the host (to compare before and after)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ColdSettings, ImageLayers, read_layers
from servelab.node.containerd import PREFIX, temp_parent

#: where scripts/bootstrap.sh keeps the test registry's storage and access log
SETUP = Path("/var/tmp/servelab-setup")


@pytest.fixture(scope="session")
def registry_files(registry: str) -> tuple[Path, Path]:
    """(storage root, access log) of the local registry: $SERVELAB_REGISTRY_DATA and
    $SERVELAB_REGISTRY_LOG, else where bootstrap.sh puts them."""
    data = Path(os.environ.get("SERVELAB_REGISTRY_DATA") or SETUP / "registry-data")
    log = Path(os.environ.get("SERVELAB_REGISTRY_LOG") or SETUP / "registry.log")
    if not (data / "docker" / "registry" / "v2").is_dir() or not log.is_file():
        pytest.skip(f"the registry's storage ({data}) or access log ({log}) is not here")
    return data, log


@pytest.fixture(scope="session")
def cold_settings(registry_files: tuple[Path, Path]) -> ColdSettings:
    return ColdSettings(*registry_files)


@pytest.fixture(scope="session")
def base_layers(base_image: str) -> ImageLayers:
    return read_layers(RegistryClient(), ImageRef.parse(base_image))


@pytest.fixture
def root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("a private containerd needs root")


def _cmdline(pid: str) -> str:
    try:
        return (Path("/proc") / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def host_state() -> dict[str, Any]:
    """What a private containerd (and its pulls) could leave behind: processes naming an
    instance dir (containerd, unshare, ctr, shims), mounts naming one, the instance dirs in the temp
    dir, the top of /run/containerd (its ``s/`` holds the engine's shim sockets, which other
    containers change) and all of /opt/containerd."""
    procs = sorted(
        f"{d.name} {cmd}" for d in Path("/proc").iterdir()
        if d.name.isdigit() and d.name != str(os.getpid())
        for cmd in [_cmdline(d.name)]
        if PREFIX in cmd)
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET,SOURCE,OPTIONS"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return {
        "processes": procs,
        "mounts": sorted(m for m in mounts if PREFIX in m),
        "temp_dirs": sorted(p.name for p in temp_parent().glob(PREFIX + "*")),
        "run_containerd": _listing(Path("/run/containerd"), deep=False),
        "opt_containerd": _listing(Path("/opt/containerd"), deep=True),
    }


def _listing(d: Path, *, deep: bool) -> list[str]:
    if not d.exists():
        return []
    found = d.rglob("*") if deep else d.iterdir()
    return sorted(str(p.relative_to(d)) for p in found)
