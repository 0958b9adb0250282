"""The private registry (``--cold-start-registry private``): a real registry binary of the
run's own, plain and TLS over one storage, each with its access log; stopped and removed with
its blobs, swept after a killed run; clear errors when it cannot be had."""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import ssl
import urllib.request
from pathlib import Path

import pytest

from servelab.cleanup import owner_id
from servelab.cli import main
from servelab.errors import ExitCode, ToolMissingError
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ownregistry
from servelab.node.coldpull import served_in_full
from servelab.node.containerd import OWNER_FILE
from servelab.node.ownregistry import PREFIX, PrivateRegistry, registry_binary, sweep

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "experiment.yaml"
#: above the kernel's default pid_max (4194304): no process has it
DEAD_PID = 2**22 + 17

def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _push(addr: str, repo: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    RegistryClient(timeout=30).upload_blob(ImageRef.parse(f"{addr}/{repo}:t"), digest,
                                           len(data), lambda: io.BytesIO(data))
    return digest


def test_plain_and_tls_serve_one_storage_log_apart_and_leave_nothing(tmp_path: Path) -> None:
    data = os.urandom(300_000)
    with PrivateRegistry("test-own-registry", tls=True, parent=tmp_path) as reg:
        work, pids = reg.work, [c.pid for c in reg._children]
        assert reg.secure and reg.ca and reg.tls_log and len(pids) == 2
        assert reg.plain.startswith("127.0.0.1:") and reg.secure != reg.plain
        digest = _push(reg.plain, "servelab-coldstart/x/treatment", data)
        # the blob is in the run's own storage
        name = digest.removeprefix("sha256:")
        assert (reg.data / "docker/registry/v2/blobs/sha256" / name[:2] / name / "data"
                ).read_bytes() == data
        # the same storage over TLS, its certificate signed by the run's CA, for the IP
        ctx = ssl.create_default_context(cafile=str(reg.ca))
        url = f"https://{reg.secure}/v2/servelab-coldstart/x/treatment/blobs/{digest}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                             urllib.request.HTTPSHandler(context=ctx))
        with opener.open(url, timeout=30) as r:
            assert r.read() == data
        # each process has its own access log: the GET is in the TLS one only
        import time

        for _ in range(40):
            ok, _missing = served_in_full(reg.tls_log.read_text(),
                                          "servelab-coldstart/x/treatment", {digest: len(data)})
            if ok:
                break
            time.sleep(0.05)
        assert ok, reg.tls_log.read_text()[-2000:]
        assert not served_in_full(reg.log.read_text(), "servelab-coldstart/x/treatment",
                                  {digest: len(data)})[0]
        assert "PUT /v2/servelab-coldstart/x/treatment/blobs/uploads/" in reg.log.read_text()
        # the certificate names the loopback alias the snapshotter reaches it by
        cert = (reg.work / "tls" / "cert.pem").read_text()
        assert "BEGIN CERTIFICATE" in cert
    assert not work.exists()
    assert not [p for p in pids if _alive(p)]


def test_without_tls_one_process_and_no_certificate(tmp_path: Path) -> None:
    with PrivateRegistry("test-own-plain", tls=False, parent=tmp_path) as reg:
        assert reg.secure is None and reg.ca is None and reg.tls_log is None
        assert len(reg._children) == 1 and ownregistry.answers(reg.plain)
        assert not (reg.work / "tls").exists()


def test_a_taken_port_is_tried_again_on_another(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = busy.getsockname()[1]
        real = ownregistry.free_port
        ports = iter([taken])
        monkeypatch.setattr(ownregistry, "free_port", lambda: next(ports, None) or real())
        with PrivateRegistry("test-own-port", tls=False, parent=tmp_path) as reg:
            assert reg.plain != f"127.0.0.1:{taken}"
            assert ownregistry.answers(reg.plain)
            assert "address already in use" in reg.log.read_text()


def test_sweep_removes_a_killed_runs_registry_and_keeps_a_live_one(tmp_path: Path) -> None:
    dead = PrivateRegistry("test-own-dead", tls=False, parent=tmp_path)
    live = PrivateRegistry("test-own-live", tls=False, parent=tmp_path)
    try:
        dead.start()
        live.start()
        pid = dead._children[0].pid
        (dead.work / OWNER_FILE).write_text(json.dumps(
            {"pid": DEAD_PID, "owner": f"{socket.gethostname()}:{DEAD_PID}:12345"}))
        notes = sweep(tmp_path)
        assert notes == [f"removed a private registry left by a killed run: {dead.work}"]
        assert not dead.work.exists()
        for _ in range(100):
            if not _alive(pid):
                break
            import time

            time.sleep(0.02)
        assert not _alive(pid)
        assert live.work.is_dir() and ownregistry.answers(live.plain)
        assert json.loads((live.work / OWNER_FILE).read_text())["owner"] == owner_id()
    finally:
        dead.stop()
        live.stop()
    assert not list(tmp_path.glob(PREFIX + "*"))


def test_no_registry_binary_is_exit_3_with_how_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ownregistry.proc, "which", lambda tool: None)
    with pytest.raises(ToolMissingError) as e:
        registry_binary()
    assert e.value.exit_code == ExitCode.MISSING_TOOL
    assert "apt-get install docker-registry" in (e.value.hint or "")


def test_no_registry_binary_refuses_the_run_before_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    real = ownregistry.proc.which
    monkeypatch.setattr(ownregistry.proc, "which",
                        lambda tool: None if tool in ownregistry.BINARIES else real(tool))
    rc = main(["run", str(EXAMPLE), "--out", str(tmp_path / "out"),
               "--cold-start-registry", "private"])
    err = capsys.readouterr().err
    assert rc == 3, err
    assert "docker-registry" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("result.json"))


def test_another_registrys_files_with_private_is_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "registry.log"
    log.write_text("")
    rc = main(["run", str(EXAMPLE), "--out", str(tmp_path / "out"),
               "--cold-start-registry", "private", "--registry-log", str(log)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "--registry-log" in err and "Traceback" not in err


def _registry_processes() -> list[str]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if PREFIX in cmd:
                found.append(cmd)
    return found


@pytest.mark.docker
@pytest.mark.slow
def test_ctrl_c_during_a_runs_cold_pull_stops_and_removes_its_registry(
        tmp_path: Path, base_image: str) -> None:
    """A real ``servelab run --cold-start-registry private`` interrupted once its image is in
    the registry: the registry process and its storage (the pushed blobs) are gone."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    parent = Path(tempfile.gettempdir())
    before = set(parent.glob(PREFIX + "*"))
    child = subprocess.Popen(
        [sys.executable, "-m", "servelab", "run", str(EXAMPLE), "--out", str(tmp_path / "out"),
         "--stages", "build,smoke", "--repeats", "1", "--cold-start-registry", "private"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    try:
        seen = []
        deadline = time.monotonic() + 900
        for line in child.stderr:
            seen.append(line)
            if "cold start: private containerd pull" in line or "cold start: servelab's" in line:
                break
            assert time.monotonic() < deadline, "".join(seen[-20:])
        else:
            raise AssertionError("the run ended before its cold pull: " + "".join(seen[-20:]))
        mine = set(parent.glob(PREFIX + "*")) - before
        assert len(mine) == 1 and any((d / "data").rglob("data") for d in mine), mine
    finally:  # whatever failed above, the run is interrupted and cleans up after itself
        child.send_signal(signal.SIGINT)
        _out, err = child.communicate(timeout=120)
    assert child.returncode not in (0, 1), err[-2000:]
    assert "Traceback" not in err
    assert not (set(parent.glob(PREFIX + "*")) - before)
    assert not [c for c in _registry_processes() if any(str(d) in c for d in mine)]


def test_a_lint_only_run_starts_none_and_sweeps_a_killed_runs(tmp_path: Path) -> None:
    import tempfile

    from servelab.run.options import RunOptions
    from servelab.run.runner import run_experiment
    from servelab.spec import load_experiment

    dead = PrivateRegistry("test-own-swept", tls=False)
    try:
        dead.start()
        (dead.work / OWNER_FILE).write_text(json.dumps(
            {"pid": DEAD_PID, "owner": f"{socket.gethostname()}:{DEAD_PID}:12345"}))
        before = set(Path(tempfile.gettempdir()).glob(PREFIX + "*"))
        res = run_experiment(load_experiment(EXAMPLE), RunOptions(
            out_dir=tmp_path / "out", stages=("lint",), repeats=1,
            cold_start_registry="private"))
        assert not dead.work.exists()
        assert f"removed a private registry left by a killed run: {dead.work}" in \
            res.summary["notes"]
        # no registry was started for a run without the smoke stage
        assert set(Path(tempfile.gettempdir()).glob(PREFIX + "*")) <= before
        assert not any("servelab's own on" in n for n in res.summary["notes"])
    finally:
        dead.stop()
