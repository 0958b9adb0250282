"""The smoke stage: start an image hardened, time it to ready and to a first good request.

API::

    from servelab.smoke.stage import SmokeSettings, smoke_image, render_text
    result = smoke_image(image, experiment_or_settings, run_id=run_id, out_dir=Path(...),
                         first_start=True)
    result.verdict        # "pass", "runs-as-root", "crashed", "not-ready", ... (VERDICTS)
    result.exit_code      # 0 pass, 1 failed, 3 GPU unavailable
    result.to_dict()      # JSON-serialisable; also written to out_dir/smoke.json

The container runs as the image's user (a uid 0 fails), ``--read-only`` with a tmpfs for each
writable path, ``--network none`` (unless the spec allows bridge), ``--shm-size``, the model
mounted read-only (its sha256 recorded and checked), ``--cap-drop ALL`` and
``no-new-privileges``, labelled ``servelab.run-id`` and removed at the end whatever happens
(:mod:`servelab.cleanup`). One prober in the container's network namespace
(:mod:`servelab.smoke.prober`) records the timeline: created, started, first TCP accept, first
health 2xx, first good representative request, on one monotonic clock anchored to wall-clock time.
Failures come with the exit code, OOMKilled, the last log lines and a likely cause
(:mod:`servelab.smoke.diagnose`); baked weights are reported from the image's layers
(:mod:`servelab.smoke.weights`). With ``gpu.required`` the image's NVIDIA_REQUIRE_* are checked
against the host first (:mod:`servelab.smoke.gpu` over :mod:`servelab.gpu`), and no GPU is the
verdict "gpu-unavailable". The settings and result classes live in
:mod:`servelab.smoke.result` and are re-exported here.

Files in *out_dir*: ``smoke.json`` (the result), ``container.log`` (the container's output,
stdout and stderr merged in time order, each line with the engine's timestamp),
``probe-events.jsonl`` (every prober event, times relative to ``created``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab import cleanup as cleanup_mod
from servelab import proc
from servelab.errors import CapabilityError, InputError
from servelab.smoke import gpuphases, modelload
from servelab.smoke.gpu import device_requests, gpu_inside, gpu_preflight, parse_memory_used
from servelab.smoke.model import ModelInfo, model_info
from servelab.smoke.prober import (
    ProbeConfig,
    ProbeEvent,
    Prober,
    cgroup_procs,
    netns_available,
)
from servelab.smoke.render import render_text
from servelab.smoke.result import (
    VERDICTS,
    ContainerState,
    RequestSample,
    RequestStats,
    SmokeResult,
    SmokeSettings,
    Timeline,
    UserCheck,
    as_settings,
    check_response,
    config_uid,
    json_subset,
    percentile,
    proc_euid,
    set_verdict,
)
from servelab.smoke.verdict import decide
from servelab.smoke.weights import scan_archive, scan_image
from servelab.spec import Experiment, Request
from servelab.textio import write_file

if TYPE_CHECKING:
    from servelab.node import NodeStart

__all__ = [
    "VERDICTS", "SmokeResult", "SmokeSettings", "Timeline", "check_response", "config_uid",
    "container_kwargs", "json_subset", "percentile", "proc_euid", "render_text",
    "smoke_image",
]

LOG_TAIL = 2000
TMPFS_OPTIONS = "rw,nosuid,nodev,mode=1777"


# ---------------------------------------------------------------------------- the stage


def smoke_image(
    image: str,
    settings: Experiment | SmokeSettings,
    *,
    run_id: str,
    out_dir: Path,
    first_start: bool = False,
    client: Any = None,
    node: NodeStart | None = None,
) -> SmokeResult:
    """Start *image* hardened, probe it, and return what happened (never prints or exits).

    With *node* (the pulls that just brought the image into the engine), the warm-base pull
    is put on the start's timeline and the node's figures into the result.
    InputError (exit 2) for a missing image or model, CapabilityError (exit 3) when the engine
    or the prober cannot work; every other outcome is a verdict in the result.
    """
    s = as_settings(settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    client = client or cleanup_mod.shared_client()
    attrs = _image_attrs(client, image)
    config = attrs.get("Config") or {}
    res = SmokeResult(image, run_id, first_start, s.to_dict(), image_id=attrs.get("Id"))
    image_user = str(config.get("User") or "")
    run_as = s.serve.user if s.serve.user is not None else image_user
    res.user = UserCheck(image_user, run_as or "(image default: root)", config_uid(run_as))
    res.model = model_info(s.model, client)
    if not _preflight(res, s, client, config):
        with _gpu_locked(res, s):
            with cleanup_mod.Cleanup(run_id, keep=s.keep, client=client) as cu:
                _run_container(res, s, client, cu, config, node=node)
            res.cleanup = {"errors": list(cu.errors), "kept": list(cu.kept)}
            _gpu_after_cleanup(res)
        decide(res, s)
    if node is not None:
        res.node = node.with_start(res.timeline.to_dict()["durations"]
                                   if res.timeline else {}).to_dict()
        res.node["pulls"] = [p.to_dict() for p in (node.cold, node.warm) if p is not None]
    _write(res, out_dir)
    return res


@contextlib.contextmanager
def _gpu_locked(res: SmokeResult, s: SmokeSettings) -> Iterator[None]:
    """One servelab run per GPU at a time (:mod:`servelab.smoke.gpuphases`)."""
    if res.gpu is None:
        yield
        return
    keys = gpuphases.lock_keys(res.gpu.get("host"), s.gpu.count)
    with gpuphases.gpu_lock(keys, timeout_s=s.gpu_lock_timeout_s) as lock:
        res.gpu["lock"] = lock.to_dict()
        yield


def _gpu_after_cleanup(res: SmokeResult) -> None:
    """GPU memory once the container is gone: what it held is freed (or not)."""
    inside = (res.gpu or {}).get("inside")
    if not inside:
        return
    mem = proc.run(["nvidia-smi", "--query-gpu=index,memory.used",
                    "--format=csv,noheader,nounits"], check=False, timeout=30)
    after = parse_memory_used(mem.stdout) if mem.returncode == 0 else None
    inside["memory_after_cleanup"] = after
    inside["memory_freed"] = gpuphases.freed(inside.get("memory_used"), after)


def _image_attrs(client: Any, image: str) -> dict[str, Any]:
    try:
        return dict(client.api.inspect_image(image))
    except Exception as e:
        if type(e).__name__ in ("ImageNotFound", "NotFound"):
            raise InputError(
                f"image {image!r} is not in the engine's image store",
                hint="build or pull it first (servelab build, docker pull, docker load)",
            ) from e
        raise CapabilityError(f"cannot inspect image {image!r}: {e}") from e


def _preflight(res: SmokeResult, s: SmokeSettings, client: Any, config: dict[str, Any]) -> bool:
    """Checks before starting; True when one of them already decided the verdict."""
    m = res.model
    if s.scan_weights:
        known = [(Path(f.relpath).name, f.size) for f in (m.files if m else [])]
        if s.weights_archive is not None and s.weights_archive.is_file():
            res.weights = scan_archive(s.weights_archive, model_files=known)
        else:
            res.weights = scan_image(client, str(res.image_id), model_files=known)
    if m is not None and m.note:
        res.notes.append(f"model: {m.note}")
    if m is not None and m.match is False:
        set_verdict(res, "model-mismatch",
                    f"the model at {m.source} has sha256 {m.sha256}, expected {m.expected_sha256}",
                    "mount the expected model, or update model.sha256 (--model-sha256)")
        return True
    if s.gpu.required:
        return gpu_preflight(res, s, client, config)
    return False


# ---------------------------------------------------------------------------- the container


def container_kwargs(
    image: str, s: SmokeSettings, config: dict[str, Any], model: ModelInfo | None, *,
    labels: dict[str, str], name: str, gpu_mode: str | None,
) -> dict[str, Any]:
    """The Docker SDK ``containers.create`` arguments of a hardened smoke container."""
    from docker.types import Mount

    sv = s.serve
    kw: dict[str, Any] = {
        "image": image, "name": name, "labels": labels, "detach": True,
        "read_only": True, "network_mode": sv.network, "shm_size": sv.shm_size,
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
        "tmpfs": {p: TMPFS_OPTIONS for p in sv.writable_paths},
        "environment": dict(sv.env),
    }
    if sv.user is not None:
        kw["user"] = sv.user
    if sv.args:
        kw["command"] = [*(config.get("Cmd") or []), *sv.args]
    if model is not None:
        if model.kind == "volume":
            mount = Mount(model.mount_target, model.mount_source, type="volume", read_only=True)
        else:
            mount = Mount(model.mount_target, model.mount_source, type="bind", read_only=True)
        kw["mounts"] = [mount]
    if gpu_mode is not None:
        kw["device_requests"] = device_requests(s, gpu_mode)
    return kw


class _ExitWatch:
    """Waits for the container to exit in a thread; ``exited`` is set with the time."""

    def __init__(self, client: Any, cid: str) -> None:
        self.exited = threading.Event()
        self.mono: float | None = None
        threading.Thread(target=self._run, args=(client, cid), daemon=True).start()

    def _run(self, client: Any, cid: str) -> None:
        try:
            client.api.wait(cid, timeout=None)
        except Exception:
            return
        self.mono = time.monotonic()
        self.exited.set()


@dataclass
class _Observed:
    events: list[ProbeEvent] = field(default_factory=list)
    accept: ProbeEvent | None = None
    health: ProbeEvent | None = None
    last_state: str | None = None
    requests: list[ProbeEvent] = field(default_factory=list)
    end: ProbeEvent | None = None  # done, timeout, exit or error
    container_exited: bool = False
    readiness_timeout: bool = False
    hard_limit: bool = False

    def add(self, ev: ProbeEvent) -> None:
        self.events.append(ev)
        if ev.kind == "accept":
            self.accept = ev
        elif ev.kind == "health":
            self.health = ev
        elif ev.kind == "health_state":
            self.last_state = str(ev.data.get("state"))
        elif ev.kind == "request":
            self.requests.append(ev)
        elif ev.kind in ("done", "timeout", "exit", "error"):
            self.end = ev


def _probe_config(s: SmokeSettings, left_s: float) -> ProbeConfig:
    return ProbeConfig.of(s.serve.port, s.serve.health_path, left_s, s.request,
                          request_timeout_s=s.request_timeout_s, interval_s=s.interval_s)


def _wants_netns(s: SmokeSettings) -> bool:
    import os

    if s.probe == "helper":
        return False
    if s.probe == "netns" and os.geteuid() != 0:
        raise CapabilityError("--probe netns needs root (to enter the container's network "
                              "namespace)", hint="run as root or use --probe helper")
    return os.geteuid() == 0


def _run_container(
    res: SmokeResult, s: SmokeSettings, client: Any, cu: cleanup_mod.Cleanup,
    config: dict[str, Any], *, node: NodeStart | None = None,
) -> None:
    network = s.serve.network
    if _wants_netns(s):
        prober = Prober.spawn_netns(res.run_id)
        cu.callback(prober.stop, "prober")
    else:
        prober = _spawn_helper(res, s, cu, network)
        network = f"container:{prober.helper}"
    res.model_load = _model_load_before(res, s, client)
    tl = res.timeline = Timeline()
    if node is not None and node.warm is not None:
        tl.mark("pull_started", node.warm.started_mono)
        tl.mark("pull_downloaded", node.warm.downloaded_mono)
        tl.mark("pull_done", node.warm.done_mono)
    name = f"servelab-smoke-{res.run_id}-{cu.token[:6]}"
    labels = {**cu.labels(), "servelab.stage": "smoke"}
    gpu_mode = res.gpu["mode"] if res.gpu else None
    kw = container_kwargs(res.image_id or res.image, s, config, res.model, labels=labels,
                          name=name, gpu_mode=gpu_mode)
    kw["network_mode"] = network
    try:
        c = client.containers.create(**kw)
    except Exception as e:
        raise InputError(f"the engine refused the container settings: {_first(e)}",
                         hint="check serve.* (shmSize, writablePaths, user) and the model") from e
    cu.container(c.id)
    tl.mark("created")
    res.container = ContainerState(c.id, name)
    # The prober gets its orders before the start: it is polling when the server starts.
    cfg = _probe_config(s, s.serve.readiness_timeout_s + 2.0)
    if prober.mode == "netns":
        prober.go(cfg, netns_cgroups=cgroup_procs(c.id))
    else:
        prober.go(cfg)
    try:
        c.start()
    except Exception as e:
        tl.mark("started")
        res.container.error = _first(e)
        return
    tl.mark("started")
    _probe_and_wait(res, s, client, cu, cid=c.id, prober=prober)


def _model_load_before(res: SmokeResult, s: SmokeSettings, client: Any
                       ) -> modelload.ModelLoad:
    """The model-load record of this start; with ``evict_model_cache`` the mounted model's
    files are dropped from the page cache first."""
    m = res.model
    ml = modelload.ModelLoad(model_bytes=m.total_bytes if m is not None and m.files else None)
    if m is None or not s.evict_model_cache:
        return ml
    where = Path(m.mount_source) if m.kind != "volume" else _volume_dir(client, m.mount_source)
    if where is None or not where.exists():
        ml.page_cache = "not evictable"
        ml.notes.append("the model's files cannot be reached from here to drop them from the "
                        "page cache: block I/O may miss reads served from it")
        return ml
    ev = modelload.evict_page_cache([where])
    ml.page_cache, ml.evicted_bytes = "evicted", ev.bytes
    ml.notes += [f"not evicted: {e}" for e in ev.errors[:5]]
    return ml


def _volume_dir(client: Any, name: str) -> Path | None:
    try:
        mountpoint = str(client.api.inspect_volume(name).get("Mountpoint") or "")
    except Exception:
        return None
    return Path(mountpoint) if mountpoint else None


def _spawn_helper(res: SmokeResult, s: SmokeSettings, cu: cleanup_mod.Cleanup,
                  network: str) -> Prober:
    prober = Prober.spawn_helper(res.image_id or res.image, network=network,
                                 labels=cu.labels(), user=s.serve.user,
                                 name=f"servelab-probe-{res.run_id}-{cu.token[:6]}")
    cu.callback(prober.stop, "probe helper")
    if prober.helper:
        cu.container(prober.helper)
    return prober


def _first(e: BaseException) -> str:
    text = getattr(e, "explanation", None) or str(e)
    return str(text).strip().splitlines()[0][:500] if str(text).strip() else repr(e)


def _confirm_prober(res: SmokeResult, s: SmokeSettings, cu: cleanup_mod.Cleanup, *, cid: str,
                    pid: int, prober: Prober) -> Prober:
    """After the start: give a netns prober the PID as a fallback, or, when this host cannot
    enter the container's namespace (a remote engine), switch to a helper joined late."""
    if prober.mode == "helper":
        res.probe = {"mode": "helper", "how": "a helper container from the image, started "
                     "first; the served container joined its network namespace"}
    elif pid and netns_available(pid):
        prober.send_pid(pid)
        res.probe = {"mode": "netns", "how": "host Python, setns() into the container's "
                     "network namespace (as nsenter -t PID -n), entered while it started"}
    else:
        prober.stop()
        prober = _spawn_helper(res, s, cu, f"container:{cid}")
        prober.go(_probe_config(s, s.serve.readiness_timeout_s))
        res.probe = {"mode": "helper-joined", "how": "the container's namespace could not be "
                     "entered from here; a helper joined it after start (early events are "
                     "upper bounds)"}
    res.probe["interval_ms"] = s.interval_s * 1000
    res.probe["python"] = prober.hello.data.get("python") if prober.hello else None
    return prober


def _probe_and_wait(
    res: SmokeResult, s: SmokeSettings, client: Any, cu: cleanup_mod.Cleanup, *, cid: str,
    prober: Prober,
) -> None:
    if res.container is None or res.user is None or res.timeline is None:
        raise RuntimeError("smoke state not initialised")
    user = res.user
    watch = _ExitWatch(client, cid)
    pid = int((client.api.inspect_container(cid).get("State") or {}).get("Pid") or 0)
    if not pid and _gone(watch, client, cid):
        # it exited before it could be probed: a crash (exit status and log tail), never a
        # helper joined to a container that no longer runs (a missing capability, exit 3)
        res.probe["ended_by"] = "container exit"
        _record(res, s, _Observed(container_exited=True), watch, prober)
        _container_state(res, client, cid, s)
        return
    prober = _confirm_prober(res, s, cu, cid=cid, pid=pid, prober=prober)
    user.euid_start, user.source = _euid(client, cid, pid)

    def on_ready() -> None:
        _block_io_at_ready(res, cid)
        if pid:
            user.euid_ready, _ = _euid(client, cid, pid)

    ready_by = res.timeline.marks["started"] + s.serve.readiness_timeout_s
    obs = _observe(prober, watch, s, on_ready, ready_by)
    if prober.mode == "netns":
        prober.stop()
    if obs.end is not None and obs.end.kind == "error":
        if not _gone(watch, client, cid):
            raise CapabilityError(f"the prober could not enter the container's network "
                                  f"namespace: {obs.end.data.get('error')}",
                                  hint="run as root on the engine's host, or use --probe helper")
        # the server exited before the prober could enter its namespace: a crash, not a
        # missing capability (its exit status and log tail make the smoke's failure)
        obs.end, obs.container_exited = None, True
    _record(res, s, obs, watch, prober)
    if res.gpu is not None and obs.health is not None and not watch.exited.is_set():
        gpu_inside(res, cid)
        inside = res.gpu.get("inside") or {}
        inside["phases"] = gpuphases.phases(inside.get("python_probe"))
    _container_state(res, client, cid, s)


def _gone(watch: _ExitWatch, client: Any, cid: str) -> bool:
    """Whether the container has exited (waiting a moment for the engine to say so)."""
    if watch.exited.wait(2.0):
        return True
    try:
        return not (client.api.inspect_container(cid).get("State") or {}).get("Running")
    except Exception:
        return False


def _block_io_at_ready(res: SmokeResult, cid: str) -> None:
    ml = res.model_load
    if ml is None:
        return
    pids = modelload.cgroup_pids(cgroup_procs(cid))
    ml.block_read_bytes, ml.block_source = modelload.read_block_bytes(cid, pids)
    if ml.block_read_bytes is None:
        ml.notes.append(ml.block_source)
        ml.block_source = None


def _euid(client: Any, cid: str, pid: int) -> tuple[int | None, str | None]:
    if pid:
        e = proc_euid(pid)
        if e is not None:
            return e, f"/proc/{pid}/status (host)"
    try:
        top = client.api.top(cid, ps_args="-o pid,euid")
        titles = [t.upper() for t in top.get("Titles") or []]
        for row in top.get("Processes") or []:
            if str(row[titles.index("PID")]) == str(pid) or not pid:
                return int(row[titles.index("EUID")]), "docker top"
    except Exception:
        return None, None
    return None, None


def _observe(prober: Prober, watch: _ExitWatch, s: SmokeSettings, on_ready: Any,
             ready_by: float) -> _Observed:
    """Collect the prober's events until it is done, the container exits, or the readiness
    timeout (*ready_by*, monotonic) passes without a health 2xx."""
    obs = _Observed()
    budget = s.serve.readiness_timeout_s + 15.0
    if s.request is not None:
        budget += s.request.count * s.request_timeout_s
    limit = time.monotonic() + budget
    while obs.end is None:
        ev = prober.next_event(0.02)
        if ev is not None:
            obs.add(ev)
            if ev.kind == "health":
                on_ready()
            continue
        now = time.monotonic()
        if watch.exited.is_set():
            _drain(prober, obs, 0.3)
            obs.container_exited = True
            break
        if obs.health is None and now > ready_by:
            obs.readiness_timeout = True
            break
        if now > limit:
            obs.hard_limit = True
            break
    return obs


def _drain(prober: Prober, obs: _Observed, seconds: float) -> None:
    until = time.monotonic() + seconds
    while obs.end is None and time.monotonic() < until:
        ev = prober.next_event(until - time.monotonic())
        if ev is None:
            break
        obs.add(ev)


def _record(res: SmokeResult, s: SmokeSettings, obs: _Observed, watch: _ExitWatch,
            prober: Prober) -> None:
    tl = res.timeline
    if tl is None:
        return
    if prober.go_mono is not None:
        tl.mark("prober_started", prober.go_mono)
    first = "an upper bound: it succeeded on the prober's first attempt"
    if obs.accept is not None:
        early = int(obs.accept.data.get("attempts", 9)) <= 2
        tl.mark("first_tcp_accept", obs.accept.mono, first if early else None)
    if obs.health is not None:
        early = int(obs.health.data.get("attempts", 9)) == 1
        tl.mark("first_health_2xx", obs.health.mono, first if early else None)
        if res.model_load is not None:
            body = base64.b64decode(obs.health.data.get("body") or "")
            res.model_load.server_bytes = modelload.server_bytes(body)
    if watch.mono is not None:
        tl.mark("exited", watch.mono)
    res.probe["last_health_answer"] = obs.last_state
    res.probe["ended_by"] = ("container exit" if obs.container_exited else
                             "readiness timeout" if obs.readiness_timeout else
                             "hard limit" if obs.hard_limit else
                             obs.end.kind if obs.end else None)
    res.probe["events"] = [{"ev": e.kind, "t_s": round(tl.rel(e.mono), 6), **e.data}
                           for e in obs.events]
    if s.request is not None and obs.health is not None:
        res.requests = _request_stats(s.request, obs.requests, tl)


def _request_stats(req: Request, events: list[ProbeEvent], tl: Timeline) -> RequestStats:
    stats = RequestStats(req.method, req.path, req.count)
    for ev in events:
        d = ev.data
        body = base64.b64decode(d.get("body") or "")
        status = d.get("status")
        reason = d.get("error") or check_response(req, status, body)
        lat = (float(d["t1"]) - float(d["t0"])) * 1000 if status is not None else None
        stats.samples.append(RequestSample(int(d.get("i", 0)), lat, status, reason is None,
                                           reason, body))
        if reason is None:
            tl.mark("first_good_request", float(d["t1"]))
    return stats


def _container_state(res: SmokeResult, client: Any, cid: str, s: SmokeSettings) -> None:
    st = res.container
    if st is None:
        return
    try:
        state = client.api.inspect_container(cid).get("State") or {}
        if state.get("Running"):
            time.sleep(0.1)  # the engine copies the container's output asynchronously
        raw = client.api.logs(cid, stdout=True, stderr=True, tail=LOG_TAIL, timestamps=True)
    except Exception as e:
        res.notes.append(f"could not read the container's state or logs: {_first(e)}")
        return
    st.status = state.get("Status")
    st.running = bool(state.get("Running"))
    st.exit_code = None if st.running else state.get("ExitCode")
    st.oom_killed = bool(state.get("OOMKilled"))
    st.error = st.error or (state.get("Error") or None)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    lines = sorted(text.splitlines(), key=_log_time)
    res.files["_log_text"] = "".join(line + "\n" for line in lines)
    st.log_tail = [line.partition(" ")[2] for line in lines[-s.log_lines:]]


def _log_time(line: str) -> tuple[str, str]:
    """Sort key of an engine-timestamped log line (stdout and stderr arrive interleaved)."""
    stamp = line.partition(" ")[0].rstrip("Z")
    base, _, frac = stamp.partition(".")
    return base, frac.ljust(9, "0")


# ---------------------------------------------------------------------------- output


def _write(res: SmokeResult, out_dir: Path) -> None:
    log_text = res.files.pop("_log_text", None)
    if log_text is not None:
        write_file(out_dir / "container.log", log_text, what="the container log")
        res.files["log"] = str(out_dir / "container.log")
    events = res.probe.pop("events", None)
    if events is not None:
        write_file(out_dir / "probe-events.jsonl", "".join(json.dumps(e) + "\n" for e in events),
                   what="the probe's events")
        res.files["probe_events"] = str(out_dir / "probe-events.jsonl")
    if res.gpu is not None:
        res.gpu.pop("host_handle", None)
    res.files["result"] = str(out_dir / "smoke.json")
    write_file(out_dir / "smoke.json", json.dumps(res.to_dict(), indent=2) + "\n",
               what="smoke.json")


