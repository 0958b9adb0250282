"""Fixtures of the node tests: the registry's storage and access log, and what a private
containerd could leave on the host (to compare before and after)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ColdSettings, ImageLayers, read_layers
from servelab.node.soci import LazyRegistry, lazy_unavailable

#: where scripts/bootstrap.sh keeps the test registry's storage and access log
SETUP = Path("/var/tmp/servelab-setup")
#: the same storage over TLS (scripts/bootstrap.sh setup_tls_registry), for lazy pulls
TLS_REGISTRY = "127.0.0.1:5443"


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


@pytest.fixture(scope="session")
def lazy_registry() -> LazyRegistry:
    """The TLS registry scripts/bootstrap.sh serves over the same storage on 127.0.0.1:5443
    (its CA and access log under SETUP), for the lazy-pull tests; skipped where lazy pulling
    cannot run or the registry does not answer."""
    import ssl
    import urllib.request

    why = lazy_unavailable()
    if why is not None:
        pytest.skip(f"lazy pulling cannot run here: {why}")
    ca = SETUP / "tls" / "ca.pem"
    try:
        urllib.request.urlopen(f"https://{TLS_REGISTRY}/v2/", timeout=5,
                               context=ssl.create_default_context(cafile=str(ca))).read()
    except (OSError, ssl.SSLError) as e:
        pytest.skip(f"no TLS registry at {TLS_REGISTRY} (scripts/bootstrap.sh only "
                    f"setup_tls_registry): {e}")
    return LazyRegistry(TLS_REGISTRY, ca, SETUP / "registry-tls.log", SETUP / "registry-data")
