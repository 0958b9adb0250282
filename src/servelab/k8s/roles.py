"""Containers that are no model server: a client, an idle pod, a simulator.

k8s-check checks every pod as the GPU server when none requests a GPU. Some of those pods serve
no model at all:

* a **client** of a server: an HTTP or SDK client image (``curlimages/curl``, the ``openai``
  client, a load generator such as k6, locust, guidellm), or a command that runs one;
* an **idle** pod: its command only waits (``sleep infinity``, ``tail -f /dev/null``, a
  ``while true; do sleep 30; done`` loop), a debug or toolbox pod;
* an **LLM simulator** or mock (``llm-d-inference-sim``, ``vllm-sim``, a ``mock`` or ``fake``
  server): it answers the API of a server but loads no model and needs no GPU.

The serving rules that are about a model server (probes, where the model comes from, the GPU,
``/dev/shm``) do not apply to the first two; a simulator takes traffic, so its readiness probe
is still judged, but it loads no model (no ``model-mount``, ``startup-probe-budget``,
``gpu-limit``, ``shm``). Image pinning, security context, secrets, resources and installs at
start apply to all of them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from servelab.k8s.checks import Context
from servelab.k8s.model import Container, Workload
from servelab.k8s.script import container_commands, env_values
from servelab.k8s.servers import _repository, known_server

CLIENT, IDLE, SIMULATOR = "client", "idle", "simulator"

#: Image repositories of HTTP clients, SDK clients and load generators.
CLIENT_IMAGE = re.compile(
    r"(^|/)curl$|^curlimages/|(^|/)(httpie|grpcurl|k6|locust|guidellm|genai-perf|hey|vegeta|"
    r"wrk2?|openai|openai-python|openai-client|llmperf)$")
#: Programs that make requests to a server rather than serve one.
CLIENT_PROGRAMS = {"curl", "wget", "http", "grpcurl", "k6", "locust", "guidellm", "genai-perf",
                   "hey", "vegeta", "wrk", "ab", "openai", "llmperf"}
#: Benchmark clients run as a module, script or subcommand.
CLIENT_WORDS = re.compile(r"(^|[/.])(benchmark_serving|benchmark_throughput|bench_serving|"
                          r"token_benchmark_ray|load_test|loadtest)(\.py)?$")
#: Variables that point an OpenAI-style client at a server it does not run.
CLIENT_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE")
#: Simulators and mocks of a model server (image repository or program name).
SIMULATOR_NAME = re.compile(r"(^|[-_/.])(sim|simulator|mock|mocks|fake|stub|emulator|dummy)"
                            r"([-_/.]|$)|inference-sim", re.IGNORECASE)
#: Programs an idle container may run besides the wait itself (setup, a print).
IDLE_SETUP = {"echo", "printf", "true", ":", "set", "export", "trap", "mkdir", "cp", "ln", "chmod",
              "chown", "cd", "ls", "cat", "env", "date", "nvidia-smi", "apt-get", "apt", "apk",
              "pip", "pip3", "yum", "dnf", "done", "fi", "wait", "touch", "id", "whoami"}


class Role(NamedTuple):
    kind: str
    why: str


def _idle_wait(words: tuple[str, ...]) -> bool:
    """``sleep infinity`` (or a long sleep), ``tail -f /dev/null``, ``pause``, a sleep loop."""
    program = words[0].rsplit("/", 1)[-1] if words else ""
    if program == "sleep":
        arg = words[1] if len(words) > 1 else ""
        return arg in ("infinity", "inf") or bool(re.fullmatch(r"\d+[smhd]?", arg))
    if program == "tail":
        return "/dev/null" in words and any(w in ("-f", "-F", "--follow") for w in words)
    return program in ("pause", "infinity")


def _idle(commands: list[tuple[str, ...]]) -> str | None:
    """Why the commands only wait: the last one (a loop's ``done`` aside) waits, and every
    other one is setup."""
    while commands and commands[-1][0] in ("done", "fi"):
        commands = commands[:-1]
    if not commands or not _idle_wait(commands[-1]):
        return None
    if all(c and (c[0].rsplit("/", 1)[-1] in IDLE_SETUP or _idle_wait(c)) for c in commands):
        return f"its command only waits ({' '.join(commands[-1][:3])})"
    return None


def role(w: Workload, c: Container, ctx: Context) -> Role | None:
    """What *c* is when it is no model server (a client, an idle pod, a simulator), else None.
    A container that runs a known server (servelab.k8s.servers) is always a server."""
    image = str(c.data.get("image") or "")
    repo, _ = _repository(image) if image else ("", None)
    commands = [cmd.words for cmd in container_commands(w, c, ctx.inventory) if cmd.words]
    programs = [words[0].rsplit("/", 1)[-1] for words in commands]
    if SIMULATOR_NAME.search(repo) or any(SIMULATOR_NAME.search(p) for p in programs):
        name = repo if SIMULATOR_NAME.search(repo) else next(
            p for p in programs if SIMULATOR_NAME.search(p))
        return Role(SIMULATOR, f"{name} is a simulator or mock of a model server")
    if any(words[:3] == ("vllm", "bench", "serve") for words in commands):
        return Role(CLIENT, "its command runs vllm bench serve, a client")
    argv = [w for words in commands for w in words] or c.argv()
    if known_server("", argv) is not None:
        return None
    idle = _idle(commands)
    if idle is not None:
        return Role(IDLE, idle)
    if known_server(image, argv) is not None:
        return None
    if CLIENT_IMAGE.search(repo):
        return Role(CLIENT, f"{repo} is a client image")
    main = next((p for p in reversed(programs) if p not in IDLE_SETUP), "")
    if main in CLIENT_PROGRAMS:
        return Role(CLIENT, f"its command runs the client {main}")
    if any(CLIENT_WORDS.search(word) for words in commands for word in words):
        return Role(CLIENT, "its command runs a serving benchmark client")
    env = env_values(w, c, ctx.inventory)
    key = next((k for k in CLIENT_ENV if env.get(k)), None)
    if key is not None:
        return Role(CLIENT, f"{key} points it at a server it does not run")
    if any(re.fullmatch(r"openai([=<>~!].*)?", word) for words in commands
           if words[:2] in (("pip", "install"), ("pip3", "install")) for word in words[2:]):
        return Role(CLIENT, "its command installs the openai client and runs no server")
    return None


def no_model(w: Workload, c: Container, ctx: Context) -> Role | None:
    """The role of *c* when it loads no model (any of the three), noted once in the report."""
    found = role(w, c, ctx)
    if found is not None:
        ctx.note(f"{w.ref}: container {c.name!r} is not a model server ({found.why}): "
                 + ("its readiness probe is judged, not where a model comes from, the GPU or "
                    "/dev/shm" if found.kind == SIMULATOR else
                    "the serving rules (probes, model source, GPU, /dev/shm) do not apply"))
    return found


def no_traffic(w: Workload, c: Container, ctx: Context) -> bool:
    """A client or idle container: it takes no traffic a probe should guard."""
    found = no_model(w, c, ctx)
    return found is not None and found.kind != SIMULATOR
