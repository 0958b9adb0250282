"""Lazy pulling (SOCI) on the real parts: a private containerd with soci-snapshotter-grpc and
FUSE, the TLS registry that bootstrap.sh serves over the same storage as the plain one (with its
own access log), and the example's base image copied into a repository of the test's own (so
that its SOCI index and referrers tag are this test's alone). The index is built in a
throw-away instance, discovered by the timed pull without being named, checked lazy by the
snapshotter's and the registry's logs, and everything is gone after the pull."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoststate import host_state as _host_state
from lazyimages import copy_image, tags_of
from servelab.cleanup import Cleanup
from servelab.errors import ServelabError
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ImageLayers, read_layers
from servelab.node.containerd import PREFIX, sweep
from servelab.node.lazypull import (
    DEFAULT_MIN_LAYER_SIZE,
    SociIndex,
    account_bytes,
    build_index,
    lazy_pull,
    unpublish_index,
)
from servelab.node.soci import LazyRegistry, lazy_unavailable

pytestmark = [pytest.mark.registry, pytest.mark.slow, pytest.mark.usefixtures("root_only")]

TLS_REGISTRY = "127.0.0.1:5443"
RUN = "test-lazy-"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
#: a module of the base's Python that the harness start imports (read from the image, lazily)
IMPORT = "import email.mime.multipart, json, http.client; print('imported')"


#: a child that pulls lazily in a Cleanup block and holds the instance (as a start would)
CHILD = """
import sys, time
from pathlib import Path
from servelab.cleanup import Cleanup
from servelab.errors import ServelabError
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import read_layers
from servelab.node.lazypull import SociIndex, lazy_pull
from servelab.node.soci import LazyRegistry
img = read_layers(RegistryClient(), ImageRef.parse(sys.argv[1]))
reg = LazyRegistry(sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
index = SociIndex(img.ref, sys.argv[6], 10 << 20, {img.layers[-1].digest: ""}, 0.0)
with Cleanup(sys.argv[2]) as cu, lazy_pull(img, reg, index, cu.run_id, cu) as (pc, rec):
    print("held", rec.lazy, flush=True)
    time.sleep(120)
"""


def host_state() -> dict[str, object]:
    return _host_state(PREFIX + RUN)


@pytest.fixture(scope="module")
def copied(base_image: str) -> Iterator[ImageLayers]:
    ref = copy_image(base_image, f"servelab-lazy/{RUN}{secrets.token_hex(3)}/base")
    img = read_layers(RegistryClient(), ImageRef.parse(ref))
    yield img
    RegistryClient().delete_manifest(ImageRef.parse(ref))


@pytest.fixture(scope="module")
def indexed(copied: ImageLayers, lazy_registry: LazyRegistry) -> Iterator[SociIndex]:
    with Cleanup(f"{RUN}{secrets.token_hex(3)}") as cu:
        yield build_index(copied, lazy_registry, cu.run_id, cu)


def test_available_here() -> None:
    assert lazy_unavailable() is None


def test_the_index_is_pushed_beside_the_image(copied: ImageLayers,
                                              indexed: SociIndex) -> None:
    big = [b.digest for b in copied.layers if b.size >= DEFAULT_MIN_LAYER_SIZE]
    assert big and sorted(indexed.ztocs) == sorted(big)
    assert indexed.min_layer_size == DEFAULT_MIN_LAYER_SIZE
    # the image digest did not change; the referrers fallback tag names the image's digest
    digest = ImageRef.parse(copied.ref).digest
    assert digest is not None
    assert tags_of(copied) == sorted(["t", digest.replace(":", "-")])
    index = RegistryClient().get_manifest(ImageRef.parse(copied.ref).with_digest(indexed.digest))
    assert json.loads(index.body)["subject"]["digest"] == digest


def test_lazy_pull_is_discovered_checked_lazy_and_leaves_nothing(
        copied: ImageLayers, indexed: SociIndex, lazy_registry: LazyRegistry) -> None:
    sweep()
    before = host_state()
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu, lazy_pull(copied, lazy_registry, indexed, rid, cu) as (pc, rec):
        assert pc.pid is not None and (pc.work / "soci.sock").exists()
        assert rec.pull_s is not None, rec.notes  # the pull itself worked (else: why)
        during = rec.to_dict()
        # the image's snapshots are prepared in the running instance: a start can follow
        # (pc.ctr runs ctr inside the instance's mount namespace, where the FUSE mounts are)
        out = pc.ctr("run", "--snapshotter", "soci", "--runc-root", str(pc.work / "runc"),
                        "--fifo-dir", str(pc.work / "fifo"), "--rm", rec.ref,
                        f"{rid}-harness", "python3", "-c", IMPORT, timeout=120)
        assert out.stdout.strip() == "imported"
        account_bytes(pc, rec, copied)
    assert host_state() == before
    assert cu.errors == []
    assert during["discovered"] is True and during["index_digest"] == indexed.digest
    assert during["lazy"] is True and during["fell_back"] is False, during["notes"]
    assert rec.remote_layers == rec.indexed_layers == len(indexed.ztocs) >= 1
    assert rec.root_empty and rec.page_cache.startswith("sync; the registry's blob files")
    # the registry served the indexed layers in parts during the pull, never whole
    for layer in indexed.ztocs:
        assert rec.requests[layer] and {s for s, _ in rec.requests[layer]} == {206}
    size = {b.digest: b.size for b in copied.layers}
    big = sum(size[d] for d in indexed.ztocs)
    assert rec.pull_s is not None and 0 < rec.pull_s < 30
    fetched, read = rec.bytes_fetched, rec.bytes_read
    assert fetched is not None and read is not None
    # the start read part of the big layer on demand: fetched in parts, less than it all
    assert fetched["partial_requests"] > 1 and 0 < fetched["layers_partial"] < big
    assert fetched["layers_full"] == sum(n for d, n in size.items() if d not in indexed.ztocs)
    assert read["synchronous_bytes_served"] > 0 and read["background_bytes_served"] == 0
    assert 0 < read["layer_bytes_fetched"] < big
    assert not rec.notes, rec.notes


def test_without_an_index_the_pull_is_not_lazy_and_says_why(
        base_image: str, lazy_registry: LazyRegistry, indexed: SociIndex) -> None:
    """Another repository holds the same image with no index: the snapshotter finds none,
    prepares every layer locally, and the record says the figure is not lazy."""
    ref = copy_image(base_image, f"servelab-lazy/{RUN}{secrets.token_hex(3)}/plain")
    img = read_layers(RegistryClient(), ImageRef.parse(ref))
    rid = f"{RUN}{secrets.token_hex(3)}"
    try:
        with Cleanup(rid) as cu, lazy_pull(img, lazy_registry, indexed, rid, cu) as (_pc, rec):
            pass
    finally:
        RegistryClient().delete_manifest(ImageRef.parse(ref))
    assert rec.discovered is False and rec.lazy is False and rec.fell_back is True
    assert rec.notes[0].startswith(f"lazy not measured: index not discovered on {TLS_REGISTRY}: ")
    assert any(n.startswith("silent fallback to a full pull: ") and "fetched in full (200)" in n
               for n in rec.notes), rec.notes


def test_the_index_is_deleted_at_the_end(base_image: str,
                                         lazy_registry: LazyRegistry) -> None:
    """An index built (in a repository of its own: the module's index stays) and unpublished:
    its manifest and referrers tag are gone."""
    ref = copy_image(base_image, f"servelab-lazy/{RUN}{secrets.token_hex(3)}/gone")
    img = read_layers(RegistryClient(), ImageRef.parse(ref))
    try:
        with Cleanup(f"{RUN}{secrets.token_hex(3)}") as cu:
            index = build_index(img, lazy_registry, cu.run_id, cu, keep=True)
        digest = ImageRef.parse(img.ref).digest
        assert digest is not None and tags_of(img) == sorted(["t", digest.replace(":", "-")])
        unpublish_index(img, index.digest)
        assert tags_of(img) == ["t"]
        with pytest.raises(ServelabError):
            RegistryClient().get_manifest(ImageRef.parse(ref).with_digest(index.digest))
    finally:
        RegistryClient().delete_manifest(ImageRef.parse(ref))

def _held_child(img: ImageLayers, reg: LazyRegistry, index: SociIndex
                ) -> subprocess.Popen[str]:
    """A child holding a lazily pulled instance (its FUSE mounts up); returned once it does."""
    assert reg.ca is not None and reg.log is not None
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, img.ref, f"{RUN}{secrets.token_hex(3)}", reg.host,
         str(reg.ca), str(reg.log), index.digest],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        line = child.stdout.readline()
        assert line.strip() == "held True", (line, child.poll())
        held = host_state()
        assert len(held["temp_dirs"]) == 1 and held["processes"], held
    except BaseException:
        child.send_signal(signal.SIGINT)  # its cleanup removes the instance
        child.communicate(timeout=60)
        raise
    return child


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_while_held_leaves_nothing(
        copied: ImageLayers, indexed: SociIndex, lazy_registry: LazyRegistry,
        sig: signal.Signals) -> None:
    sweep()
    before = host_state()
    child = _held_child(copied, lazy_registry, indexed)
    child.send_signal(sig)
    child.communicate(timeout=60)
    assert child.returncode != 0
    assert host_state() == before


def test_a_killed_run_with_fuse_mounts_is_swept(
        copied: ImageLayers, indexed: SociIndex, lazy_registry: LazyRegistry) -> None:
    sweep()
    before = host_state()
    child = _held_child(copied, lazy_registry, indexed)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    left = host_state()
    names = " ".join(str(p) for p in left["processes"])
    assert "soci-snapshotter-grpc" in names and "containerd --config" in names, left
    notes = sweep()
    assert any(left["temp_dirs"][0] in n for n in notes), notes
    deadline = time.monotonic() + 10
    while host_state() != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_state() == before


#: a child that builds the SOCI index in a Cleanup block (SIGTERM arrives during soci create)
INDEX_CHILD = """
import sys
from pathlib import Path
from servelab.cleanup import Cleanup
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import read_layers
from servelab.node.lazypull import build_index
from servelab.node.soci import LazyRegistry
img = read_layers(RegistryClient(), ImageRef.parse(sys.argv[1]))
reg = LazyRegistry(sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
with Cleanup(sys.argv[2]) as cu:
    build_index(img, reg, cu.run_id, cu, min_layer_size=1 << 20)
"""


def _soci_create_running(run_id: str) -> bool:
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmd.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"soci" in argv[:1] + [a.rsplit(b"/", 1)[-1] for a in argv[:1]] \
                and b"create" in argv and any(run_id.encode() in a for a in argv):
            return True
    return False


def test_sigterm_while_the_index_is_built_leaves_no_temp_file(
        copied: ImageLayers, lazy_registry: LazyRegistry) -> None:
    """soci create stages each layer in a temp file: it goes into the instance's own dir,
    registered before soci starts, so a SIGTERM mid-create leaves nothing in TMPDIR."""
    assert lazy_registry.ca is not None and lazy_registry.log is not None
    sweep()
    before = host_state()
    tmp = Path(tempfile.mkdtemp(prefix="sl-", dir="/tmp"))
    rid = f"{RUN}{secrets.token_hex(3)}"
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", INDEX_CHILD, copied.ref, rid, lazy_registry.host,
             str(lazy_registry.ca), str(lazy_registry.log)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "TMPDIR": str(tmp)})
        seen = False
        deadline = time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline:
            if _soci_create_running(rid.lower()):
                seen = True
                staged = [p for p in tmp.rglob("*") if p.is_file() and p.parent.name == "tmp"]
                if staged or time.monotonic() > deadline - 100:
                    break
            time.sleep(0.002)
        assert seen, "soci create was not seen running"
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=120)
        assert child.returncode != 0, err[-2000:]
        assert list(tmp.iterdir()) == [], sorted(str(p) for p in tmp.rglob("*"))
        assert host_state() == before
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
