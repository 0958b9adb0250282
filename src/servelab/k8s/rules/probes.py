"""startup-probe-budget, probe-target: Running is not ready; probes must know the model."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.measured import Measured
from servelab.k8s.model import Container, Workload, as_dict, as_int, as_list
from servelab.k8s.roles import no_model, no_traffic, role
from servelab.k8s.script import container_commands, env_values
from servelab.k8s.selectors import service_selects
from servelab.k8s.servers import known_server

PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3}


def _field(probe: dict[str, Any], name: str) -> int:
    value = as_int(probe.get(name))
    return value if value is not None else PROBE_DEFAULTS[name]


def budget(probe: dict[str, Any]) -> tuple[int, str]:
    """Seconds before the kubelet gives up on a probe, and how they add up."""
    delay, period = _field(probe, "initialDelaySeconds"), _field(probe, "periodSeconds")
    threshold = _field(probe, "failureThreshold")
    how = f"initialDelaySeconds {delay} + failureThreshold {threshold} x periodSeconds {period}"
    return delay + threshold * period, how


def _threshold_for(probe: dict[str, Any], need: float) -> int:
    delay, period = _field(probe, "initialDelaySeconds"), max(_field(probe, "periodSeconds"), 1)
    return max(1, math.ceil((need - delay) / period))


def _probe(c: Container, kind: str) -> dict[str, Any] | None:
    p = c.data.get(kind)
    return p if isinstance(p, dict) else None


def _with_startup(w: Workload, c: Container, probe: dict[str, Any], need: float,
                  worst: float) -> Iterator[Finding]:
    have, how = budget(probe)
    if have >= need:
        return
    key = "failureThreshold" if "failureThreshold" in probe else "periodSeconds"
    yield hit("startup-probe-budget", w, f"startupProbe allows {have}s ({how}) but the measured "
              f"worst startup is {worst:g}s; with the margin that needs {need:g}s, so the kubelet "
              "kills pods that are still loading the model", (*c.path, "startupProbe", key),
              container=c, fix=f"raise startupProbe.failureThreshold to "
              f"{_threshold_for(probe, need)} (or the period) so the budget covers {need:g}s")


def _without_startup(w: Workload, c: Container, ctx: Context) -> Iterator[Finding]:
    m = ctx.measured
    worst = m.worst_startup_s if m else None
    need = worst * ctx.startup_margin if worst is not None else None
    liveness = _probe(c, "livenessProbe")
    if c.inherits("probes"):
        return  # the runtime, base config or operator may add the startupProbe
    server = known_server(str(c.data.get("image") or ""), c.argv())
    if server is not None and server.lazy and worst is None:
        ctx.note(f"startup-probe-budget: {w.ref}: {server.name} answers health at once and "
                 "loads models on first request: its livenessProbe does not run during a load")
        return
    if w.model_mesh and worst is None:
        ctx.note(f"startup-probe-budget: {w.ref}: a ModelMesh runtime (multiModel) starts with "
                 "no model and ModelMesh loads each one once it is up: no model load runs "
                 "before its livenessProbe")
        return
    if liveness is None:
        if need is not None:
            yield hit("startup-probe-budget", w, f"no startupProbe: the measured startup takes up "
                      f"to {worst:g}s", (*c.path, "startupProbe"), container=c,
                      severity=Severity.WARNING, fix=f"add a startupProbe on the health endpoint "
                      f"whose failureThreshold x periodSeconds covers {need:g}s")
        return
    have, how = budget(liveness)
    severity = Severity.WARNING if need is not None and have >= need else None
    said = f"; the measured startup takes up to {worst:g}s" if worst is not None else ""
    yield hit("startup-probe-budget", w, f"livenessProbe without a startupProbe: the kubelet "
              f"restarts the container after {have}s ({how}) of failed checks, even while the "
              f"model loads{said}", (*c.path, "livenessProbe"), container=c, severity=severity)


@rule(
    "startup-probe-budget",
    Severity.ERROR,
    "no startupProbe, or its budget is below the measured worst startup times the margin",
    rationale="Loading a model takes tens of seconds to minutes. Without a startupProbe the "
    "livenessProbe runs during loading and the kubelet restarts the container before it is "
    "ready: a crash loop. The startupProbe's budget (initialDelaySeconds + failureThreshold x "
    "periodSeconds) must exceed the worst startup measured, with a margin (default 1.5x).",
    fix="add a startupProbe on the health endpoint with failureThreshold x periodSeconds above "
    "the worst measured startup times the margin; keep the livenessProbe short",
)
def startup_probe_budget(w: Workload, ctx: Context) -> Iterator[Finding]:
    if not w.serves or no_model(w, w.serving, ctx) is not None:
        return
    c = w.serving
    startup = _probe(c, "startupProbe")
    if startup is None:
        yield from _without_startup(w, c, ctx)
        return
    worst = ctx.measured.worst_startup_s if ctx.measured else None
    if worst is not None:
        yield from _with_startup(w, c, startup, worst * ctx.startup_margin, worst)


#: What the API server fills in for a probe's fields left out.
PROBE_API_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
                      "failureThreshold": 3, "successThreshold": 1}


def _handler(c: Container, probe: dict[str, Any]) -> tuple[Any, ...]:
    """The probe's handler as the kubelet runs it: the scheme defaulted, a named port resolved
    against the container's ports, numbers and strings read the same way."""
    http = probe.get("httpGet")
    if isinstance(http, dict):
        headers = sorted((str(as_dict(h).get("name")).lower(), str(as_dict(h).get("value")))
                         for h in as_list(http.get("httpHeaders")))
        port = c.port_number(http.get("port"))
        return ("httpGet", str(http.get("scheme") or "HTTP").upper(), str(http.get("host") or ""),
                port if port is not None else str(http.get("port")),
                str(http.get("path") or "/"), tuple(headers))
    for kind in ("tcpSocket", "grpc"):
        if isinstance(probe.get(kind), dict):
            h = as_dict(probe[kind])
            port = c.port_number(h.get("port"))
            return (kind, port if port is not None else str(h.get("port")),
                    str(h.get("host") or h.get("service") or ""))
    if isinstance(probe.get("exec"), dict):
        return ("exec", tuple(str(x) for x in as_list(as_dict(probe["exec"]).get("command"))))
    return ("none",)


def effective(c: Container, probe: dict[str, Any]) -> tuple[Any, ...]:
    """The probe after the API server's defaults (periodSeconds 10, timeoutSeconds 1,
    failureThreshold 3, successThreshold 1, scheme HTTP): two probes written differently (key
    order, quoting, a named port, a default spelled out) that run the same are equal."""
    timing = tuple(as_int(probe.get(k)) if as_int(probe.get(k)) is not None else d
                   for k, d in PROBE_API_DEFAULTS.items())
    return (_handler(c, probe), timing)


def _norm_path(path: Any) -> str:
    text = str(path or "/").split("?", 1)[0].strip()
    text = text if text.startswith("/") else "/" + text
    return text.rstrip("/") or "/"


def _http_target(w: Workload, c: Container, kind: str, http: dict[str, Any],
                 m: Measured) -> Iterator[Finding]:
    base = (*c.path, kind, "httpGet")
    if m.health_path and _norm_path(http.get("path")) != _norm_path(m.health_path):
        yield hit("probe-target", w, f"{kind} GETs {http.get('path') or '/'} but the experiment "
                  f"measured readiness at {m.health_path}", (*base, "path"), container=c,
                  fix=f"set {kind}.httpGet.path: {m.health_path}")
    if m.port is None:
        return
    port = c.port_number(http.get("port"))
    if port != m.port:
        said = f"port {http.get('port')!r}" + ("" if port is None else f" ({port})")
        yield hit("probe-target", w, f"{kind} targets {said} but the experiment served on port "
                  f"{m.port}", (*base, "port"), container=c,
                  fix=f"set {kind}.httpGet.port: {m.port}")


def _target(w: Workload, c: Container, kind: str, probe: dict[str, Any],
            m: Measured | None) -> Iterator[Finding]:
    http = probe.get("httpGet")
    if isinstance(http, dict):
        if m is not None:
            yield from _http_target(w, c, kind, http, m)
        return
    handler = next((h for h in ("tcpSocket", "grpc", "exec") if h in probe), None)
    if handler in ("tcpSocket", "grpc") or (handler == "exec" and m and m.health_path):
        yield hit("probe-target", w, f"{kind} uses {handler}: it shows the process is up, not that "
                  "the model is loaded and answers on the health path", (*c.path, kind, handler),
                  container=c, severity=Severity.WARNING if handler != "exec" else Severity.INFO)


PROBES = ("readinessProbe", "startupProbe", "livenessProbe")


def _unknown_port(w: Workload, c: Container, kind: str) -> Iterator[Finding]:
    """A probe whose port is a name none of the container's ports has: it always fails (with
    --result, readiness and startup ports are judged against the measured port instead)."""
    probe = _probe(c, kind)
    handler = next((h for h in ("httpGet", "tcpSocket", "grpc") if isinstance(
        as_dict(probe).get(h), dict)), None) if probe is not None else None
    if probe is None or handler is None or c.inherits("probes"):
        return
    port = as_dict(probe[handler]).get("port")
    if port is None or as_int(port) is not None or c.port_number(port) is not None:
        return
    yield hit("probe-target", w, f"{kind} targets port {port!r}, a name none of the "
              "container's ports has: the kubelet cannot resolve it and the probe always fails",
              (*c.path, kind, handler, "port"), container=c, severity=Severity.ERROR,
              fix=f"name the containerPort {port!r} in ports, or give the port number")


#: Flags that name the HTTP port itself (Triton: --http-port; TF Serving: --rest_api_port;
#: OpenVINO Model Server: --rest_port; LMDeploy: --server-port). Where one is given, a
#: ``--port`` beside it is the gRPC port (TF Serving, OVMS, Triton's own --grpc-port aside).
HTTP_FLAGS = ("--http-port", "--http_port", "--rest_api_port", "--rest-api-port",
              "--rest_port", "--rest-port", "--server-port", "--server_port")
#: Flags that set the port a server answers HTTP on (vLLM, SGLang, TGI, llama.cpp: --port).
LISTEN_FLAGS = ("--port", *HTTP_FLAGS)
#: Servers whose ``--port`` is gRPC, with REST only on its own flag: TensorFlow Serving and
#: OpenVINO Model Server (image or program).
GRPC_PORT = re.compile(r"(^|/)(tensorflow[-/]serving|model_server|ovms)(:|@|$)|"
                       r"(^|/)(tensorflow_model_server|ovms)$")
#: The HTTP port of a known server when no flag says (servelab.k8s.servers names them).
DEFAULT_PORTS = {"vLLM": 8000, "NVIDIA Triton Inference Server": 8000, "llama.cpp server": 8080,
                 "Ollama": 11434, "SGLang": 30000}


def _flag_port(words: tuple[str, ...], *, grpc_port: bool = False) -> tuple[int, str] | None:
    """The port a listen flag of *words* gives, and the flag as written: an HTTP flag's
    before ``--port`` (then the gRPC port), and never ``--port`` where *grpc_port*."""
    flags = [HTTP_FLAGS] if grpc_port else [HTTP_FLAGS, ("--port",)]
    for group in flags:
        for i, word in enumerate(words):
            flag, eq, value = word.partition("=")
            if flag in group:
                port = as_int(value if eq else (words[i + 1] if i + 1 < len(words) else ""))
                return (port, f"{flag} {port}") if port is not None else None
    return None


def listen_port(w: Workload, c: Container, ctx: Context) -> tuple[int, str] | None:
    """The port the serving container's server answers HTTP on, and how that is known: a flag
    of the command that runs the server (``--port``, Triton's ``--http-port``), a variable
    (``LLAMA_ARG_PORT``, ``OLLAMA_HOST``), or the default of a known server; None when unknown."""
    if w.kind.startswith("Ray"):
        return None  # Ray runs the pod (dashboard agent, Serve proxy), not the image's server
    image = str(c.data.get("image") or "")
    commands = [cmd.words for cmd in container_commands(w, c, ctx.inventory) if cmd.words]
    grpc_port = bool(GRPC_PORT.search(image.split("@", maxsplit=1)[0])) or any(
        GRPC_PORT.search(words[0]) for words in commands)
    for words in commands:  # the command that runs the server, or args given to the image's
        if known_server("", list(words)) is not None or words[0].startswith("-"):
            found = _flag_port(words, grpc_port=grpc_port)
            if found is not None:
                return found[0], f"its {found[1]}"
    env = env_values(w, c, ctx.inventory)
    server = known_server(image, [x for words in commands for x in words])
    if server is None:
        return None
    if server.name == "llama.cpp server" and as_int(env.get("LLAMA_ARG_PORT")) is not None:
        return as_int(env["LLAMA_ARG_PORT"]) or 0, "LLAMA_ARG_PORT"
    if server.name == "Ollama" and "OLLAMA_HOST" in env:
        port = as_int(env["OLLAMA_HOST"].rsplit(":", 1)[-1]) if ":" in env["OLLAMA_HOST"] \
            else None
        return (port, "OLLAMA_HOST") if port is not None else None
    flagged = any(w.partition("=")[0] in LISTEN_FLAGS for words in commands for w in words)
    if server.name in DEFAULT_PORTS and not flagged:  # a flag whose value is unknown: unknown
        return DEFAULT_PORTS[server.name], f"{server.name}'s default, no port flag"
    return None


def _declared(c: Container) -> set[int]:
    return {n for p in as_list(c.data.get("ports"))
            if (n := as_int(as_dict(p).get("containerPort"))) is not None}


def _probe_port(w: Workload, c: Container, kind: str, ctx: Context) -> Iterator[Finding]:
    """An httpGet probe on a port the server does not answer on: another port than the one
    its command or its known default says, or a port only a sidecar declares."""
    probe = _probe(c, kind)
    http = as_dict(probe.get("httpGet")) if probe is not None else {}
    port = c.port_number(http.get("port")) if http else None
    if port is None:
        return
    sidecars = {n: o.name for o in w.containers if o is not c for n in _declared(o)}
    listen = listen_port(w, c, ctx)
    at = (*c.path, kind, "httpGet", "port")
    if listen is not None and port != listen[0]:
        whose = f", a port of the sidecar {sidecars[port]!r}" if port in sidecars else ""
        yield hit("probe-target", w, f"{kind} GETs port {port}{whose}, but the server answers "
                  f"HTTP on {listen[0]} ({listen[1]}): the probe never passes", at, container=c,
                  severity=Severity.ERROR, fix=f"set {kind}.httpGet.port: {listen[0]}")
    elif listen is None and port in sidecars and port not in _declared(c):
        yield hit("probe-target", w, f"{kind} GETs port {port}, which the sidecar "
                  f"{sidecars[port]!r} declares, not the serving container {c.name!r}: it "
                  "checks the sidecar, not the server", at, container=c,
                  fix=f"point {kind}.httpGet.port at the serving container's port")


def _selecting_services(w: Workload, ctx: Context) -> list[str]:
    return [svc.ref for svc in ctx.inventory.services if svc.same_namespace(w.obj)
            and service_selects(as_dict(svc.data.get("spec")).get("selector"), w.pod_labels)]


def _no_readiness(w: Workload, c: Container, ctx: Context) -> Finding:
    path = (*c.path, "readinessProbe")
    services = _selecting_services(w, ctx)
    if w.obj.api_version.startswith("serving.kserve.io/"):
        return hit("probe-target", w, "no readinessProbe: in KServe's Serverless mode Knative "
                   "then probes the port over TCP (the process is up, not the model loaded); in "
                   "RawDeployment mode requests arrive before the model is loaded", path,
                   container=c)
    who = (f"{', '.join(services)} sends requests" if services else
           "traffic routed to the pods arrives")
    if role(w, c, ctx) is not None:  # a simulator: it loads no model, but takes traffic
        return hit("probe-target", w, "no readinessProbe: the pods count as ready as soon as the "
                   f"container runs, so {who} before the server listens", path, container=c)
    return hit("probe-target", w, "no readinessProbe: the pods count as ready as soon as the "
               f"container runs, so {who} before the model is loaded", path, container=c,
               severity=Severity.ERROR)


@rule(
    "probe-target",
    Severity.WARNING,
    "readiness/startup probes do not hit the measured health path and port, or liveness == "
    "readiness",
    rationale="Kubernetes shows Running as soon as the process starts; only a readiness probe "
    "on the server's health endpoint keeps traffic away until the model is loaded. The "
    "experiment measured readiness on one path and port; probes elsewhere measure something "
    "else. A liveness probe identical to the readiness probe restarts pods that are merely "
    "busy.",
    fix="point readinessProbe and startupProbe at httpGet {path: <healthPath>, port: <port>} "
    "from the experiment; give the livenessProbe a longer period or threshold",
)
def probe_target(w: Workload, ctx: Context) -> Iterator[Finding]:
    if not w.serves or no_traffic(w, w.serving, ctx):
        return
    c = w.serving
    readiness = _probe(c, "readinessProbe")
    if readiness is None and not c.inherits("probes"):
        yield _no_readiness(w, c, ctx)
    for kind in ("readinessProbe", "startupProbe"):
        probe = _probe(c, kind)
        if probe is not None:
            yield from _target(w, c, kind, probe, ctx.measured)
    measured_port = ctx.measured is not None and ctx.measured.port is not None
    for kind in ("livenessProbe",) if measured_port else PROBES:
        yield from _unknown_port(w, c, kind)
        yield from _probe_port(w, c, kind, ctx)
    liveness = _probe(c, "livenessProbe")
    if liveness is not None and readiness is not None and (
            effective(c, liveness) == effective(c, readiness)):
        yield hit("probe-target", w, "livenessProbe is identical to readinessProbe: a busy or "
                  "briefly unready server is restarted instead of being taken out of rotation",
                  (*c.path, "livenessProbe"), container=c)
