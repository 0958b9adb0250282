"""Fixtures of the node tests: the registry's storage and access log, and what a private
containerd could leave on the host (to compare before and after)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ColdSettings, ImageLayers, read_layers

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
