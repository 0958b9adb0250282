"""start-install: code and packages installed, cloned or fetched when the pod starts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import Container, Workload, as_dict, as_list
from servelab.k8s.rayenv import RuntimeEnv, env_field, runtime_envs, unreadable, why_unreadable
from servelab.k8s.rules.model_source import dies_with_pod, fetch_of
from servelab.k8s.script import Command, container_commands, script_commands

#: program -> the subcommands that install (an empty tuple: the program itself installs).
INSTALLERS: dict[str, tuple[str, ...]] = {
    "pip": ("install",), "pipx": ("install",), "uv": ("add", "sync"), "poetry": ("install",),
    "conda": ("install", "create"), "mamba": ("install", "create"),
    "micromamba": ("install", "create"), "apt-get": ("install",), "apt": ("install",),
    "apk": ("add",), "yum": ("install",), "dnf": ("install",), "microdnf": ("install",),
    "zypper": ("install", "in"), "npm": ("install", "i", "ci"), "yarn": ("add", "install"),
    "go": ("install",), "cargo": ("install",),
}
_PIP = re.compile(r"^pip(3(\.\d+)?)?$")
_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")
SHELLS = {"sh", "bash", "dash", "zsh", "python", "python3"}
#: A verified download: a checksum or signature check in the same script.
VERIFIED = re.compile(r"sha256sum|sha512sum|shasum|md5sum|gpg\s+--verify|cosign\s+verify|"
                      r"--checksum|--hash=|--require-hashes")
#: URL or ref parts that move: the content behind them changes over time.
MOVING = re.compile(r"(^|[/:@=_-])(latest|main|master|nightly|head|dev|edge)([/._-]|$)",
                    re.IGNORECASE)

FIX = ("bake it into the image (a RUN step in the Dockerfile), so that every start runs exactly "
       "what was built and tested and needs no network")
PIN_FIX = ("bake it into the image; if it must be fetched at start, pin an exact version or "
           "commit and verify its checksum (sha256sum -c) before using it")


def _program(words: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The installing program and its arguments (``python -m pip install`` -> pip, install...)."""
    name = words[0].rsplit("/", 1)[-1]
    if _PYTHON.match(name) and words[1:3] == ("-m", "pip"):
        return "pip", words[3:]
    if name == "uv" and words[1:3] == ("pip", "install"):
        return "pip", words[2:]
    return ("pip" if _PIP.match(name) else name), words[1:]


def install_of(cmd: Command) -> str | None:
    """What the command installs at start, as written; None when it installs nothing."""
    if not cmd.words:
        return None
    program, args = _program(cmd.words)
    subs = INSTALLERS.get(program)
    plain = [a for a in args if not a.startswith("-")]
    if subs is None or not plain or plain[0] not in subs:
        return _piped_script(cmd) or _clone(cmd)
    if program == "pip" and "--no-index" in args:
        return None  # from a mounted wheelhouse: no network
    what = " ".join([program, *plain[:4]]) + (" ..." if len(plain) > 4 else "")
    return f"{what} (not pinned)" if program == "pip" and _unpinned(plain[1:]) else what


def _unpinned(packages: list[str]) -> bool:
    names = [p for p in packages if not p.startswith(("/", ".", "-")) and "://" not in p
             and not p.endswith((".txt", ".whl", ".tar.gz", ".zip", ".toml"))]
    return any(not re.search(r"==|@", p) for p in names)


def _piped_script(cmd: Command) -> str | None:
    if cmd.program in ("curl", "wget") and cmd.piped_to and (
            cmd.piped_to[0].rsplit("/", 1)[-1] in SHELLS):
        url = next((w for w in cmd.words if "://" in w), "a URL")
        return f"{cmd.program} {url} | {cmd.piped_to[0]}"
    return None


def _clone(cmd: Command) -> str | None:
    if cmd.program == "git" and cmd.words[1:2] == ("clone",) and "huggingface.co" not in cmd.text:
        url = next((w for w in cmd.words if "://" in w or w.startswith("git@")), "a repository")
        return f"git clone {url}"
    return None


def _unpinned_fetch(cmd: Command) -> str | None:
    """A file or image fetched without a fixed version or a checksum check (init containers;
    model downloads are model-mount's)."""
    what = fetch_of(cmd)
    if what is None or VERIFIED.search(cmd.script or cmd.text):
        return None
    if cmd.program == "oras":
        refs = [w for w in cmd.words[2:] if not w.startswith("-")]
        return what if any("@sha256:" not in r for r in refs[:1]) else None
    if cmd.program in ("curl", "wget"):
        urls = [w for w in cmd.words[1:] if "://" in w]
        return what if any(MOVING.search(u) for u in urls) else None
    return None  # git clone is an install; hubs and buckets are model-mount's


def _container(w: Workload, c: Container, ctx: Context) -> Iterator[Finding]:
    if c.inherits("command") and not c.data.get("args"):
        return
    who = f"init container {c.name!r}" if c.init else f"container {c.name!r}"
    for cmd in container_commands(w, c, ctx.inventory):
        what = install_of(cmd)
        if what is not None:
            unverified = what.startswith(("curl", "wget", "git"))
            yield hit("start-install", w, f"{who} runs {what} at every start{cmd.note}: each start "
                      "depends on the network and may get other code than was tested", cmd.path,
                      container=c, at=cmd.obj, line=cmd.line, fix=PIN_FIX if unverified else FIX)
            continue
        fetched = _unpinned_fetch(cmd) if c.init and not dies_with_pod(w, c) else None
        if fetched is not None:
            yield hit("start-install", w, f"{who} fetches a file at every start ({fetched})"
                      f"{cmd.note} with "
                      "no fixed version and no checksum check: each start may get something else",
                      cmd.path, container=c, at=cmd.obj, line=cmd.line, fix=PIN_FIX)


def _packages(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("packages", value.get("dependencies", ""))
    if isinstance(value, list):
        return ", ".join(map(str, value[:4])) + (", ..." if len(value) > 4 else "")
    return str(value)


def _runtime_env(w: Workload, env: RuntimeEnv) -> Iterator[Finding]:
    at = env_field(w.obj)
    for key in ("pip", "uv", "conda"):
        value = env.data.get(key)
        if not value or (key == "conda" and isinstance(value, str)):
            continue  # a conda env by name is one the image already has
        yield hit("start-install", w, f"runtime_env of {env.where} installs {key} packages "
                  f"({_packages(value)}) on every Ray node that runs it, at every start", at,
                  at=w.obj, line=env.line(key), fix="bake the packages into the Ray image and "
                  "drop runtime_env." + key)
    urls = [(k, str(u)) for k in ("working_dir", "py_modules")
            for u in ([env.data[k]] if isinstance(env.data.get(k), str) else
                      as_list(env.data.get(k))) if "://" in str(u)]
    for key, url in urls:
        moving = " (a moving branch)" if MOVING.search(url) else ""
        yield hit("start-install", w, f"runtime_env of {env.where} downloads its code from "
                  f"{url}{moving} at every start", at, at=w.obj, line=env.line(key),
                  fix="bake the code into the Ray image (or pin an immutable archive by "
                  "commit and verify it)")


def _entrypoint(w: Workload) -> Iterator[Finding]:
    text = as_dict(w.obj.data.get("spec")).get("entrypoint")
    if w.kind != "RayJob" or not isinstance(text, str):
        return
    for cmd in script_commands(w.obj, ("spec", "entrypoint"), text):
        what = install_of(cmd)
        if what is not None:
            yield hit("start-install", w, f"the job's entrypoint runs {what} at every start",
                      cmd.path, line=cmd.line, fix=FIX)


@rule(
    "start-install",
    Severity.WARNING,
    "packages installed, code cloned or artifacts fetched when the pod starts",
    rationale="pip install, apt-get install, git clone, curl | sh, a Ray runtime_env with pip "
    "or a working_dir URL, or an init container fetching an unpinned file run at every start: "
    "starts get slower, fail when an index or repository is down, and may install other "
    "versions than were tested (a moving tag, an unpinned package, a branch).",
    fix="bake code and packages into the image; pin and verify anything that must be fetched",
)
def start_install(w: Workload, ctx: Context) -> Iterator[Finding]:
    for c in (*w.init_containers, *w.containers):
        yield from _container(w, c, ctx)
    if ctx.leads(w) and w.kind in ("RayService", "RayJob"):
        if unreadable(w.obj):
            ctx.note(f"start-install: {w.obj.ref}: {'.'.join(map(str, env_field(w.obj)))} is "
                     f"not readable YAML ({why_unreadable(w.obj)}): its runtime_env was not "
                     "checked")
        for env in runtime_envs(w.obj):
            yield from _runtime_env(w, env)
        yield from _entrypoint(w)
