"""Fixtures of the scan tests: a fixture Trivy DB and the control/treatment images."""

from __future__ import annotations

import secrets
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import scanfixtures
from scanfixtures import Image

import trivydb
from servelab.image import layout as image_layout


@pytest.fixture(scope="session")
def trivy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Trivy cache dir holding the fixture DB, updated now (read-only for tests)."""
    cache = tmp_path_factory.mktemp("trivy-cache")
    trivydb.write_db(cache)
    return cache


@pytest.fixture
def own_cache(trivy_cache: Path, tmp_path: Path) -> Path:
    """A copy of the fixture cache a test may damage."""
    dest = tmp_path / "cache"
    shutil.copytree(trivy_cache / "db", dest / "db")
    return dest


@pytest.fixture(scope="session")
def images(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any
) -> dict[str, Image]:
    """The control and treatment images as OCI archives and unpacked OCI layouts."""
    work = tmp_path_factory.mktemp("scan-images")
    run_id = "test-scan-" + secrets.token_hex(3)
    out: dict[str, Image] = {}
    for spec in (scanfixtures.CONTROL, scanfixtures.TREATMENT):
        archive = scanfixtures.build_oci(spec, work, run_id)
        layout = work / f"{spec.name}-oci"
        with tarfile.open(archive) as tf:
            tf.extractall(layout, filter="data")
        out[spec.name] = Image(spec, archive, layout, image_layout.target_digest(archive))
    return out


@pytest.fixture(scope="session")
def loaded_control(images: dict[str, Image], docker_client: Any) -> Iterator[str]:
    """The control image loaded into the engine; its ID (the manifest digest); removed after."""
    image = images["control"]
    with image.archive.open("rb") as fh:
        loaded = docker_client.images.load(fh.read())
    ident = loaded[0].id
    yield ident
    docker_client.images.remove(ident, force=True)
