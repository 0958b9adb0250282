"""The server started from a private containerd (:class:`~servelab.node.containerd.
PrivateContainerd`) right after its pull: pull -> create -> start -> ready -> first good request
on one timeline, on the runtime a node uses.

API::

    spec = CtrStartSpec.from_settings(smoke_settings, model_info)
    rec = start_in(pc, ref, spec, snapshotter="overlayfs", cleanup=cu, timeout_s=120)
    rec.create_s, rec.start_call_s, rec.start_to_ready_s, rec.pid, rec.notes

The OCI spec is the hardened Docker start's (:func:`servelab.smoke.stage.container_kwargs`),
built with ``ctr containers create`` flags: read-only root, the image's user (or the
experiment's), every capability dropped from all five sets, no-new-privileges, containerd's
default seccomp profile, a tmpfs per writable path and ``/dev/shm`` of ``shmSize``, the model
bind-mounted read-only at its mount path, the image's env plus the experiment's, and the
image's command with the experiment's args appended. Its network namespace is one servelab
makes (``unshare --net``, loopback up, nothing else: Docker's ``--network none``) and names with
``--with-ns``; the readiness prober (:mod:`servelab.smoke.prober`) enters it before the start.

Nothing of the start is left on the host: ``/run/containerd`` is bind-mounted from the
instance's dir inside its private mount namespace (``ctr containers create`` has no
``--runc-root``: runc's state and the shims' sockets land there instead), the IO FIFOs and the
container's log are in the instance's dir (``--fifo-dir``, ``--log-uri``), and the container
and its task are killed and deleted, and the cgroup dirs runc made for the namespace removed,
before containerd stops: on success, failure, timeout and Ctrl-C (the run's cleanup).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from servelab import proc
from servelab.errors import CapabilityError, CommandError, InputError
from servelab.node.containerd import CONTAINER_PREFIX, remove_cgroups
from servelab.smoke.prober import ProbeConfig, ProbeEvent, Prober
from servelab.smoke.result import check_response

if TYPE_CHECKING:
    from servelab.cleanup import Cleanup
    from servelab.node.containerd import PrivateContainerd
    from servelab.smoke.model import ModelInfo
    from servelab.smoke.result import SmokeSettings
    from servelab.spec import Model, Request

#: every Linux capability (capabilities(7)); ``ctr`` takes no ``ALL``, so each is dropped
CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
    "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
    "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
    "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
    "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
    "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
)
#: the tmpfs options of a writable path: what the Docker start's ``--tmpfs PATH:rw,nosuid,
#: nodev,mode=1777`` gives (the engine adds ``noexec`` and ``rprivate``)
TMPFS_OPTIONS = "noexec:rprivate:rw:nosuid:nodev:mode=1777"
#: the model's bind mount: read-only recursively, as the engine mounts a read-only bind
MODEL_OPTIONS = "rbind:rro:rprivate"
#: /dev/shm as the engine makes it (its size is ``shmSize`` in bytes)
SHM_OPTIONS = "nosuid:noexec:nodev:mode=1777"
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
STOP_TIMEOUT_S = 10.0
#: where the shims and runc keep their state (bind-mounted from the instance's dir)
RUN_DIR = "/run/containerd"

#: holds a network namespace with only loopback, up (Docker's ``--network none``): it sets
#: ``lo`` up (SIOCGIFFLAGS/SIOCSIFFLAGS), says "up", and lives until its stdin closes. Its
#: last argument names the instance's dir, so that the sweep of a killed run finds it.
NETNS_HOLDER = r"""
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
req = struct.pack("16sH22x", b"lo", 0)
flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, req))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))
sys.stdout.write("up\n")
sys.stdout.flush()
sys.stdin.read()
"""


@dataclass
class CtrStartSpec:
    """What the start needs, taken from the smoke settings (:meth:`from_settings`)."""

    port: int
    health_path: str
    readiness_timeout_s: float
    user: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    writable_paths: list[str] = field(default_factory=list)
    shm_size: str = "64m"
    #: (host path, mount path) of the model, bind-mounted read-only
    model: tuple[str, str] | None = None
    request: Request | None = None
    request_timeout_s: float = 30.0
    interval_s: float = 0.005

    @classmethod
    def from_settings(cls, s: SmokeSettings, model: ModelInfo | None = None, *,
                      volume_dir: Path | None = None) -> CtrStartSpec:
        """The spec of the Docker smoke start of *s*; *model* as the smoke resolved it (a
        volume's host directory in *volume_dir*), else taken from ``s.model``'s path. A model
        volume without *volume_dir* is an InputError (it cannot be bind-mounted)."""
        sv = s.serve
        return cls(sv.port, sv.health_path, sv.readiness_timeout_s, sv.user, dict(sv.env),
                   list(sv.args), list(sv.writable_paths), sv.shm_size,
                   _model_mount(model, volume_dir, s.model), s.request, s.request_timeout_s,
                   s.interval_s)

    def to_dict(self) -> dict[str, Any]:
        return {"port": self.port, "health_path": self.health_path,
                "readiness_timeout_s": self.readiness_timeout_s, "user": self.user,
                "env": sorted(self.env), "args": list(self.args),
                "writable_paths": list(self.writable_paths), "shm_size": self.shm_size,
                "model": ({"source": self.model[0], "destination": self.model[1],
                           "read_only": True} if self.model else None),
                "read_only_rootfs": True, "cap_drop": ["ALL"], "no_new_privileges": True,
                "seccomp": "containerd's default profile",
                "network": "own namespace, loopback only"}


def _model_mount(model: ModelInfo | None, volume_dir: Path | None, spec: Model | None
                 ) -> tuple[str, str] | None:
    if model is None and spec is not None and spec.path is not None:
        p = spec.path.resolve()  # as the smoke resolves it (smoke.model), without hashing
        target = str(PurePosixPath(spec.mount_path) / p.name) if p.is_file() else spec.mount_path
        return str(p), target
    if model is None and spec is not None and spec.volume is not None:
        raise InputError(f"the model volume {spec.volume!r} has no host directory to "
                         "bind-mount into the containerd start",
                         hint="give model.path (a directory) for cold starts")
    if model is None:
        return None
    if model.kind == "volume":
        if volume_dir is None:
            raise InputError(f"the model volume {model.mount_source!r} has no host directory "
                             "to bind-mount into the containerd start",
                             hint="give model.path (a directory) for cold starts")
        return str(volume_dir), model.mount_target
    return model.mount_source, model.mount_target


@dataclass
class CtrStart:
    """One start from a private containerd: its phases (seconds, None when not reached), the
    container's pid, the spec used, and what happened in words."""

    snapshotter: str
    container: str
    create_s: float | None = None
    start_call_s: float | None = None
    start_to_tcp_accept_s: float | None = None
    start_to_ready_s: float | None = None
    start_to_first_good_request_s: float | None = None
    pid: int | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    requests_ok: int = 0
    requests: int = 0
    #: "ready", "not-ready" (readiness timeout), "exited", "failed" (refused or never started)
    outcome: str = "failed"
    #: monotonic instants: create called, created, started, tcp accept, ready, first good
    marks: dict[str, float] = field(default_factory=dict)
    log_tail: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the container's OCI spec (``ctr containers info``), read after the timed phases
    oci_spec: dict[str, Any] | None = None

    @property
    def ready(self) -> bool:
        return self.start_to_ready_s is not None

    def phases(self) -> dict[str, float | None]:
        """The phases as the Docker start's timeline names them (``NodeStart.start``)."""
        return {k: getattr(self, k) for k in (
            "create_s", "start_call_s", "start_to_tcp_accept_s", "start_to_ready_s",
            "start_to_first_good_request_s")}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("marks")
        d.pop("oci_spec")
        for k, v in self.phases().items():
            d[k] = round(v, 6) if v is not None else None
        return d


# ---------------------------------------------------------------------------- the start


def start_in(pc: PrivateContainerd, ref: str, spec: CtrStartSpec, *,
             snapshotter: str = "overlayfs", cleanup: Cleanup, timeout_s: float,
             on_ready: Callable[[CtrStart], None] | None = None) -> CtrStart:
    """Start *ref* (pulled, unpacked for *snapshotter*) in *pc* hardened, probe it to ready and
    the first good request, and remove the container and its task again (also at the run's
    cleanup, should this be interrupted). A refused create or start is a record with
    ``outcome == "failed"`` and the reason in ``notes``; a prober that cannot run is a
    CapabilityError. *on_ready* is called at the first health 2xx, the container running."""
    cid = f"{CONTAINER_PREFIX}{secrets.token_hex(4)}"
    rec = CtrStart(snapshotter, cid, spec=spec.to_dict())
    run = _Run(pc, cid, spec, timeout_s, on_ready)
    cleanup.callback(run.close, f"containerd container {cid} in {pc.work}")
    try:
        run.prepare()
        run.create(ref, snapshotter, rec)
        if rec.create_s is not None:
            run.start(rec)
    finally:
        run.close()
    rec.log_tail = run.log_tail()
    return rec


class _Run:
    """The parts of one start, each removed by :meth:`close` (idempotent)."""

    def __init__(self, pc: PrivateContainerd, cid: str, spec: CtrStartSpec,
                 timeout_s: float, on_ready: Callable[[CtrStart], None] | None = None) -> None:
        self.pc = pc
        self.on_ready = on_ready
        self.cid = cid
        self.spec = spec
        self.timeout_s = timeout_s
        self.holder: subprocess.Popen[str] | None = None
        self.prober: Prober | None = None
        self.created = False
        self.log = pc.work / f"{cid}.log"

    # -- set-up
    def prepare(self) -> None:
        _private_run_dir(self.pc)
        self.holder = _netns_holder(self.pc.work)
        self.prober = Prober.spawn_netns(self.cid)

    def create_args(self, ref: str, snapshotter: str) -> list[str]:
        s = self.spec
        args = ["containers", "create", "--snapshotter", snapshotter, "--read-only",
                "--seccomp", "--with-ns", f"network:/proc/{_pid(self.holder)}/ns/net"]
        for cap in CAPABILITIES:
            args += ["--cap-drop", f"CAP_{cap}"]
        for path in s.writable_paths:
            args += ["--mount", f"type=tmpfs,src=tmpfs,dst={path},options={TMPFS_OPTIONS}"]
        args += ["--mount", f"type=tmpfs,src=shm,dst=/dev/shm,options={SHM_OPTIONS}:"
                 f"size={shm_bytes(s.shm_size)}"]
        if s.model is not None:
            args += ["--mount", f"type=bind,src={s.model[0]},dst={s.model[1]},"
                     f"options={MODEL_OPTIONS}"]
        for k, v in s.env.items():
            args += ["--env", f"{k}={v}"]
        if s.user is not None:
            args += ["--user", s.user]
        args += [ref, self.cid]
        if s.args:  # ctr replaces the whole command line: the image's, then the args
            args += [*_image_command(self.pc, ref), *s.args]
        return args

    def create(self, ref: str, snapshotter: str, rec: CtrStart) -> None:
        argv = self.create_args(ref, snapshotter)
        t0 = time.monotonic()
        rec.marks["create_called"] = t0
        try:
            self.created = True  # a create that fails half-way may leave a snapshot
            self.pc.ctr(*argv, timeout=self.timeout_s)
        except CommandError as e:
            rec.notes.append("ctr containers create refused the spec: "
                             + proc.tail(e.stderr, 3, inline=True))
            return
        rec.marks["created"] = time.monotonic()
        rec.create_s = rec.marks["created"] - t0

    # -- the start and the probe
    def start(self, rec: CtrStart) -> None:
        prober = self.prober
        if prober is None:
            raise RuntimeError("start before prepare")
        s = self.spec
        prober.go(_probe_config(s, s.readiness_timeout_s + 2.0), netns_pid=_pid(self.holder))
        pidfile = self.pc.work / f"{self.cid}.pid"
        try:
            self.pc.ctr("tasks", "start", "-d", "--fifo-dir", str(self.pc.work / "fifo"),
                        "--log-uri", f"file://{self.log}", "--pid-file", str(pidfile),
                        self.cid, timeout=self.timeout_s)
        except CommandError as e:
            rec.notes.append("ctr tasks start failed: " + proc.tail(e.stderr, 3, inline=True))
            return
        rec.marks["started"] = time.monotonic()
        rec.start_call_s = rec.marks["started"] - rec.marks["created"]
        rec.pid = _read_pid(pidfile)
        _observe(prober, rec, s, min(self.timeout_s, s.readiness_timeout_s), self.on_ready)
        rec.oci_spec = self.oci_spec()

    def oci_spec(self) -> dict[str, Any] | None:
        """The container's OCI spec as containerd holds it (``ctr containers info``)."""
        r = self.pc.ctr("containers", "info", self.cid, check=False, timeout=STOP_TIMEOUT_S)
        try:
            spec = json.loads(r.stdout).get("Spec") if r.returncode == 0 else None
        except ValueError:
            return None
        return spec if isinstance(spec, dict) else None

    # -- teardown
    def close(self) -> None:
        if self.created:
            self.created = False
            with contextlib.suppress(CommandError):  # containerd gone: so is the container
                self._remove_container()
        prober, self.prober = self.prober, None
        if prober is not None:
            prober.stop()
        holder, self.holder = self.holder, None
        if holder is not None:
            _stop(holder)

    def _remove_container(self) -> None:
        ctr = self.pc.ctr
        ctr("tasks", "kill", "-a", "-s", "SIGKILL", self.cid, check=False, timeout=STOP_TIMEOUT_S)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            r = ctr("tasks", "delete", "-f", self.cid, check=False, timeout=STOP_TIMEOUT_S)
            if r.returncode == 0 or "not found" in r.stderr:
                break
            time.sleep(0.1)
        ctr("containers", "delete", self.cid, check=False, timeout=STOP_TIMEOUT_S)
        remove_cgroups(self.pc.namespace)

    def log_tail(self, lines: int = 20) -> list[str]:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]


def shm_bytes(size: str) -> int:
    """``shmSize`` (``64m``: digits and an optional b/k/m/g, as the schema allows) in bytes."""
    text = size.strip().lower()
    unit = text[-1:] if text[-1:] in _UNITS else ""
    digits = text[: len(text) - len(unit)]
    if not digits.isdigit():
        raise InputError(f"serve.shmSize {size!r} is not a size",
                         hint="write digits and an optional unit b, k, m or g (e.g. 1g)")
    return int(digits) * _UNITS[unit]


def _pid(p: subprocess.Popen[str] | None) -> int:
    if p is None:
        raise RuntimeError("the network namespace is not there")
    return p.pid


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def _probe_config(s: CtrStartSpec, left_s: float) -> ProbeConfig:
    return ProbeConfig.of(s.port, s.health_path, left_s, s.request,
                          request_timeout_s=s.request_timeout_s, interval_s=s.interval_s)


def _observe(prober: Prober, rec: CtrStart, s: CtrStartSpec, ready_within: float,
             on_ready: Callable[[CtrStart], None] | None = None) -> None:
    """The prober's events until it is done, the server exits, or *ready_within* seconds pass
    after the start without a health 2xx; the phases from them."""
    started = rec.marks["started"]
    limit = started + ready_within + (s.request.count * s.request_timeout_s
                                      if s.request is not None else 0.0) + 5.0
    while True:
        ev = prober.next_event(0.02)
        if ev is not None:
            if _take(ev, rec, s):
                break
            if ev.kind == "health" and on_ready is not None:
                on_ready(rec)
            continue
        now = time.monotonic()
        if rec.pid is not None and not _alive(rec.pid):
            rec.outcome = "exited"
            break
        if (rec.start_to_ready_s is None and now > started + ready_within) or now > limit:
            break
    if rec.outcome != "exited":
        rec.outcome = "ready" if rec.ready else "not-ready"
    if not rec.ready:
        rec.notes.append(f"the server was not ready within {ready_within:g} s of the start "
                         f"({rec.outcome})")


def _take(ev: ProbeEvent, rec: CtrStart, s: CtrStartSpec) -> bool:
    """Record one event; True when it ends the probe."""
    t = ev.mono - rec.marks["started"]
    if ev.kind == "accept" and rec.start_to_tcp_accept_s is None:
        rec.start_to_tcp_accept_s = t
    elif ev.kind == "health" and rec.start_to_ready_s is None:
        rec.start_to_ready_s = t
    elif ev.kind == "request" and s.request is not None:
        _request(ev, rec, s.request)
    elif ev.kind == "error":
        raise CapabilityError("the prober could not enter the container's network namespace: "
                              f"{ev.data.get('error')}", hint="run servelab as root")
    return ev.kind in ("done", "timeout", "exit")


def _request(ev: ProbeEvent, rec: CtrStart, req: Request) -> None:
    d = ev.data
    rec.requests += 1
    status = d.get("status")
    body = base64.b64decode(d.get("body") or "")
    if d.get("error") is None and check_response(req, status, body) is None:
        rec.requests_ok += 1
        if rec.start_to_first_good_request_s is None:
            rec.start_to_first_good_request_s = float(d["t1"]) - rec.marks["started"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------- host parts


def _private_run_dir(pc: PrivateContainerd) -> None:
    """Bind-mount ``<instance>/run`` over /run/containerd inside the instance's mount
    namespace (once): runc's state and the shims' sockets stay in the instance's dir."""
    target = pc.work / "run"
    if target.is_dir():
        return
    pid = pc.pid
    if pid is None:
        raise CapabilityError("the private containerd is not running", hint="see its log")
    target.mkdir()
    (pc.work / "fifo").mkdir(exist_ok=True)
    try:
        proc.run(["nsenter", "-t", str(pid), "-m", "--", "mount", "--bind", str(target),
                  RUN_DIR], timeout=30)
    except CommandError as e:
        raise CapabilityError(f"could not give the private containerd its own {RUN_DIR}: "
                              + proc.tail(e.stderr, 2, inline=True),
                              hint=f"{RUN_DIR} must exist (it does where containerd is "
                              "installed)") from e


def _netns_holder(work: Path) -> subprocess.Popen[str]:
    """A process in a new network namespace with loopback up, until it is stopped."""
    p = proc.start(["unshare", "--net", "--", sys.executable, "-c", NETNS_HOLDER, str(work)],
                   new_session=True)
    line = p.stdout.readline() if p.stdout is not None else ""
    if line.strip() != "up":
        err = p.stderr.read() if p.stderr is not None and p.poll() is not None else ""
        _stop(p)
        raise CapabilityError("could not make a network namespace for the start: "
                              + (proc.tail(err, 2, inline=True) or "no output"),
                              hint="servelab needs root and `unshare` (util-linux)")
    return p


def _stop(p: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError):
        if p.stdin is not None:
            p.stdin.close()
    if p.poll() is None:
        p.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=5)
    for f in (p.stdout, p.stderr):
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()


def _image_command(pc: PrivateContainerd, ref: str) -> list[str]:
    """The image's Entrypoint + Cmd, read from its config in the instance's content store."""
    manifest = _content(pc, _image_digest(pc, ref))
    if "manifests" in manifest:  # an index: the first manifest for linux/amd64 or the first
        ms = manifest["manifests"]
        pick = next((m for m in ms if (m.get("platform") or {}).get("architecture")
                     in ("amd64", None)), ms[0])
        manifest = _content(pc, str(pick["digest"]))
    config = _content(pc, str(manifest["config"]["digest"])).get("config") or {}
    return [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]


def _image_digest(pc: PrivateContainerd, ref: str) -> str:
    out = pc.ctr("images", "ls").stdout.splitlines()
    for line in out[1:]:
        parts = line.split()
        if parts and parts[0] == ref:
            return next(p for p in parts if p.startswith("sha256:"))
    raise CapabilityError(f"{ref} is not in the private containerd's image store",
                          hint="pull it into the instance first")


def _content(pc: PrivateContainerd, digest: str) -> dict[str, Any]:
    data = json.loads(pc.ctr("content", "get", digest).stdout)
    if not isinstance(data, dict):
        raise CapabilityError(f"the blob {digest} is not a JSON object")
    return data


__all__ = ["CAPABILITIES", "CtrStart", "CtrStartSpec", "start_in"]
