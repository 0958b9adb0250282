"""One long-lived prober per smoke run, inside the container's network namespace.

API::

    prober = Prober.spawn_netns()                  # as root: host Python, warm, waiting
    ... create and start the container ...
    prober.go(ProbeConfig(...), netns_cgroups=cgroup_procs(cid))  # before the start
    ... start the container; prober.send_pid(pid)     # fallback once its PID is known
    # or, when not root: Prober.spawn_helper(image, network="none", labels=..., name=...)
    # then create the container with --network container:<prober.helper>; prober.go(cfg)
    while (ev := prober.next_event(timeout=0.2)) ...  # ProbeEvent(kind, mono, wall, data)
    prober.stop()

The prober is a small stdlib-only Python script (:data:`PROBER_SOURCE`, Python 3.6+). It
reads one JSON config line on stdin and, as root, enters the container's network namespace
(``setns(2)``, what ``nsenter -t PID -n`` does, done in-process so that the interpreter is
already running): it is sent before the engine is asked to start the container, watches the
container's cgroup.procs every millisecond and enters the namespace as soon as a process of
the container is in it (before the server's process even runs); a second line with
``netns_pid`` (from ``docker inspect`` after the start) is the fallback. Then it polls every
``interval_s`` (5 ms):

1. TCP connect to 127.0.0.1 (and ::1) on the port until one is accepted -> ``accept``;
2. ``GET health_path`` (the first on that same connection) until a 2xx -> ``health`` (with
   the first 4 KiB of its body, where a server may report ``model_bytes_read``);
   each change of answer (refused, 503, timeout...) -> ``health_state``;
3. the representative request ``count`` times -> one ``request`` event each;

then ``done``, or ``timeout`` when the deadline passes first. Every event is a JSON line with
``mono`` (CLOCK_MONOTONIC, shared by the host and its containers) and ``wall``; the parent
checks the two clocks agree on ``hello`` and shifts the prober's times otherwise.

Without root, the same script runs in a helper container from the served image (the first of
``python3``/``python`` it has), started *before* the served container, which then joins the
helper's network namespace (``--network container:<helper>``): the prober is already polling
when the server starts, as in the root case. (Joining a running container's namespace the
other way round is the fallback when the host cannot enter it.)
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from servelab import proc
from servelab.errors import CapabilityError, CommandError

PROBER_SOURCE = r'''
import base64, json, os, select, socket, sys, time
import http.client as hc

CLONE_NEWNET = 0x40000000
PPID = os.getppid()


def emit(ev, **kw):
    kw["ev"] = ev
    kw["mono"] = time.monotonic()
    kw["wall"] = time.time()
    try:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        os._exit(0)


def parent_gone():
    return PPID > 1 and os.getppid() != PPID


def enter_netns(pid):
    fd = os.open("/proc/%d/ns/net" % pid, os.O_RDONLY)
    try:
        if hasattr(os, "setns"):
            os.setns(fd, CLONE_NEWNET)
            return
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)


def describe(e):
    text = str(e) or type(e).__name__
    return (type(e).__name__ + ": " + text)[:300]


def connect(host, port, timeout):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
    except BaseException:
        s.close()
        raise
    return s


def http(cfg, host, method, path, headers, body, timeout, sock=None):
    conn = hc.HTTPConnection(host, cfg["port"], timeout=timeout)
    if sock is not None:
        sock.settimeout(timeout)
        conn.sock = sock
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read(cfg["body_cap"] + 1)
        return resp.status, data
    finally:
        conn.close()


def left(deadline):
    return deadline - time.monotonic()


def wait_accept(cfg, deadline):
    n = 0
    state = None
    while True:
        for host in cfg["hosts"]:
            n += 1
            try:
                timeout = max(0.001, min(cfg["connect_timeout"], left(deadline)))
                s = connect(host, cfg["port"], timeout)
            except (OSError, socket.timeout) as e:
                if state is None or host == cfg["hosts"][0]:
                    state = describe(e)
                continue
            emit("accept", host=host, attempts=n)
            return host, s
        if left(deadline) <= 0 or parent_gone():
            emit("timeout", phase="accept", attempts=n, last=state)
            return None, None
        time.sleep(cfg["interval"])


def wait_health(cfg, host, sock, deadline):
    n = 0
    last = None
    hdrs = {"Connection": "close", "User-Agent": "servelab-probe"}
    while True:
        n += 1
        timeout = max(0.001, min(cfg["probe_timeout"], left(deadline)))
        data = b""
        try:
            status, data = http(cfg, host, "GET", cfg["health_path"], hdrs, None, timeout, sock)
            state = "HTTP %d" % status
        except (OSError, socket.timeout, hc.HTTPException) as e:
            status, state = None, describe(e)
            if left(deadline) <= 0 and last is not None:
                state = last  # cut short by the deadline: not an answer of the server
        sock = None
        if status is not None and 200 <= status < 300:
            cap = min(cfg["body_cap"], 4096)
            emit("health", status=status, attempts=n,
                 body=base64.b64encode(data[:cap]).decode("ascii"))
            return True
        if state != last:
            emit("health_state", state=state, status=status, attempts=n)
            last = state
        if left(deadline) <= 0 or parent_gone():
            emit("timeout", phase="health", attempts=n, last=last)
            return False
        time.sleep(cfg["interval"])


def send_requests(cfg, host):
    req = cfg["request"]
    body = base64.b64decode(req["body"]) if req.get("body") is not None else None
    for i in range(req["count"]):
        t0 = time.monotonic()
        status, data, error = None, b"", None
        try:
            status, data = http(cfg, host, req["method"], req["path"], req["headers"], body,
                                req["timeout"])
        except (OSError, socket.timeout, hc.HTTPException) as e:
            error = describe(e)
        t1 = time.monotonic()
        cap = cfg["body_cap"]
        emit("request", i=i, t0=t0, t1=t1, status=status, error=error,
             body=base64.b64encode(data[:cap]).decode("ascii"), truncated=len(data) > cap)


class Stdin:
    """Lines from fd 0, read without blocking past what is there (select + os.read)."""

    def __init__(self):
        self.buf = b""
        self.eof = False

    def line(self, timeout):
        while b"\n" not in self.buf and not self.eof:
            ready, _, _ = select.select([0], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(0, 65536)
            if not chunk:
                self.eof = True
            self.buf += chunk
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def foreign_pids(paths, own):
    """Processes of the container's cgroup that are in a network namespace other than ours."""
    out = []
    for path in paths:
        try:
            with open(path) as f:
                pids = f.read().split()
        except OSError:
            continue
        for p in pids:
            try:
                if os.stat("/proc/%s/ns/net" % p).st_ino != own:
                    out.append(int(p))
            except OSError:
                continue
    return sorted(out, reverse=True)


def wait_netns(cfg, stdin, deadline):
    """Enter the container's network namespace as soon as one of its processes is in it."""
    own = os.stat("/proc/self/ns/net").st_ino
    given = cfg.get("netns_pid")
    while True:
        pids = [given] if given else foreign_pids(cfg.get("netns_cgroups") or [], own)
        for pid in pids:
            try:
                enter_netns(pid)
            except OSError as e:
                if given:
                    emit("error", phase="netns", error=describe(e))
                    return False
                continue
            if os.stat("/proc/self/ns/net").st_ino == own:
                continue
            emit("go", netns_pid=pid)
            return True
        if left(deadline) <= 0 or parent_gone():
            emit("timeout", phase="netns", attempts=0, last=None)
            return False
        line = stdin.line(0.001)
        if line:
            given = json.loads(line).get("netns_pid") or given
        elif stdin.eof and not line:
            time.sleep(0.001)


def main():
    emit("hello", pid=os.getpid(), python=sys.version.split()[0])
    stdin = Stdin()
    line = stdin.line(None)
    if not line or not line.strip():
        return 0
    cfg = json.loads(line)
    deadline = time.monotonic() + cfg["deadline_s"]
    if cfg.get("netns_pid") or cfg.get("netns_cgroups"):
        if not wait_netns(cfg, stdin, deadline):
            return 0
    else:
        emit("go")
    host, sock = wait_accept(cfg, deadline)
    if host is None:
        return 0
    if not wait_health(cfg, host, sock, deadline):
        return 0
    if cfg.get("request"):
        send_requests(cfg, host)
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

#: exit codes of ``docker run`` when the entrypoint is missing or cannot be executed
_NO_INTERPRETER = (125, 126, 127)
#: interpreters tried, in order, in a helper container
INTERPRETERS = ("python3", "python")


@dataclass
class RequestSpec:
    """The representative request as the prober sends it."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    count: int = 5
    timeout_s: float = 30.0

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": dict(self.headers),
            "body": base64.b64encode(self.body).decode() if self.body is not None else None,
            "count": self.count,
            "timeout": self.timeout_s,
        }


@dataclass
class ProbeConfig:
    port: int
    health_path: str
    deadline_s: float
    request: RequestSpec | None = None
    interval_s: float = 0.005
    connect_timeout_s: float = 0.5
    probe_timeout_s: float = 2.0
    body_cap: int = 1 << 20
    hosts: tuple[str, ...] = ("127.0.0.1", "::1")

    @classmethod
    def of(cls, port: int, health_path: str, left_s: float, request: Any | None, *,
           request_timeout_s: float, interval_s: float) -> ProbeConfig:
        """The prober's configuration of a start (Docker's or containerd's): *request* the
        experiment's representative request (``spec.Request``) or None, *left_s* the time
        the prober has."""
        spec = None
        if request is not None:
            spec = RequestSpec(request.method, request.path, dict(request.headers),
                               request.body, request.count, request_timeout_s)
        return cls(port=port, health_path=health_path, deadline_s=max(0.05, left_s),
                   request=spec, interval_s=interval_s)

    def to_json(self, netns_pid: int | None, netns_cgroups: list[str] | None = None) -> str:
        return json.dumps({
            "port": self.port,
            "health_path": self.health_path,
            "deadline_s": self.deadline_s,
            "interval": self.interval_s,
            "connect_timeout": self.connect_timeout_s,
            "probe_timeout": self.probe_timeout_s,
            "body_cap": self.body_cap,
            "hosts": list(self.hosts),
            "request": self.request.to_json() if self.request else None,
            "netns_pid": netns_pid,
            "netns_cgroups": netns_cgroups or [],
        })


@dataclass
class ProbeEvent:
    """One line of the prober; ``mono`` is on this process's monotonic clock."""

    kind: str
    mono: float
    wall: float
    data: dict[str, Any] = field(default_factory=dict)


class Prober:
    """A running prober process and the events it reports."""

    def __init__(self, popen: subprocess.Popen[str], mode: str, *, helper: str | None = None):
        self.popen = popen
        self.mode = mode  # "netns" or "helper"
        self.helper = helper  # helper container name
        self.offset = 0.0  # add to the prober's mono to get ours
        self.hello: ProbeEvent | None = None
        self.go_mono: float | None = None
        self._events: queue.Queue[ProbeEvent] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- construction
    @classmethod
    def spawn_netns(cls, run_id: str = "") -> Prober:
        """Start the host's Python with the prober; it waits for :meth:`go`.

        Its environment carries ``SERVELAB_PROBE_RUN=<run_id>``, to find it by run."""
        popen = proc.start([sys.executable, "-c", PROBER_SOURCE], new_session=True,
                           env={"SERVELAB_PROBE_RUN": run_id})
        return cls(popen, "netns")

    @classmethod
    def spawn_helper(
        cls, image: str, *, network: str, labels: dict[str, str], name: str,
        user: str | None = None,
    ) -> Prober:
        """A helper container from *image* running the prober, warm, waiting for :meth:`go`.

        *network* is its ``--network``: ``none``/``bridge`` to own a namespace that the
        served container then joins (``--network container:<helper>``), or
        ``container:<id>`` to join a running container's. The container's name is
        :attr:`helper`."""
        last = ""
        for n, interp in enumerate(INTERPRETERS):
            cname = f"{name}-{n}"
            argv = ["docker", "run", "--rm", "-i", "--name", cname, "--network", network,
                    "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                    "--entrypoint", interp]
            for k, v in labels.items():
                argv += ["--label", f"{k}={v}"]
            if user:
                argv += ["--user", user]
            popen = proc.start([*argv, image, "-c", PROBER_SOURCE], new_session=True)
            prober = cls(popen, "helper", helper=cname)
            if prober.wait_hello(60.0):
                return prober
            last = prober.stderr_tail()
            prober.stop()
            if popen.returncode not in _NO_INTERPRETER:
                break
        raise CapabilityError(
            f"could not start a probe helper container from the image: {last[-300:]}",
            hint="run servelab as root (it then probes from the host), or use an image with "
            "python3 or python on PATH",
        )

    # -- protocol
    def wait_hello(self, timeout: float) -> bool:
        """Wait for the prober's first line; False when it exited first."""
        ev = self.next_event(timeout)
        return ev is not None and ev.kind == "hello"

    def go(self, cfg: ProbeConfig, *, netns_pid: int | None = None,
           netns_cgroups: list[str] | None = None) -> None:
        """Send the config: the prober enters *netns_pid*'s network namespace, or the first
        one a process of *netns_cgroups* (cgroup.procs files) is in, then polls."""
        if self.hello is None and not self.wait_hello(30.0):
            raise CapabilityError(
                f"the prober did not start: {self.stderr_tail()[-300:]}",
                hint="check that the host's Python can run (sys.executable)",
            )
        self._send(cfg.to_json(netns_pid, netns_cgroups))

    def send_pid(self, pid: int) -> None:
        """Tell a prober still waiting for the container's namespace which process is in it.

        A prober that has already ended needs no PID (it found the namespace by cgroup and
        finished, or gave up): its events say what happened, so a closed pipe is no error
        then."""
        try:
            self._send(json.dumps({"netns_pid": pid}))
        except CommandError:
            try:
                self.popen.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                ended = False  # alive, yet not reading: a real failure
            else:
                ended = True
            if not ended:
                raise

    def _send(self, line: str) -> None:
        stdin = _pipe(self.popen.stdin)
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except OSError as e:
            args = self.popen.args
            argv = [str(a) for a in args] if isinstance(args, list) else [str(args)]
            raise CommandError(argv, returncode=self.popen.poll(),
                               stderr=self.stderr_tail()) from e

    def next_event(self, timeout: float) -> ProbeEvent | None:
        """The next event, or None after *timeout* seconds; kind ``exit`` at the end."""
        try:
            ev = self._events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if ev.kind == "hello":
            self.hello = ev
        elif ev.kind == "go":
            self.go_mono = ev.mono
        return ev

    def stderr_tail(self) -> str:
        return "".join(self._stderr)[-4000:]

    def stop(self) -> None:
        """End the prober (idempotent); the helper container goes with its ``--rm``."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        for f in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()

    # -- reader threads
    def _read_stdout(self) -> None:
        try:
            for line in _pipe(self.popen.stdout):
                ev = self._parse(line)
                if ev is not None:
                    self._events.put(ev)
        except (OSError, ValueError):
            pass
        code = self.popen.wait()
        self._events.put(ProbeEvent("exit", time.monotonic(), time.time(), {"code": code}))

    def _read_stderr(self) -> None:
        try:
            for line in _pipe(self.popen.stderr):
                if sum(map(len, self._stderr)) < 64_000:
                    self._stderr.append(line)
        except (OSError, ValueError):
            pass

    def _parse(self, line: str) -> ProbeEvent | None:
        try:
            raw = json.loads(line)
        except ValueError:
            self._stderr.append(line)
            return None
        if not isinstance(raw, dict) or "ev" not in raw:
            return None
        kind = str(raw.pop("ev"))
        mono = float(raw.pop("mono", 0.0))
        wall = float(raw.pop("wall", 0.0))
        if kind == "hello":
            self.offset = clock_offset(mono, wall)
        for key in ("t0", "t1"):
            if isinstance(raw.get(key), int | float):
                raw[key] = float(raw[key]) + self.offset
        return ProbeEvent(kind, mono + self.offset, wall, raw)


def clock_offset(their_mono: float, their_wall: float) -> float:
    """What to add to a prober's monotonic time to get ours (0 when the clocks are shared)."""
    mine = time.time() - time.monotonic()
    theirs = their_wall - their_mono
    if abs(mine - theirs) < 0.5:
        return 0.0
    return time.monotonic() - their_mono


#: where a Docker container's cgroup.procs lives (cgroup v2/v1, systemd/cgroupfs drivers)
CGROUP_PROCS = (
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/cgroup.procs",
    "/sys/fs/cgroup/docker/{id}/cgroup.procs",
    "/sys/fs/cgroup/pids/docker/{id}/cgroup.procs",
    "/sys/fs/cgroup/pids/system.slice/docker-{id}.scope/cgroup.procs",
    "/sys/fs/cgroup/unified/docker/{id}/cgroup.procs",
    "/sys/fs/cgroup/unified/system.slice/docker-{id}.scope/cgroup.procs",
)


def cgroup_procs(container_id: str) -> list[str]:
    """The cgroup.procs files a container's processes will appear in (the usual layouts)."""
    return [p.format(id=container_id) for p in CGROUP_PROCS]


def netns_available(pid: int) -> bool:
    """Whether this process can enter *pid*'s network namespace (root, same host)."""
    return os.geteuid() == 0 and Path(f"/proc/{pid}/ns/net").exists()


def _pipe(f: IO[str] | None) -> IO[str]:
    if f is None:
        raise RuntimeError("the prober was started without a pipe")
    return f
