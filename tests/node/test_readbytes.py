"""Bytes read before ready for a full pull (:mod:`servelab.node.readbytes`), on the real page
cache, the real containerd and the local registry: the bundled example's control image (its
model baked into /models, hidden at start by the mounted model) pulled cold, started once
timed and once untimed after its unpacked files were evicted."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.cleanup import Cleanup
from servelab.node import CtrStartSpec, PrivateContainerd, start_in
from servelab.node.readbytes import (
    _libc,
    read_before_ready,
    regular_files,
    resident_bytes,
    snapshot_roots,
)
from servelab.smoke.modelload import evict_page_cache
from servelab.smoke.result import SmokeSettings
from servelab.spec import load_experiment

from .pushed import pushed_example

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MiB = 1 << 20


# ---------------------------------------------------------------------------- the page cache


def test_resident_bytes_follow_reads_and_eviction(tmp_path: Path) -> None:
    f = tmp_path / "blob.bin"
    f.write_bytes(os.urandom(4 * MiB))
    libc = _libc()
    evict_page_cache([f])
    assert resident_bytes(f, 4 * MiB, libc) == 0
    with f.open("rb") as fh:
        fh.read(1 * MiB)
    got = resident_bytes(f, 4 * MiB, libc)
    # the first MiB, and whatever readahead brought in with it; never the whole file
    assert 1 * MiB <= got < 4 * MiB, got
    assert resident_bytes(tmp_path / "missing", 10, libc) == 0
    assert resident_bytes(f, 0, libc) == 0


def test_regular_files_never_follow_links(tmp_path: Path) -> None:
    """A layer's absolute link names a host file: it is neither listed nor counted."""
    fs = tmp_path / "snap" / "fs"
    (fs / "usr" / "bin").mkdir(parents=True)
    (fs / "usr" / "bin" / "tool").write_bytes(b"x" * 10)
    (fs / "usr" / "bin" / "python").symlink_to("/usr/bin/python3")
    (fs / "lib").symlink_to("/usr/lib", target_is_directory=True)
    (fs / "dev").mkdir()
    os.mkfifo(fs / "dev" / "fifo")
    assert regular_files([fs]) == [(fs / "usr" / "bin" / "tool", "usr/bin/tool", 10)]


# ---------------------------------------------------------------------------- the real start


@pytest.fixture(scope="module")
def control(docker_client: Any, registry: str) -> Iterator[str]:
    """The example's control image (model baked into /models), pushed; its reference."""
    if not (EXAMPLES / "model" / "weights.safetensors").is_file():
        pytest.skip("examples/model/weights.safetensors missing: run scripts/bootstrap.sh")
    with pushed_example(docker_client, registry, "Dockerfile.control", "readbytes") as image:
        yield image[1]


@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.usefixtures("root_only")
def test_read_before_ready_counts_what_the_start_read(control: str) -> None:
    s = SmokeSettings.from_experiment(load_experiment(EXAMPLES / "experiment.yaml"))
    spec = CtrStartSpec.from_settings(s)
    pulled = 70 * MiB
    rid = f"test-readbytes-{secrets.token_hex(3)}"
    with Cleanup(rid) as cu, PrivateContainerd(rid) as pc:
        pc.pull(control, plain_http=True)
        timed = start_in(pc, control, spec, cleanup=cu, timeout_s=120)
        rb = read_before_ready(pc, control, spec, bytes_pulled=pulled, cleanup=cu,
                               timeout_s=120)
        baked = [f for f in regular_files(snapshot_roots(pc)) if f[1].startswith("models/")]
        baked_resident = sum(resident_bytes(p, n, _libc()) for p, _, n in baked)
    assert timed.outcome == "ready" and rb.outcome == "ready", rb.notes
    assert rb.measured and rb.evicted_bytes == rb.unpacked_bytes > 60_000_000
    # the server read its interpreter, its libraries and its code: some, not all
    assert 1 * MiB < rb.read_bytes < rb.unpacked_bytes
    assert 0 < rb.files_read < rb.unpacked_files
    dirs = dict(rb.top_dirs)
    assert len(dirs) <= 5 and sum(dirs.values()) <= rb.read_bytes
    assert any(d.startswith("/usr") for d in dirs), dirs
    # the control's baked model: unpacked (pulled), hidden by the mount, never read
    assert sum(n for _, _, n in baked) > 8 * MiB
    assert baked_resident == 0
    assert "/models" not in dirs
    d = rb.to_dict()
    assert d["share_of_pulled"] == pytest.approx(rb.read_bytes / pulled, abs=1e-4)
    assert d["line"].startswith(f"pulled {pulled / 1e6:.1f} MB; ")
    assert d["line"].endswith("read before ready")


@pytest.mark.usefixtures("root_only")
def test_other_snapshotters_are_not_measured(tmp_path: Path) -> None:
    rid = f"test-readbytes-{secrets.token_hex(3)}"
    s = SmokeSettings.from_experiment(load_experiment(EXAMPLES / "experiment.yaml"))
    with Cleanup(rid) as cu, PrivateContainerd(rid) as pc:
        rb = read_before_ready(pc, "x", CtrStartSpec.from_settings(s), bytes_pulled=1,
                               cleanup=cu, timeout_s=5, snapshotter="soci")
        empty = read_before_ready(pc, "x", CtrStartSpec.from_settings(s), bytes_pulled=1,
                                  cleanup=cu, timeout_s=5)
    assert not rb.measured and rb.notes == [
        "not measured: the soci snapshotter's files are not plain directories here"]
    assert rb.to_dict()["line"] == ("bytes read before ready: not measured: the soci "
                                    "snapshotter's files are not plain directories here")
    assert not empty.measured and empty.notes[0].startswith(
        "not measured: no unpacked snapshot found under ")
