"""The smoke stage's settings and result model.

API: :class:`SmokeSettings` (what to run; ``SmokeSettings.from_experiment(exp)``),
:class:`SmokeResult` (what happened; ``to_dict()`` is stable JSON), :data:`VERDICTS`.
The stage itself is :func:`servelab.smoke.stage.smoke_image`; its report is made by
:mod:`servelab.smoke.render`.
"""

from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servelab.errors import CommandError
from servelab.smoke.diagnose import Diagnosis
from servelab.smoke.model import ModelInfo
from servelab.smoke.modelload import ModelLoad
from servelab.smoke.weights import WeightsReport
from servelab.spec import Experiment, GpuNeeds, Model, Request, Serve

VERDICTS: dict[str, str] = {
    "pass": "ready, and the representative request got the expected answer",
    "runs-as-root": "it worked, but the server runs as uid 0",
    "start-failed": "the engine could not start the container",
    "crashed": "the container exited before it was ready",
    "not-ready": "no health 2xx before the readiness timeout",
    "request-failed": "ready, but the representative request did not get the expected answer",
    "model-mismatch": "the model's sha256 is not the expected one (the container was not started)",
    "gpu-unavailable": "a GPU is required but this host has none usable (never a pass)",
    "gpu-incompatible": "the image's CUDA requirements do not fit this host's driver or GPU",
    "gpu-failed": "the GPUs are not usable inside the container",
}
# ---------------------------------------------------------------------------- settings


@dataclass
class SmokeSettings:
    """Everything the smoke stage needs; :meth:`from_experiment` takes it from a spec."""

    serve: Serve = field(default_factory=Serve)
    model: Model | None = None
    request: Request | None = None
    gpu: GpuNeeds = field(default_factory=GpuNeeds)
    keep: bool = False
    #: "auto" (netns when root, else helper), "netns" or "helper"
    probe: str = "auto"
    scan_weights: bool = True
    #: the image's OCI archive (from the build): weights are read from it, not exported
    weights_archive: Path | None = None
    interval_s: float = 0.005
    request_timeout_s: float = 30.0
    log_lines: int = 40
    #: drop the mounted model's files from the page cache before the start (a cold node
    #: cache), so that its read shows as block I/O (:mod:`servelab.smoke.modelload`)
    evict_model_cache: bool = False
    #: how long a GPU start waits for another servelab run to release its GPUs
    gpu_lock_timeout_s: float = 3600.0

    @classmethod
    def from_experiment(cls, exp: Experiment, **overrides: Any) -> SmokeSettings:
        return replace(cls(serve=exp.serve, model=exp.model, request=exp.request, gpu=exp.gpu),
                       **overrides)

    def to_dict(self) -> dict[str, Any]:
        s = self.serve
        return {
            "port": s.port, "health_path": s.health_path,
            "readiness_timeout_s": s.readiness_timeout_s, "user": s.user,
            "read_only_rootfs": True, "writable_paths": list(s.writable_paths),
            "network": s.network, "shm_size": s.shm_size, "cap_drop": ["ALL"],
            "no_new_privileges": True, "env": sorted(s.env), "args": list(s.args),
            "gpu_required": self.gpu.required, "probe": self.probe,
            "probe_interval_ms": self.interval_s * 1000, "keep": self.keep,
            "evict_model_cache": self.evict_model_cache,
        }


def as_settings(x: Experiment | SmokeSettings) -> SmokeSettings:
    return x if isinstance(x, SmokeSettings) else SmokeSettings.from_experiment(x)


# ---------------------------------------------------------------------------- result parts


@dataclass
class Problem:
    id: str
    message: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "message": self.message, "fix": self.fix}


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds")


class Timeline:
    """Named instants on this process's monotonic clock, anchored to wall-clock time."""

    ORDER = ("pull_started", "pull_downloaded", "pull_done", "created", "started",
             "prober_started", "first_tcp_accept", "first_health_2xx", "first_good_request",
             "exited")

    def __init__(self) -> None:
        self.anchor_mono = time.monotonic()
        self.anchor_wall = time.time()
        self.marks: dict[str, float] = {}
        self.notes: dict[str, str] = {}

    def mark(self, name: str, mono: float | None = None, note: str | None = None) -> None:
        if name not in self.marks:
            self.marks[name] = time.monotonic() if mono is None else mono
            if note:
                self.notes[name] = note

    def between(self, a: str, b: str) -> float | None:
        if a in self.marks and b in self.marks:
            return self.marks[b] - self.marks[a]
        return None

    def rel(self, mono: float) -> float:
        """Seconds since ``created`` (since the anchor before that)."""
        return mono - self.marks.get("created", self.anchor_mono)

    def to_dict(self) -> dict[str, Any]:
        events = []
        for name in sorted(self.marks, key=lambda n: (self.marks[n], self.ORDER.index(n)
                                                      if n in self.ORDER else 99)):
            m = self.marks[name]
            events.append({
                "name": name, "t_s": round(self.rel(m), 6), "monotonic": m,
                "wall": _iso(self.anchor_wall + (m - self.anchor_mono)),
                "note": self.notes.get(name),
            })
        d = self.between
        durations = {
            "pull_s": d("pull_started", "pull_downloaded"),
            "unpack_s": d("pull_downloaded", "pull_done"),
            "create_s": (self.marks["created"] - self.anchor_mono
                         if "created" in self.marks else None),
            "start_call_s": d("created", "started"),
            "start_to_tcp_accept_s": d("started", "first_tcp_accept"),
            "start_to_ready_s": d("started", "first_health_2xx"),
            "start_to_first_good_request_s": d("started", "first_good_request"),
            "ready_to_first_good_request_s": d("first_health_2xx", "first_good_request"),
        }
        return {
            "clock": "CLOCK_MONOTONIC (host and containers share it)",
            "anchor_wall": _iso(self.anchor_wall),
            "anchor_monotonic": self.anchor_mono,
            "events": events,
            "durations": {k: (round(v, 6) if v is not None else None)
                          for k, v in durations.items()},
        }


@dataclass
class UserCheck:
    """Who the server runs as: from the image config and from the process on the host."""

    image_user: str
    run_as: str
    config_uid: int | None
    euid_start: int | None = None
    euid_ready: int | None = None
    source: str | None = None

    @property
    def euid(self) -> int | None:
        return self.euid_ready if self.euid_ready is not None else self.euid_start

    @property
    def root(self) -> bool:
        return self.config_uid == 0 or self.euid == 0

    @property
    def checked(self) -> bool:
        return self.config_uid is not None or self.euid is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "image_user": self.image_user, "run_as": self.run_as,
            "config_uid": self.config_uid, "euid_at_start": self.euid_start,
            "euid_when_ready": self.euid_ready, "euid_source": self.source,
            "root": self.root, "checked": self.checked,
        }


def config_uid(user: str) -> int | None:
    """The uid a USER string names when it can be told without the image's /etc/passwd."""
    name = user.split(":", 1)[0].strip()
    if name in ("", "root", "0"):
        return 0
    return int(name) if name.isdigit() else None


def proc_euid(pid: int) -> int | None:
    """The effective uid on the ``Uid:`` line of /proc/<pid>/status (None when unreadable)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Uid:"):
            parts = line.split()
            return int(parts[2]) if len(parts) > 2 else None
    return None


@dataclass
class RequestSample:
    i: int
    latency_ms: float | None
    status: int | None
    ok: bool
    reason: str | None
    body: bytes = b""


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def json_subset(expected: Any, actual: Any) -> bool:
    """Whether *actual* contains *expected*: mappings by key (recursively), lists element by
    element with the same length, numbers by value (1 == 1.0), other values by equality."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and json_subset(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(json_subset(e, a) for e, a in zip(expected, actual, strict=True)))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-12)
    return bool(expected == actual)


def check_response(req: Request, status: int | None, body: bytes) -> str | None:
    """Why a response is not the expected one, or None when it is."""
    if status is None:
        return "no response"
    if status != req.expect_status:
        return f"HTTP {status}, expected {req.expect_status}"
    text = body.decode("utf-8", "replace")
    if req.expect_json is not None:
        try:
            doc = json.loads(text)
        except ValueError:
            return "the body is not JSON"
        if not json_subset(req.expect_json, doc):
            return f"the body does not contain {json.dumps(req.expect_json)}"
    if req.expect_regex is not None:
        found = regex_search(req.expect_regex, text)
        if found is None:
            return (f"the check /{req.expect_regex}/ took more than {regex_timeout():g} s (a "
                    "pattern that backtracks); simplify it, or raise SERVELAB_REGEX_TIMEOUT")
        if not found:
            return f"the body does not match /{req.expect_regex}/"
    return None


#: The body text an expected regex is matched against: its first MiB.
REGEX_MAX_TEXT = 1 << 20
#: Seconds one regex check may take (SERVELAB_REGEX_TIMEOUT); a backtracking pattern such as
#: ``(a+)+$`` takes exponential time, so the match runs in a child process that is killed then.
REGEX_TIMEOUT_S = 2.0
_SEARCH = ("import json, re, sys\n"
           "d = json.load(sys.stdin)\n"
           "sys.exit(0 if re.search(d['p'], d['t']) else 1)\n")


def regex_timeout() -> float:
    from servelab import proc

    return proc.deadline(proc.REGEX_TIMEOUT_ENV, REGEX_TIMEOUT_S)


@functools.lru_cache(maxsize=16)
def regex_search(pattern: str, text: str) -> bool | None:
    """Whether *pattern* matches the first :data:`REGEX_MAX_TEXT` characters of *text*; None
    when it did not finish within :func:`regex_timeout` (never a match). The responses of one
    smoke test are often equal, so each (pattern, text) is matched once."""
    import sys

    from servelab import proc

    doc = json.dumps({"p": pattern, "t": text[:REGEX_MAX_TEXT]})
    try:
        out = proc.run([sys.executable, "-I", "-c", _SEARCH], input_text=doc, check=False,
                       timeout=regex_timeout())
    except CommandError as e:
        if e.timed_out:
            return None
        raise
    return out.returncode == 0


@dataclass
class RequestStats:
    method: str
    path: str
    count: int
    samples: list[RequestSample] = field(default_factory=list)

    @property
    def ok(self) -> int:
        return sum(1 for s in self.samples if s.ok)

    @property
    def failed(self) -> int:
        return self.count - self.ok

    def first_failure(self) -> RequestSample | None:
        return next((s for s in self.samples if not s.ok), None)

    def to_dict(self) -> dict[str, Any]:
        lat = [s.latency_ms for s in self.samples if s.latency_ms is not None]

        def r(x: float | None) -> float | None:
            return round(x, 3) if x is not None else None

        ff = self.first_failure()
        return {
            "method": self.method, "path": self.path, "count": self.count,
            "sent": len(self.samples), "ok": self.ok, "failed": self.failed,
            "latency_ms": {"p50": r(percentile(lat, 50)), "p95": r(percentile(lat, 95)),
                           "min": r(min(lat, default=None)), "max": r(max(lat, default=None))},
            "samples_ms": [r(x) for x in lat],
            "first_failure": None if ff is None else {
                "i": ff.i, "status": ff.status, "reason": ff.reason,
                "body": ff.body[:500].decode("utf-8", "replace"),
            },
        }


@dataclass
class ContainerState:
    id: str
    name: str
    status: str | None = None
    running: bool = False
    exit_code: int | None = None
    oom_killed: bool = False
    error: str | None = None
    log_tail: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "status": self.status,
                "running": self.running, "exit_code": self.exit_code,
                "oom_killed": self.oom_killed, "error": self.error,
                "log_tail": list(self.log_tail)}


@dataclass
class SmokeResult:
    """What one smoke run found; ``to_dict()`` is stable JSON."""

    image: str
    run_id: str
    first_start: bool
    settings: dict[str, Any]
    image_id: str | None = None
    verdict: str = "error"
    message: str = ""
    cause: Diagnosis | None = None
    problems: list[Problem] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    user: UserCheck | None = None
    model: ModelInfo | None = None
    timeline: Timeline | None = None
    requests: RequestStats | None = None
    container: ContainerState | None = None
    weights: WeightsReport | None = None
    gpu: dict[str, Any] | None = None
    model_load: ModelLoad | None = None
    #: the pulls before this start (:meth:`servelab.node.NodeStart.to_dict`)
    node: dict[str, Any] | None = None
    probe: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    cleanup: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def exit_code(self) -> int:
        if self.verdict == "pass":
            return 0
        return 3 if self.verdict == "gpu-unavailable" else 1

    @property
    def startup_s(self) -> float | None:
        """The startup metric: container start to first health 2xx."""
        return self.timeline.between("started", "first_health_2xx") if self.timeline else None

    def to_dict(self) -> dict[str, Any]:
        def d(x: Any) -> Any:
            return x.to_dict() if x is not None else None

        return {
            "stage": "smoke", "image": self.image, "image_id": self.image_id,
            "run_id": self.run_id, "first_start": self.first_start,
            "verdict": self.verdict, "verdict_meaning": VERDICTS.get(self.verdict),
            "passed": self.passed, "exit_code": self.exit_code, "message": self.message,
            "cause": d(self.cause), "problems": [p.to_dict() for p in self.problems],
            "properties": dict(self.properties), "startup_s": self.startup_s,
            "settings": self.settings, "user": d(self.user), "model": d(self.model),
            "timeline": d(self.timeline), "requests": d(self.requests),
            "container": d(self.container), "baked_weights": d(self.weights),
            "gpu": self.gpu, "model_load": d(self.model_load), "node": self.node,
            "probe": dict(self.probe), "notes": list(self.notes),
            "files": dict(self.files), "cleanup": dict(self.cleanup),
        }


def set_verdict(res: SmokeResult, verdict: str, message: str, fix: str | None = None) -> None:
    """Set the run's verdict; it becomes the first problem listed."""
    res.verdict = verdict
    res.message = message
    res.problems.insert(0, Problem(verdict, message, fix))
