"""The server started from a private containerd (:func:`servelab.node.start_in`), on the real
parts: the bundled example's treatment image, pushed to the local registry, pulled cold by a
private containerd and started there; its OCI spec compared field by field with the hardened
Docker start's (:func:`servelab.smoke.stage.container_kwargs`, as the smoke stage creates it);
and nothing left on the host after a start, a refused start, or Ctrl-C during one."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hoststate import host_state as _host_state
from servelab import proc
from servelab.cleanup import Cleanup
from servelab.node import CtrStartSpec, PrivateContainerd, start_in
from servelab.node.containerd import PREFIX, sweep, temp_parent
from servelab.smoke.model import model_info
from servelab.smoke.result import SmokeSettings
from servelab.smoke.stage import container_kwargs
from servelab.spec import load_experiment

from .pushed import pushed_example

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.usefixtures("root_only")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: the engine's own containerd (read only: ``containers info`` of the smoke container)
ENGINE_CTD = "/var/run/docker/containerd/containerd.sock"
RUN = "test-ctrstart-"
MARKER = PREFIX + RUN
#: containerd's default seccomp profile and moby's allow nearly the same syscalls; they are
#: kept apart by a few names each release: the counts may differ by this fraction
SECCOMP_TOLERANCE = 0.10

#: differences of the two specs that are by design, and why (anything else fails the test)
BY_DESIGN = {
    "namespaces.network.path": "Docker names its own netns file; servelab's start names the "
                               "namespace of its loopback-only holder process",
    "env.HOSTNAME": "Docker adds HOSTNAME=<container id> to the environment; ctr does not",
    "linux.cgroupsPath": "each runtime names its own cgroup",
}


@pytest.fixture(scope="module")
def settings() -> SmokeSettings:
    exp = load_experiment(EXAMPLES / "experiment.yaml")
    if not (EXAMPLES / "model" / "weights.safetensors").is_file():
        pytest.skip("examples/model/weights.safetensors missing: run scripts/bootstrap.sh")
    return SmokeSettings.from_experiment(exp)


@pytest.fixture(scope="module")
def treatment(docker_client: Any, base_image: str, registry: str) -> Iterator[tuple[str, str]]:
    """(engine name, registry reference by digest) of the example's treatment image."""
    with pushed_example(docker_client, registry, "Dockerfile", "ctrstart",
                        {"BASE_IMAGE": base_image}) as image:
        yield image


def _ctr_spec(settings: SmokeSettings) -> CtrStartSpec:
    return CtrStartSpec.from_settings(settings, model_info(settings.model))


def cgroups(marker: str) -> list[str]:
    """cgroup dirs whose name holds *marker* (runc makes ``/<namespace>/<id>`` per controller)."""
    return sorted(str(p) for p in Path("/sys/fs/cgroup").glob(f"*/*{marker}*"))


def cgroup_processes(marker: str) -> list[str]:
    """Processes in cgroups whose path holds *marker*: a container's processes (they do not
    name the instance's dir on their command line)."""
    out: set[str] = set()
    for procs in Path("/sys/fs/cgroup").glob(f"*/*{marker}*/*/cgroup.procs"):
        with contextlib.suppress(OSError):
            out.update(procs.read_text().split())
    return sorted(out)


def host_state() -> dict[str, Any]:
    return {**_host_state(MARKER), "cgroups": cgroups("servelab-" + RUN),
            "container_processes": cgroup_processes("servelab-" + RUN)}


@pytest.fixture
def clean_host() -> dict[str, Any]:
    sweep()
    before = host_state()
    assert before["processes"] == [] and before["temp_dirs"] == [], before
    return before


# ---------------------------------------------------------------------------- the start


def test_start_in_is_ready_on_one_timeline_and_leaves_nothing(
        treatment: tuple[str, str], settings: SmokeSettings,
        clean_host: dict[str, Any]) -> None:
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu, PrivateContainerd(rid) as pc:
        pc.pull(treatment[1], plain_http=True)
        rec = start_in(pc, treatment[1], _ctr_spec(settings), cleanup=cu, timeout_s=120)
        after_start = pc.ctr("containers", "ls", "-q").stdout.split()
    assert host_state() == clean_host
    assert after_start == []  # the container was deleted before containerd stopped
    assert rec.outcome == "ready", (rec.notes, rec.log_tail)
    assert rec.pid is not None and rec.pid > 1
    assert rec.requests == settings.request.count if settings.request else 0
    assert rec.requests_ok == rec.requests
    ph = rec.phases()
    assert all(v is not None and v >= 0 for v in ph.values()), ph
    assert ph["start_to_tcp_accept_s"] <= ph["start_to_ready_s"]  # type: ignore[operator]
    assert ph["start_to_ready_s"] <= ph["start_to_first_good_request_s"]  # type: ignore[operator]
    assert rec.spec["model"] == {"source": str((EXAMPLES / "model").resolve()),
                                 "destination": "/models", "read_only": True}
    assert rec.to_dict()["snapshotter"] == "overlayfs"


def test_refused_spec_is_a_failed_record_and_leaves_nothing(
        treatment: tuple[str, str], settings: SmokeSettings, tmp_path: Path,
        clean_host: dict[str, Any]) -> None:
    """A model directory that does not exist: runc cannot mount it, the start fails, the
    record says why, and the container is gone."""
    spec = _ctr_spec(settings)
    spec.model = (str(tmp_path / "gone"), "/models")
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu, PrivateContainerd(rid) as pc:
        pc.pull(treatment[1], plain_http=True)
        rec = start_in(pc, treatment[1], spec, cleanup=cu, timeout_s=60)
        left = pc.ctr("containers", "ls", "-q").stdout.split()
    assert host_state() == clean_host
    assert left == []
    assert rec.outcome == "failed" and rec.start_to_ready_s is None
    assert any("ctr tasks start failed" in n for n in rec.notes), rec.notes


#: a child that starts the treatment in a private containerd, as a run does, and says when
#: the start began; the test interrupts it there
CHILD = """
import sys, time
from servelab.cleanup import Cleanup
from servelab.node import CtrStartSpec, PrivateContainerd, start_in
from servelab.node import ctrstart
from servelab.smoke.model import model_info
from servelab.smoke.result import SmokeSettings
from servelab.spec import load_experiment
s = SmokeSettings.from_experiment(load_experiment(sys.argv[3]))
orig = ctrstart._Run.start
def start(self, rec):
    print("starting", flush=True)
    orig(self, rec)
ctrstart._Run.start = start
def ready(rec):
    print("ready", flush=True)
    time.sleep(600)
with Cleanup(sys.argv[2]) as cu, PrivateContainerd(sys.argv[2]) as pc:
    pc.pull(sys.argv[1], plain_http=True)
    start_in(pc, sys.argv[1], CtrStartSpec.from_settings(s, model_info(s.model)), cleanup=cu,
             timeout_s=120, on_ready=ready if sys.argv[4] == "hold" else None)
print("done", flush=True)
"""


def test_ctrl_c_during_the_start_leaves_nothing(
        treatment: tuple[str, str], clean_host: dict[str, Any]) -> None:
    rid = f"{RUN}{secrets.token_hex(3)}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, treatment[1], rid,
                              str(EXAMPLES / "experiment.yaml"), "go"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip() == "starting", child.stderr.read() if child.stderr else ""
    time.sleep(0.3)  # the task is being started: its shim and runc are running
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode != 0 and "done" not in out, (out, err)
    assert "KeyboardInterrupt" in err
    assert host_state() == clean_host


def _killed_while_serving(ref: str, rid: str) -> dict[str, Any]:
    """Start *ref* in a child run, SIGKILL it once the server is ready; the host state then."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, ref, rid,
                              str(EXAMPLES / "experiment.yaml"), "hold"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    line = child.stdout.readline()
    while line.strip() == "starting":
        line = child.stdout.readline()
    assert line.strip() == "ready", child.stderr.read() if child.stderr else ""
    child.kill()
    child.communicate(timeout=30)
    return host_state()


def test_sigkill_while_serving_is_swept_by_the_next_run(
        treatment: tuple[str, str], clean_host: dict[str, Any]) -> None:
    """A run killed with SIGKILL while its server runs leaves containerd, the shim, the
    server and its namespace holder; the next run's sweep removes them all, and the cgroup
    dirs."""
    rid = f"{RUN}{secrets.token_hex(3)}"
    left = _killed_while_serving(treatment[1], rid)
    assert left["processes"] and left["container_processes"], left  # killed: all still there
    notes = sweep()
    assert [n for n in notes if RUN in n], notes
    assert host_state() == clean_host


def test_containers_of_an_instance_whose_dir_is_gone_are_swept(
        treatment: tuple[str, str], clean_host: dict[str, Any]) -> None:
    """The instance's dir removed without its containers (a servelab without the cgroup step
    swept it): the server still runs; the next sweep finds it by its namespace's cgroups."""
    rid = f"{RUN}{secrets.token_hex(3)}"
    _killed_while_serving(treatment[1], rid)
    work = next(temp_parent().glob(f"{MARKER}{rid.removeprefix(RUN)}-*"))
    for pid in (int(p.split()[0]) for p in host_state()["processes"]):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    shutil.rmtree(work)
    left = host_state()
    assert left["container_processes"] and left["cgroups"] and not left["temp_dirs"], left
    notes = sweep()
    assert f"removed the containers of a private containerd whose dir was gone: servelab-{rid}" \
        in notes, notes
    assert host_state() == clean_host


# ---------------------------------------------------------------------------- the two specs


def _docker_spec(client: Any, name: str, s: SmokeSettings) -> dict[str, Any]:
    """The hardened smoke container's OCI spec, from the engine's containerd."""
    attrs = client.api.inspect_image(name)
    kw = container_kwargs(name, s, attrs.get("Config") or {}, model_info(s.model),
                          labels={"servelab.test": "ctrstart"},
                          name=f"servelab-test-ctrstart-{secrets.token_hex(3)}", gpu_mode=None)
    c = client.containers.create(**kw)
    try:
        c.start()
        info = proc.run(["ctr", "-a", ENGINE_CTD, "-n", "moby", "containers", "info", c.id])
        return dict(json.loads(info.stdout)["Spec"])
    finally:
        c.remove(force=True)


def _caps(spec: dict[str, Any]) -> dict[str, list[str]]:
    caps = (spec.get("process") or {}).get("capabilities") or {}
    return {k: sorted(caps.get(k) or []) for k in
            ("bounding", "effective", "permitted", "inheritable", "ambient")}


def _seccomp(spec: dict[str, Any]) -> tuple[str, int]:
    sc = (spec.get("linux") or {}).get("seccomp") or {}
    names = {n for rule in sc.get("syscalls") or [] if rule.get("action") == "SCMP_ACT_ALLOW"
             for n in rule.get("names") or []}
    return str(sc.get("defaultAction")), len(names)


def _mount(spec: dict[str, Any], dst: str) -> dict[str, Any]:
    found = [m for m in spec.get("mounts") or [] if m.get("destination") == dst]
    assert found, f"no mount at {dst}"
    return dict(found[-1])  # the last one mounted there is what the process sees


def _env(spec: dict[str, Any]) -> set[str]:
    return {e for e in (spec.get("process") or {}).get("env") or []
            if not e.startswith("HOSTNAME=")}  # BY_DESIGN["env.HOSTNAME"]


def compare(docker: dict[str, Any], ctr: dict[str, Any], s: SmokeSettings) -> list[str]:
    """The differences between the two specs in the fields that make the start hardened."""
    out = []
    dp, cp = docker["process"], ctr["process"]

    def same(what: str, a: object, b: object) -> None:
        if a != b:
            out.append(f"{what}: docker {a!r}, ctr {b!r}")

    same("process.user.uid", dp["user"]["uid"], cp["user"]["uid"])
    same("process.user.gid", dp["user"]["gid"], cp["user"]["gid"])
    same("process.capabilities", _caps(docker), _caps(ctr))
    same("process.noNewPrivileges", dp.get("noNewPrivileges"), cp.get("noNewPrivileges"))
    same("process.args", dp.get("args"), cp.get("args"))
    same("process.cwd", dp.get("cwd"), cp.get("cwd"))
    same("process.env", _env(docker), _env(ctr))
    same("root.readonly", docker["root"].get("readonly"), ctr["root"].get("readonly"))
    (da, dn), (ca, cn) = _seccomp(docker), _seccomp(ctr)
    same("linux.seccomp.defaultAction", da, ca)
    if not dn or abs(dn - cn) > SECCOMP_TOLERANCE * dn:
        out.append(f"linux.seccomp allowed syscalls: docker {dn}, ctr {cn}")
    dm, cm = _mount(docker, "/models"), _mount(ctr, "/models")
    same("mounts[/models].source", dm["source"], cm["source"])
    same("mounts[/models].options", sorted(dm["options"]), sorted(cm["options"]))
    same("mounts[/dev/shm]", _mount(docker, "/dev/shm"), _mount(ctr, "/dev/shm"))
    for path in s.serve.writable_paths:
        dt, ct = _mount(docker, path), _mount(ctr, path)
        same(f"mounts[{path}].type", dt["type"], ct["type"])
        same(f"mounts[{path}].options", sorted(dt["options"]), sorted(ct["options"]))
    dns = {n["type"] for n in docker["linux"]["namespaces"]}
    cns = {n["type"] for n in ctr["linux"]["namespaces"]}
    same("linux.namespaces", dns, cns)
    if "network" not in cns:
        out.append("ctr: no network namespace of its own")
    return out


def test_ctr_spec_matches_the_docker_start_field_by_field(
        docker_client: Any, treatment: tuple[str, str], settings: SmokeSettings,
        clean_host: dict[str, Any]) -> None:
    docker = _docker_spec(docker_client, treatment[0], settings)
    rid = f"{RUN}{secrets.token_hex(3)}"
    with Cleanup(rid) as cu, PrivateContainerd(rid) as pc:
        pc.pull(treatment[1], plain_http=True)
        rec = start_in(pc, treatment[1], _ctr_spec(settings), cleanup=cu, timeout_s=120)
    assert rec.outcome == "ready", rec.notes
    assert rec.oci_spec is not None
    assert compare(docker, rec.oci_spec, settings) == []
    # the hardening itself, not only its sameness
    assert rec.oci_spec["process"]["user"]["uid"] == 10001
    assert _caps(rec.oci_spec) == {k: [] for k in _caps(rec.oci_spec)}
    assert rec.oci_spec["root"]["readonly"] is True
    shm = _mount(rec.oci_spec, "/dev/shm")  # BY_DESIGN["/dev/shm"]: sized as shmSize
    assert f"size={64 << 20}" in shm["options"] and settings.serve.shm_size == "64m"
    assert host_state() == clean_host


def test_compare_catches_a_difference(docker_client: Any, treatment: tuple[str, str],
                                      settings: SmokeSettings) -> None:
    """The comparison is not blind: the Docker spec against itself with one capability
    kept, the model writable and no network namespace differs in exactly those fields."""
    docker = _docker_spec(docker_client, treatment[0], settings)
    other = json.loads(json.dumps(docker))
    other["process"]["capabilities"]["bounding"] = ["CAP_NET_RAW"]
    _mounts = [m for m in other["mounts"] if m["destination"] == "/models"]
    _mounts[-1]["options"] = [o for o in _mounts[-1]["options"] if o != "rro"]
    other["linux"]["namespaces"] = [n for n in other["linux"]["namespaces"]
                                    if n["type"] != "network"]
    found = compare(docker, other, settings)
    assert [f.split(":")[0] for f in found] == [
        "process.capabilities", "mounts[/models].options", "linux.namespaces",
        "ctr"], found
