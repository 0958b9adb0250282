"""The prober script against servers on loopback (no namespace switch): its events and timing."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servelab.smoke.prober import ProbeConfig, ProbeEvent, Prober, RequestSpec


class _Server:
    """Listens after *listen_delay*, answers /health 503 until *ready_delay* after that."""

    def __init__(self, listen_delay: float, ready_delay: float) -> None:
        self.port = _free_port()
        self.listen_mono: float | None = None
        self.ready_mono: float | None = None
        self.ready = threading.Event()
        self.httpd: ThreadingHTTPServer | None = None
        self._delays = (listen_delay, ready_delay)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        time.sleep(self._delays[0])
        srv = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = srv.ready.is_set()
                self.send_response(200 if ok else 503)
                self.end_headers()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(201)
                self.end_headers()
                self.wfile.write(b'{"echo": ' + body + b"}")

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.listen_mono = time.monotonic()
        threading.Timer(self._delays[1], self._set_ready).start()
        self.httpd.serve_forever(poll_interval=0.05)

    def _set_ready(self) -> None:
        self.ready_mono = time.monotonic()
        self.ready.set()

    def close(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _events(p: Prober, cfg: ProbeConfig, limit: float = 15.0) -> list[ProbeEvent]:
    p.go(cfg)
    out: list[ProbeEvent] = []
    end = time.monotonic() + limit
    while time.monotonic() < end:
        ev = p.next_event(0.5)
        if ev is None:
            continue
        out.append(ev)
        if ev.kind == "exit":
            break
    p.stop()
    return out


@pytest.fixture
def prober() -> Iterator[Prober]:
    p = Prober.spawn_netns()
    yield p
    p.stop()


def test_accept_health_requests_in_order(prober: Prober) -> None:
    srv = _Server(listen_delay=0.3, ready_delay=0.3)
    try:
        req = RequestSpec("POST", "/p", {"Content-Type": "application/json"}, b"[1]", count=3)
        evs = _events(prober, ProbeConfig(port=srv.port, health_path="/health", deadline_s=10,
                                          request=req))
    finally:
        srv.close()
    kinds = [e.kind for e in evs]
    assert kinds[:3] == ["go", "accept", "health_state"]
    assert kinds[-2:] == ["done", "exit"]
    assert kinds.count("request") == 3 and kinds.index("health") < kinds.index("request")
    state = evs[2].data
    assert state["status"] == 503 and state["state"] == "HTTP 503"
    by = {e.kind: e for e in evs}
    assert srv.listen_mono is not None and srv.ready_mono is not None
    # one monotonic clock: the prober saw each step after it happened, and soon after
    assert 0 <= by["accept"].mono - srv.listen_mono < 0.05
    assert 0 <= by["health"].mono - srv.ready_mono < 0.05
    r = next(e for e in evs if e.kind == "request").data
    assert r["status"] == 201 and base64.b64decode(r["body"]) == b'{"echo": [1]}'
    assert r["t0"] < r["t1"]


def test_timeout_when_nothing_listens(prober: Prober) -> None:
    t0 = time.monotonic()
    evs = _events(prober, ProbeConfig(port=_free_port(), health_path="/h", deadline_s=0.5))
    assert time.monotonic() - t0 < 5
    end = next(e for e in evs if e.kind == "timeout")
    assert end.data["phase"] == "accept"
    assert end.data["attempts"] > 20  # it polled (every 5 ms), not once
    assert "Connection refused" in str(end.data["last"]) or "ConnectionRefused" in str(
        end.data["last"])


def test_health_timeout_reports_last_answer(prober: Prober) -> None:
    srv = _Server(listen_delay=0.0, ready_delay=60)
    try:
        evs = _events(prober, ProbeConfig(port=srv.port, health_path="/health", deadline_s=1))
    finally:
        srv.close()
    end = next(e for e in evs if e.kind == "timeout")
    assert end.data["phase"] == "health" and end.data["last"] == "HTTP 503"
    assert "health" not in [e.kind for e in evs]


def test_config_is_one_json_line() -> None:
    cfg = ProbeConfig(port=1, health_path="/h", deadline_s=2,
                      request=RequestSpec("GET", "/x", body=b"\x00\xff"))
    doc = json.loads(cfg.to_json(netns_pid=42))
    assert "\n" not in cfg.to_json(None)
    assert doc["netns_pid"] == 42 and doc["interval"] <= 0.010
    assert base64.b64decode(doc["request"]["body"]) == b"\x00\xff"


def test_a_prober_that_already_ended_needs_no_pid() -> None:
    """The prober can find the container's namespace by cgroup and finish (or give up) before
    servelab sends the PID as a fallback: the closed pipe is then no error, and the prober's
    events still end with its exit. A prober alive but not reading is still an error."""
    import subprocess
    import sys

    from servelab.errors import CommandError
    from servelab.smoke.prober import Prober

    ended = Prober(subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                   "netns")
    ended.popen.wait(timeout=30)
    ended.send_pid(12345)  # no exception
    stuck = subprocess.Popen([sys.executable, "-c", "import os, time; os.close(0); time.sleep(30)"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        alive = Prober(stuck, "netns")
        time.sleep(1.0)  # it has closed its stdin
        with pytest.raises(CommandError):
            alive.send_pid(12345)
    finally:
        stuck.kill()
        stuck.wait()
