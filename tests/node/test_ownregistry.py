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


# ---------------------------------------------------------------- one copy of shared layers

def _image(tmp_path: Path, name: str, layer: bytes, user: str) -> tuple[Path, str, str]:
    """An OCI archive of one gzip layer (*layer*'s tar) and a config naming *user*:
    (archive, manifest digest, layer digest)."""
    from ocitest import E, archive, tar_bytes, write_layout

    root = tmp_path / name
    digest = write_layout(root, [tar_bytes([E("srv/lib.so", layer)])],
                          config={"config": {"User": user}})
    index = json.loads((root / "index.json").read_text())
    manifest = json.loads((root / "blobs/sha256" / index["manifests"][0]["digest"][7:]
                           ).read_bytes())
    return archive(root, tmp_path / f"{name}.oci.tar"), digest, manifest["layers"][0]["digest"]


def _blob_file(reg: PrivateRegistry, digest: str) -> Path:
    h = digest.removeprefix("sha256:")
    return reg.data / "docker/registry/v2/blobs/sha256" / h[:2] / h / "data"


def test_a_second_repository_mounts_the_layers_the_first_pushed(tmp_path: Path) -> None:
    """Two arms that share a layer: the second push links it from the first arm's repository
    (the distribution API's mount), sends only its config and manifest, and the registry
    stores the layer once; the second repository serves it byte for byte."""
    from servelab.node.engine import push_archive

    layer = os.urandom(3 << 20)
    a, a_digest, layer_digest = _image(tmp_path, "control", layer, "0")
    b, b_digest, b_layer = _image(tmp_path, "treatment", layer, "10001")
    assert b_layer == layer_digest and b_digest != a_digest
    client = RegistryClient(timeout=60)
    with PrivateRegistry("test-own-mount", tls=False, parent=tmp_path) as reg:
        first = push_archive(a, a_digest, "control", f"{reg.plain}/x/control:t", client).ref
        from servelab.image.push import TestedImage, push_tested

        second = push_tested(TestedImage("treatment", b_digest, b, 1),
                             f"{reg.plain}/x/treatment:t", client,
                             mount_from=(ImageRef.parse(first).repository,))
        assert second.blobs_mounted == 1 and second.blobs_uploaded == 1  # the config
        assert second.bytes_uploaded < 4096 < len(layer)
        log = reg.log.read_text()
        mounted = (f"POST /v2/x/treatment/blobs/uploads/?mount=sha256%3A{layer_digest[7:]}"
                   "&from=x%2Fcontrol HTTP/1.1\" 201")
        assert mounted in log, log[-3000:]
        puts = [line for line in log.splitlines() if "PUT /v2/x/treatment/blobs/" in line]
        assert len(puts) == 1  # the config's upload; the declined mount's session cancelled
        assert "DELETE /v2/x/treatment/blobs/uploads/" in log
        blobs = list((reg.data / "docker/registry/v2/blobs/sha256").glob("*/*/data"))
        assert sum(p.stat().st_size > 1 << 20 for p in blobs) == 1
        with client.open_blob(ImageRef.parse(f"{reg.plain}/x/treatment:t"), layer_digest) as r:
            assert hashlib.sha256(r.read()).hexdigest() == layer_digest[7:]
        # without a repository to mount from, the layer is sent (and counted so)
        third = push_tested(TestedImage("treatment", b_digest, b, 1),
                            f"{reg.plain}/x/other:t", client)
        assert third.blobs_mounted == 0 and third.bytes_uploaded > len(layer) // 2


def test_parked_layers_leave_the_storage_and_come_back_checked(tmp_path: Path) -> None:
    """Between two pulls the run's registry holds no layer: park removes the layer's file
    (not the small config), restore copies it back from the archive, verified, and the
    registry serves it again; a blob restored from a damaged archive is never served half
    written: an error naming the blob, and no file."""
    from servelab.errors import InputError
    from servelab.node.engine import push_archive
    from servelab.node.ownregistry import Parking

    layer = os.urandom(3 << 20)
    arc, digest, layer_digest = _image(tmp_path, "img", layer, "10001")
    client = RegistryClient(timeout=60)
    with PrivateRegistry("test-own-park", tls=False, parent=tmp_path) as reg:
        pushed = push_archive(arc, digest, "treatment", f"{reg.plain}/x/img:t", client).ref
        ref = ImageRef.parse(pushed)
        from servelab.node import read_layers

        img = read_layers(client, ref)
        parking = Parking(reg.data)
        freed = parking.park([(b.digest, b.size) for b in (*img.layers, img.config)], arc)
        assert freed == img.layers[0].size > 1 << 20
        assert not _blob_file(reg, layer_digest).exists()
        assert _blob_file(reg, img.config.digest).is_file()  # small blobs stay
        assert not client.blob_exists(ref, layer_digest)
        assert parking.restore({"sha256:" + "0" * 64}) == 0  # not parked: nothing done
        assert parking.restore(set(img.layer_digests)) == freed
        assert parking.parked == {} and parking.bytes_restored == freed
        with client.open_blob(ref, layer_digest) as r:
            assert hashlib.sha256(r.read()).hexdigest() == layer_digest[7:]
        # a damaged archive: the copy stops at the digest check, nothing is left to serve
        parking.park([(b.digest, b.size) for b in img.layers], arc)
        raw = bytearray(arc.read_bytes())
        at = raw.find(_blob_bytes(tmp_path / "img", layer_digest)[1000:1064])
        assert at > 0
        raw[at] ^= 0xFF
        arc.write_bytes(bytes(raw))
        with pytest.raises(InputError, match=layer_digest[7:19]):
            parking.restore(set(img.layer_digests))
        assert not _blob_file(reg, layer_digest).exists()
        assert not list(_blob_file(reg, layer_digest).parent.glob(".restoring"))
        # still parked: put back from another archive that holds the same layer
        assert layer_digest in parking.parked
        other, _, same = _image(tmp_path, "other", layer, "0")
        assert same == layer_digest
        assert parking.restore(set(img.layer_digests), other) == freed
        with client.open_blob(ref, layer_digest) as r:
            assert hashlib.sha256(r.read()).hexdigest() == layer_digest[7:]


def _blob_bytes(layout: Path, digest: str) -> bytes:
    return (layout / "blobs/sha256" / digest[7:]).read_bytes()


@pytest.mark.docker
@pytest.mark.slow
def test_a_two_arm_run_mounts_shared_layers_and_parks_them_between_pulls(
        tmp_path: Path, base_image: str) -> None:
    """The bundled example's two arms, two repeats each, through the run's own registry: each
    repeat's cold pull finds its layers (put back from the archive after the registry parked
    them) and is checked cold; the second arm's push mounted the base layers it shares with
    the first; nothing of the registry is left."""
    import subprocess
    import sys
    import tempfile

    parent = Path(tempfile.gettempdir())
    before = set(parent.glob(PREFIX + "*"))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "servelab", "run", str(EXAMPLE), "--out", str(out),
         "--stages", "build,smoke", "--repeats", "2", "--cold-start-registry", "private"],
        capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: the control runs as root
    assert "the registry's layers back from" in done.stderr, done.stderr[-3000:]
    for arm in ("control", "treatment"):
        for n in (1, 2):
            cs = json.loads((out / arm / f"repeat-{n}" / "result.json").read_text()
                            )["metrics"]["coldstart"]
            assert cs["cold"]["cold_check"]["cold"] is True, (arm, n, cs["cold"])
            assert any("parked" in x for x in cs["notes"]), (arm, n, cs["notes"])
    # the second arm's push linked the base layers the first arm's push had sent
    t1 = json.loads((out / "treatment" / "repeat-1" / "result.json").read_text())
    c1 = json.loads((out / "control" / "repeat-1" / "result.json").read_text())
    pushes = [x for r in (c1, t1) for x in r["metrics"]["coldstart"]["notes"]
              if x.startswith("pushed ")]
    assert len(pushes) == 2, pushes
    first, second = sorted(pushes, key=lambda x: " 0 mounted" not in x)
    assert " 0 mounted" in first and " 0 mounted" not in second, pushes
    assert not (set(parent.glob(PREFIX + "*")) - before)
