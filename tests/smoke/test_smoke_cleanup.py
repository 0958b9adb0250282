"""Cleanup: signals unwind and remove everything; sweep removes leftovers of killed runs."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab import cleanup
from servelab.cleanup import Cleanup
from servelab.errors import Terminated

ROOT = Path(__file__).resolve().parents[2]


def _labelled(client: Any, run_id: str) -> dict[str, list[Any]]:
    flt = {"label": f"servelab.run-id={run_id}"}
    return {
        "containers": client.api.containers(all=True, filters=flt),
        "volumes": client.api.volumes(filters=flt).get("Volumes") or [],
        "images": client.api.images(filters=flt),
    }


def test_sigterm_in_block_unwinds_and_cleans(tmp_path: Path) -> None:
    d = tmp_path / "scratch"
    d.mkdir()
    calls: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated), Cleanup("test-run", client=object()) as cu:
        cu.path(d)
        cu.callback(lambda: calls.append("cb"))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # interrupted by the handler
    assert not d.exists()
    assert calls == ["cb"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_keep_leaves_paths_but_runs_callbacks(tmp_path: Path) -> None:
    calls: list[str] = []
    with Cleanup("test-run", keep=True, client=object()) as cu:
        cu.path(tmp_path)
        cu.callback(lambda: calls.append("cb"))
    assert tmp_path.exists() and calls == ["cb"]
    assert cu.kept == [f"path {tmp_path}"]
    assert cu.labels()["servelab.keep"] == "true"


def test_owner_alive_tracks_the_process() -> None:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        owner = cleanup.owner_id(p.pid)
        assert cleanup.owner_alive(owner) is True
    finally:
        p.kill()
        p.wait()
    assert cleanup.owner_alive(owner) is False
    assert cleanup.owner_alive("another-host:1:1") is None


@pytest.mark.docker
@pytest.mark.registry
def test_sweep_removes_only_dead_runs(docker_client: Any, base_image: str) -> None:
    rid = f"test-sweep-{secrets.token_hex(3)}"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner = cleanup.owner_id(dead.pid)
    dead.wait()
    mk = {
        "dead": {**cleanup.labels(rid), cleanup.OWNER_LABEL: dead_owner},
        "kept": {**cleanup.labels(rid, keep=True), cleanup.OWNER_LABEL: dead_owner},
        "alive": cleanup.labels(rid),
    }
    ids = {k: docker_client.api.create_container(base_image, ["true"], labels=v)["Id"]
           for k, v in mk.items()}
    vol = docker_client.api.create_volume(f"{rid}-vol", labels=mk["dead"])["Name"]
    try:
        result = cleanup.sweep(client=docker_client)
        left = {c["Id"] for c in _labelled(docker_client, rid)["containers"]}
        assert left == {ids["kept"], ids["alive"]}
        assert _labelled(docker_client, rid)["volumes"] == []
        assert any(ids["dead"][:12] in r for r in result.removed)
        assert any(vol in r for r in result.removed)
        cleanup.sweep(run_id=rid, client=docker_client)
        assert _labelled(docker_client, rid)["containers"] == []
    finally:
        for cid in ids.values():
            cleanup.remove_container(docker_client, cid, [])
        cleanup.remove_volume(docker_client, vol, [])


@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.parametrize("case", [
    ((signal.SIGTERM,), "netns", 143),
    ((signal.SIGINT,), "helper", 130),
    # a CI runner's cancel: SIGINT, then SIGTERM while servelab is still cleaning up
    ((signal.SIGINT, signal.SIGTERM), "helper", 130),
], ids=["SIGTERM-netns", "SIGINT-helper", "SIGINT-then-SIGTERM-helper"])
def test_signal_mid_readiness_leaves_nothing(
    fixture_images: Callable[[str], str], docker_client: Any, tmp_path: Path,
    model_dir: Path, case: tuple[tuple[int, ...], str, int],
) -> None:
    sigs, probe, code = case
    rid = f"test-sig-{secrets.token_hex(3)}"
    argv = [sys.executable, "-m", "servelab", "smoke", fixture_images("never-ready"),
            "--model", str(model_dir), "--timeout", "60", "--run-id", rid, "--probe", probe,
            "--no-weights-scan", "--out", str(tmp_path / "out")]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=ROOT)
    try:
        wanted = 2 if probe == "helper" else 1  # the server (and the probe helper)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.poll() is None:
            running = docker_client.api.containers(
                filters={"label": f"servelab.run-id={rid}", "status": "running"})
            if len(running) >= wanted:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the run did not reach readiness polling: {p.communicate()}")
        time.sleep(1.0)  # mid-readiness: the prober is polling /health (503)
        assert _probers(rid), "no prober of this run was found while it ran"
        for n, sig in enumerate(sigs):
            if n:
                time.sleep(0.05)  # the first signal's cleanup is under way
            p.send_signal(sig)
        _out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, err
    assert _labelled(docker_client, rid) == {"containers": [], "volumes": [], "images": []}
    assert _probers(rid) == []


def _probers(rid: str) -> list[int]:
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return [pid for pid in pids if _is_prober(pid, rid)]


def _is_prober(pid: int, rid: str) -> bool:
    """A host prober of run *rid* (its environment), or the docker CLI of its helper."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return f"SERVELAB_PROBE_RUN={rid}".encode() in env or f"servelab-probe-{rid}".encode() in cmd
