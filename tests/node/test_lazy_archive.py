"""The SOCI index built from the build's OCI archive (``ctr images import``) in the throw-away
instance, on the real parts: buildx's OCI export of a small image on the example's base, pushed
into a repository of this test's own on the local registry, indexed from the archive, and
discovered by a timed lazy pull over the TLS registry. The registry path stays the fallback
(a prebuilt image, an archive that is gone or cannot be imported) and the index says which."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoststate import host_state as _host_state
from servelab.cleanup import Cleanup
from servelab.image.oci import OciArchive
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ImageLayers, read_layers
from servelab.node.containerd import PREFIX, sweep
from servelab.node.engine import push_archive
from servelab.node.lazypull import DEFAULT_MIN_LAYER_SIZE, build_index, lazy_pull
from servelab.node.soci import LazyRegistry

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.slow,
              pytest.mark.usefixtures("root_only")]

RUN = "test-lazyarc-"
DOCKER = "/usr/bin/docker"  # the packaged client, with buildx


@pytest.fixture(scope="module")
def built(base_image: str, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[Path, ImageLayers]]:
    """(buildx's OCI archive, the image pushed from it byte for byte): the base plus one
    small layer of this test's own."""
    if not os.access(DOCKER, os.X_OK):
        pytest.skip(f"{DOCKER} (the client with buildx) is not installed")
    ctx = tmp_path_factory.mktemp("lazyarc")
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nCOPY token.txt /srv/token.txt\n")
    (ctx / "token.txt").write_text(secrets.token_hex(16) + "\n")
    archive = ctx / "image.oci.tar"
    subprocess.run([DOCKER, "buildx", "build", "--network", "none", "--output",
                    f"type=oci,dest={archive}", str(ctx)], check=True, capture_output=True,
                   timeout=600)
    with OciArchive(archive) as oci:
        digest = str(oci.top()[1]["manifests"][0]["digest"])
    reg = RegistryClient()
    repo = f"servelab-lazy/{RUN}{secrets.token_hex(3)}/img"
    pushed = push_archive(archive, digest, "treatment",
                          f"127.0.0.1:5000/{repo}:{digest[7:23]}", reg).ref
    img = read_layers(reg, ImageRef.parse(pushed))
    assert img.manifest.digest == digest
    yield archive, img
    reg.delete_manifest(ImageRef.parse(pushed))


def test_index_from_the_archive_is_discovered_by_a_lazy_pull(
        built: tuple[Path, ImageLayers], lazy_registry: LazyRegistry) -> None:
    archive, img = built
    sweep()
    before = _host_state(PREFIX + RUN)
    log_before = lazy_registry.log.stat().st_size if lazy_registry.log else 0
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu:
        index = build_index(img, lazy_registry, rid, cu, archive=archive)
        # the throw-away instance imported the archive: no GET of the image's layers
        layers = {b.digest for b in img.layers}
        assert lazy_registry.log is not None
        log = lazy_registry.log.read_bytes()[log_before:].decode(errors="replace")
        assert not any(f"/blobs/{d} " in line and '"GET ' in line
                       for line in log.splitlines() for d in layers)
        with lazy_pull(img, lazy_registry, index, rid, cu) as (_pc, rec):
            pass
    assert _host_state(PREFIX + RUN) == before
    assert index.source == "archive" and index.source_note is None
    assert index.to_dict()["source"] == "archive"
    big = sorted(b.digest for b in img.layers if b.size >= DEFAULT_MIN_LAYER_SIZE)
    assert big and sorted(index.ztocs) == big
    assert rec.discovered and rec.index_digest == index.digest
    assert rec.lazy, rec.notes
    # the SOCI artifacts the index build wrote were evicted with the image's blobs
    n = 1 + len(img.layers) + 1 + len(index.ztocs)
    assert rec.page_cache == f"sync; the registry's blob files evicted ({n} of {n})"


def test_the_registry_path_is_the_fallback_and_says_why(
        built: tuple[Path, ImageLayers], lazy_registry: LazyRegistry, tmp_path: Path) -> None:
    archive, img = built
    not_a_tar = tmp_path / "broken.oci.tar"
    not_a_tar.write_bytes(b"this is not an OCI archive\n")
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu:
        from_registry = build_index(img, lazy_registry, rid, cu)
        gone = build_index(img, lazy_registry, rid, cu, archive=tmp_path / "gone.oci.tar")
        broken = build_index(img, lazy_registry, rid, cu, archive=not_a_tar)
        from_archive = build_index(img, lazy_registry, rid, cu, archive=archive)
    assert (from_registry.source, from_registry.source_note) == ("registry", None)
    assert gone.source == "registry"
    assert gone.source_note == f"the build's archive {tmp_path / 'gone.oci.tar'} is gone"
    assert broken.source == "registry" and broken.source_note is not None
    assert broken.source_note.startswith("ctr images import of the build's archive failed")
    # the same image, whichever way it came: the same index
    assert from_archive.source == "archive"
    assert {from_registry.digest, gone.digest, broken.digest} == {from_archive.digest}
    assert from_archive.ztocs == from_registry.ztocs
