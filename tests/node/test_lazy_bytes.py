"""A lazy node reads the bytes of a layer that servelab compressed, on the real parts.

servelab compresses a layer in 1 MiB pieces. Joined as many gzip members, SOCI's index (the
Debian soci 0.4.1 here; fixed upstream in v0.13) mapped every file to span 0: the vLLM
image's lazy node fetched its whole 4.47 GB layer and served ``torch/__init__.py`` as zero
bytes, so the server exited. Joined as one member (servelab.build.gzipjoin), a file past the
first MiB reads back as it was, and only the spans around it are fetched."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import secrets
from typing import Any

import pytest

from ocitest import E, tar_bytes
from servelab.build import export
from servelab.cleanup import Cleanup
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ColdSettings, NodeSettings, NodeStarts, read_layers
from servelab.node.lazypull import LazySettings, build_index, coverage, lazy_pull
from servelab.node.soci import LazyRegistry, metric_sum

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.slow,
              pytest.mark.usefixtures("root_only")]

RUN = "test-lazybytes-"
PAD = 24 << 20  # incompressible: the layer is over SOCI's 10 MiB min layer size
LATE = "srv/late.txt"
SNAPSHOTS = "/var/lib/soci-snapshotter-grpc/snapshotter/snapshots"


def _layer(*, members: bool = False) -> tuple[bytes, bytes, bytes]:
    """(the layer's tar, its gzip as servelab writes it, the late file's bytes); *members*:
    one gzip member per MiB instead, as servelab 0.1 wrote it."""
    rng = random.Random(7)  # noqa: S311 (test data)
    late = b"".join(b"line %06d of the file past the first gzip piece\n" % i
                    for i in range(4000))
    tar = tar_bytes([E("srv/pad.bin", rng.randbytes(PAD)), E(LATE, late)])
    if members:
        step = export.BLOCK
        return tar, b"".join(gzip.compress(tar[i:i + step], 4, mtime=0)
                             for i in range(0, len(tar), step)), late
    out = io.BytesIO()
    export.gzip_to(io.BytesIO(tar), out.write)
    return tar, out.getvalue(), late


def _push(tar: bytes, gz: bytes) -> str:
    reg = RegistryClient()
    ref = ImageRef("127.0.0.1:5000", f"servelab-lazy/{RUN}{secrets.token_hex(3)}/img", "t")
    diff_id = "sha256:" + hashlib.sha256(tar).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                         "config": {}}).encode()
    blobs = {"config": config, "layer": gz}
    digests = {k: "sha256:" + hashlib.sha256(v).hexdigest() for k, v in blobs.items()}
    for k, v in blobs.items():
        reg.upload_blob(ref, digests[k], len(v), lambda v=v: io.BytesIO(v))
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digests["config"], "size": len(config)},
        "layers": [{"mediaType": export.OCI_GZIP, "digest": digests["layer"],
                    "size": len(gz)}]}).encode()
    reg.put_manifest(ref, "t", manifest, "application/vnd.oci.image.manifest.v1+json")
    return str(ref.with_digest("sha256:" + hashlib.sha256(manifest).hexdigest()))


def test_a_file_past_the_first_piece_reads_back_lazily(lazy_registry: LazyRegistry) -> None:
    tar, gz, late = _layer()
    assert len(gz) > 2 * export.BLOCK * 10  # many pieces, one member
    pushed = _push(tar, gz)
    rid = f"{RUN}{secrets.token_hex(3)}"
    try:
        img = read_layers(RegistryClient(), ImageRef.parse(pushed))
        with Cleanup(rid) as cu:
            index = build_index(img, lazy_registry, rid, cu)
            with lazy_pull(img, lazy_registry, index, rid, cu) as (pc, rec):
                assert rec.lazy, rec.notes
                read = pc.ns("sh", "-c", f"cat {SNAPSHOTS}/*/fs/{LATE}", timeout=120).stdout
                fetched = metric_sum(pc.metrics(), "soci_fs_layer_fetched_size_bytes")
                # a zTOC soci cannot report on: said, not passed silently
                bogus = {img.layers[0].digest: "sha256:" + "0" * 64}
                unusable, unchecked = coverage(pc, img, bogus)
    finally:
        RegistryClient().delete_manifest(ImageRef.parse(pushed))
    assert list(index.ztocs) == [img.layers[0].digest]
    assert index.unusable is None and index.coverage_unchecked is None
    assert unusable is None and unchecked is not None
    assert unchecked.startswith(
        "the index's coverage was not checked for 1 layer(s): `soci ztoc info` gave no span "
        f"count for {img.layers[0].digest[7:19]} (")
    assert read.encode() == late  # not zeros: the index maps the file to its own spans
    assert fetched is not None and 0 < fetched < len(gz) / 2  # lazily: not the whole layer


def test_a_layer_of_many_gzip_members_is_not_measured_lazily_and_says_why(
        docker_client: Any, registry: str, lazy_registry: LazyRegistry,
        cold_settings: ColdSettings) -> None:
    """Its index spans only the first member (soci 0.4.1): the lazy arm is "not measured",
    with the reason, instead of a figure from a node that would read zeros."""
    tar, gz, _late = _layer(members=True)
    pushed = _push(tar, gz)
    settings = NodeSettings(registry, cold=cold_settings,
                            lazy=LazySettings(registry=lazy_registry))
    try:
        img = read_layers(RegistryClient(), ImageRef.parse(pushed))
        with Cleanup(f"{RUN}{secrets.token_hex(3)}", client=docker_client) as cu:
            nodes = NodeStarts(settings, run_id=cu.run_id, cleanup=cu, client=docker_client)
            got = nodes._lazy(img)
            index = nodes._indexes[img.manifest.digest]
        assert cu.errors == []
    finally:
        RegistryClient().delete_manifest(ImageRef.parse(pushed))
    assert index.unusable is not None and "several gzip members" in index.unusable
    assert got is not None and got["lazy"] is False and got["pull_s"] is None
    assert "covers 1 span(s) of 4 MiB of layer" in got["notes"][0]
    assert "soci-snapshotter#1834" in got["notes"][0]
