"""The cold pull through a private containerd, on the real containerd and the local registry:
checked cold (empty root, every blob served in full by the registry's log), timed, and leaving
nothing behind after a pull, a failed pull, Ctrl-C, or a SIGKILL (swept by the next run)."""

from __future__ import annotations

import dataclasses
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from hoststate import host_state as _host_state
from servelab.cleanup import Cleanup
from servelab.errors import CapabilityError
from servelab.node import ColdSettings, ImageLayers, containerd_cold_pull
from servelab.node.coldpull import METHOD
from servelab.node.containerd import (
    MAX_CONCURRENT_DOWNLOADS,
    PREFIX,
    sweep,
    temp_parent,
    unavailable,
)

pytestmark = [pytest.mark.registry, pytest.mark.usefixtures("root_only")]

#: a child that pulls the base cold in a Cleanup block, as servelab run does
CHILD = """
import sys
from pathlib import Path
from servelab.cleanup import Cleanup
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ColdSettings, containerd_cold_pull, read_layers
img = read_layers(RegistryClient(), ImageRef.parse(sys.argv[1]))
with Cleanup(sys.argv[2]) as cu:
    containerd_cold_pull(img, ColdSettings(Path(sys.argv[3]), Path(sys.argv[4])), cu.run_id, cu)
print("pulled")
"""


#: this module's run ids, and the instance dirs named after them (other runs on the machine,
#: with their own instances, are left out of the comparison)
RUN = "test-ctd-"
MARKER = PREFIX + RUN


def host_state() -> dict[str, object]:
    return _host_state(MARKER)


@pytest.fixture
def clean_host() -> Iterator[dict[str, object]]:
    """The host's state before the test (no leftovers of earlier runs)."""
    sweep()
    before = host_state()
    assert before["processes"] == [] and before["temp_dirs"] == [], before
    yield before


def test_available_here() -> None:
    assert unavailable() is None


def test_cold_pull_is_checked_and_leaves_nothing(
        base_image: str, base_layers: ImageLayers, cold_settings: ColdSettings,
        clean_host: dict[str, object]) -> None:
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu:
        rec = containerd_cold_pull(base_layers, cold_settings, rid, cu)
    assert host_state() == clean_host
    assert rec.method == METHOD and rec.max_concurrent_downloads == MAX_CONCURRENT_DOWNLOADS
    assert rec.check is not None and rec.check.pop("load_1m") >= 0
    # the root on a filesystem of its own: gone by unmount, so no repeat pays for the
    # previous one's clean-up (a tree deleted file by file on ext4 with discard)
    assert rec.check.pop("root_fs").startswith("an ext4 filesystem of its own (")
    assert rec.check == {"cold": True, "root_empty": True, "blobs_served_in_full": True,
                         "page_cache": f"sync; the registry's blob files evicted "
                         f"({len(base_layers.layers) + 1} of {len(base_layers.layers) + 1})",
                         "detail": []}
    assert rec.bytes_pulled == base_layers.total_bytes and rec.bytes_present == 0
    # each layer's download end is on the pull's timeline, before the pull returned
    for x in rec.layers:
        assert x.downloaded_s is not None and 0 < x.downloaded_s <= rec.total_s
    assert rec.download_s + (rec.unpack_s or 0) == pytest.approx(rec.total_s)
    assert (rec.unpack_s or 0) > 0  # the base's 8,000 files take a while to unpack
    # containerd's own CPU time for it: decompressing 66 MB and writing 8,000 files
    assert rec.runtime_cpu_s is not None and 0.1 < rec.runtime_cpu_s < rec.total_s * 2
    assert rec.summary()["cold_check"]["cold"] is True
    assert cu.errors == []


def test_without_the_log_the_check_says_not_checked(
        base_layers: ImageLayers, clean_host: dict[str, object]) -> None:
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu:
        rec = containerd_cold_pull(base_layers, ColdSettings(), rid, cu)
    assert host_state() == clean_host
    assert rec.check is not None
    assert rec.check["blobs_served_in_full"] is None and rec.check["cold"] is True
    assert rec.check["page_cache"] == "sync; registry blobs not evicted (no --registry-data)"
    assert rec.check["detail"] == ["the registry's access log was not checked (no "
                                   "--registry-log)"]


def test_a_failed_pull_is_a_missing_capability_and_leaves_nothing(
        base_layers: ImageLayers, cold_settings: ColdSettings,
        clean_host: dict[str, object]) -> None:
    missing = base_layers.ref.rpartition("@")[0] + "@sha256:" + "0" * 64
    gone = dataclasses.replace(base_layers, ref=missing)
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu, pytest.raises(CapabilityError, match="could not pull") as e:
        containerd_cold_pull(gone, cold_settings, rid, cu)
    assert e.value.exit_code == 3
    assert host_state() == clean_host


def _child(base_image: str, cold_settings: ColdSettings) -> subprocess.Popen[str]:
    rid = f"{RUN}{secrets.token_hex(3)}"
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, base_image, rid, str(cold_settings.registry_data),
         str(cold_settings.registry_log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_pull(child: subprocess.Popen[str]) -> None:
    """Until the child's ``ctr images pull`` runs."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(" images pull " in p for p in host_state()["processes"]):
            return
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    raise AssertionError("the pull did not start")


def test_ctrl_c_during_the_pull_leaves_nothing(
        base_image: str, cold_settings: ColdSettings, clean_host: dict[str, object]) -> None:
    child = _child(base_image, cold_settings)
    _wait_for_pull(child)
    child.send_signal(signal.SIGINT)
    _out, err = child.communicate(timeout=60)
    assert child.returncode != 0 and "KeyboardInterrupt" in err
    assert host_state() == clean_host


def test_a_killed_run_is_swept_by_the_next(
        base_image: str, cold_settings: ColdSettings, clean_host: dict[str, object]) -> None:
    child = _child(base_image, cold_settings)
    _wait_for_pull(child)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    left = host_state()
    assert len(left["temp_dirs"]) == 1 and left["processes"], left  # containerd outlives it
    notes = sweep()
    gone = f"removed a private containerd left by a killed run: {temp_parent()}/"
    assert f"{gone}{left['temp_dirs'][0]}" in notes, notes
    assert host_state() == clean_host


def test_a_live_runs_instance_is_not_swept(base_layers: ImageLayers,
                                           clean_host: dict[str, object]) -> None:
    from servelab.node.containerd import PrivateContainerd

    with PrivateContainerd(f"{RUN}{secrets.token_hex(3)}") as ctd:
        assert sweep() == []
        assert ctd.work.name.startswith(PREFIX) and ctd.root_empty()
        assert ctd.ctr("version").returncode == 0
    assert host_state() == clean_host


@pytest.mark.docker
def test_a_registry_with_credentials_keeps_the_fetch_and_says_why(
        docker_client: object, registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """ctr would take them only on its command line: servelab's fetch stays (it sends them
    in a header), and the reason is recorded."""
    from servelab.node import NodeSettings, NodeStarts

    def starts() -> NodeStarts:
        with Cleanup(f"{RUN}{secrets.token_hex(3)}", client=docker_client) as cu:
            return NodeStarts(NodeSettings(registry), run_id=cu.run_id, cleanup=cu,
                              client=docker_client)

    assert starts().cold_fallback is None
    monkeypatch.setenv("SERVELAB_REGISTRY_USER", "ci")
    monkeypatch.setenv("SERVELAB_REGISTRY_PASSWORD", "not-a-real-secret")
    why = starts().cold_fallback
    assert why is not None and f"the registry {registry} has credentials" in why
    assert "not-a-real-secret" not in why
