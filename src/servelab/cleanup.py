"""Label, track and remove what a run creates, on success, failure, timeout, SIGINT and SIGTERM.

API (shared by the build, scan and smoke stages)::

    run_id = new_run_id()
    with Cleanup(run_id, keep=False) as cu:
        container = client.containers.create(..., labels=cu.labels())
        cu.container(container.id)        # also: cu.volume(name), cu.image(ref),
        ...                               #       cu.path(tmpdir), cu.callback(fn)
    # leaving the block removes them (newest first), unless keep=True

    sweep()                               # remove leftovers of runs that were killed

* Every resource carries the labels of :func:`labels`: ``servelab.run-id``, ``servelab.owner``
  (host, pid and process start time of the run that made it), ``servelab.created`` (unix
  time) and ``servelab.keep``; a :class:`Cleanup` adds ``servelab.cleanup`` (its own token),
  and on exit it also removes containers/volumes/images carrying that token that were
  created but not yet registered (a signal between ``create`` and ``cu.container``).
* Inside the block SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) in the main
  thread, so it unwinds like Ctrl-C; the previous handlers are restored on exit. While the
  removal runs, SIGINT and SIGTERM are held back (a CI runner sends SIGINT, then SIGTERM
  7.5 s later) and re-raised once it is done.
* :func:`sweep` removes labelled resources whose owner process on this host is gone, or that
  are older than *max_age_s*; never those labelled ``servelab.keep=true``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

from servelab import logs
from servelab.errors import Terminated

log = logs.get("servelab.cleanup")

RUN_ID_LABEL = "servelab.run-id"
OWNER_LABEL = "servelab.owner"
CREATED_LABEL = "servelab.created"
KEEP_LABEL = "servelab.keep"
SCOPE_LABEL = "servelab.cleanup"
#: leftovers older than this are swept even when their owner cannot be checked (other host)
DEFAULT_MAX_AGE_S = 6 * 3600.0


class Started:
    """Something a run starts and must stop (a private containerd, a private registry): used
    as ``with X(...) as x:``, it is started on entry, and stopped on exit or when its start
    fails halfway (what it had started goes). Subclasses give ``start`` and ``stop``; ``stop``
    must be safe to call twice and after a partial start."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def new_run_id() -> str:
    """A fresh run id: UTC time plus random hex (sorts by time, never collides in practice)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def owner_id(pid: int | None = None) -> str:
    """``host:pid:starttime`` of *pid* (default: this process)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '?'}"


def owner_alive(owner: str) -> bool | None:
    """Whether the process named by an owner label still runs (None: on another host)."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    now = _start_time(int(pid_text))
    return now is not None and (start in ("", "?") or now == start)


def labels(run_id: str, *, keep: bool = False) -> dict[str, str]:
    """The labels every resource of run *run_id* carries."""
    return {
        RUN_ID_LABEL: run_id,
        OWNER_LABEL: owner_id(),
        CREATED_LABEL: str(int(time.time())),
        KEEP_LABEL: "true" if keep else "false",
    }


def docker_client(timeout: int = 60) -> Any:
    """A Docker SDK client whose calls each have *timeout* seconds (SERVELAB_ENGINE_TIMEOUT
    overrides it); CapabilityError (exit 3) when the engine cannot be reached or its ping is
    not answered in that time (an engine that accepts and never answers)."""
    from servelab import proc
    from servelab.errors import CapabilityError

    seconds = proc.deadline(proc.ENGINE_TIMEOUT_ENV, float(timeout))
    try:
        import docker

        client = docker.from_env(timeout=max(1, round(seconds)))
        client.ping()
    except Exception as e:
        raise CapabilityError(
            f"the Docker engine cannot be reached: {str(e).splitlines()[0][:200]}",
            hint="start dockerd (scripts/bootstrap.sh does) or set DOCKER_HOST; "
            f"{proc.ENGINE_TIMEOUT_ENV} (seconds, now {seconds:g}) sets how long each call "
            "to the engine may take",
        ) from e
    return client


_shared: list[Any] = []


def shared_client() -> Any:
    """One Docker SDK client for the whole process (creating one costs a connection and a
    ping); callers must not close it."""
    if not _shared:
        _shared.append(docker_client(timeout=120))
    return _shared[0]


# ---------------------------------------------------------------------------- removal


def _quiet(what: str, fn: Callable[[], Any], errors: list[str]) -> None:
    try:
        fn()
    except Exception as e:
        if any(c.__name__ == "NotFound" for c in type(e).__mro__):
            return  # already gone (the SDK's ImageNotFound is a NotFound): nothing to say
        msg = f"could not remove {what}: {str(e).splitlines()[0][:200] if str(e) else e!r}"
        log.warning("%s", msg)
        errors.append(msg)


def remove_container(client: Any, ref: str, errors: list[str]) -> None:
    _quiet(f"container {ref}", lambda: client.api.remove_container(ref, force=True, v=True),
           errors)


def remove_volume(client: Any, name: str, errors: list[str]) -> None:
    _quiet(f"volume {name}", lambda: client.api.remove_volume(name, force=True), errors)


def remove_image(client: Any, ref: str, errors: list[str]) -> None:
    _quiet(f"image {ref}", lambda: client.api.remove_image(ref, force=True), errors)


def remove_path(path: Path, errors: list[str]) -> None:
    def rm() -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()

    _quiet(f"path {path}", rm, errors)


def _labelled(client: Any, label_filter: str) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """Containers, volumes and images carrying a label (``key`` or ``key=value``)."""
    flt = {"label": label_filter}
    conts = [
        (c["Id"], c.get("Labels") or {})
        for c in client.api.containers(all=True, filters=flt)
    ]
    vols = [
        (v["Name"], v.get("Labels") or {})
        for v in (client.api.volumes(filters=flt).get("Volumes") or [])
    ]
    imgs = [(i["Id"], i.get("Labels") or {}) for i in client.api.images(filters=flt)]
    return {"container": conts, "volume": vols, "image": imgs}


def _remove_kind(client: Any, kind: str, ref: str, errors: list[str]) -> None:
    {"container": remove_container, "volume": remove_volume, "image": remove_image}[kind](
        client, ref, errors
    )


# ---------------------------------------------------------------------------- Cleanup


@dataclass
class _Entry:
    kind: str  # container, volume, image, path, callback
    ref: str
    fn: Callable[[], None] | None = None


@dataclass
class Cleanup:
    """Registers resources and removes them when the ``with`` block ends, however it ends."""

    run_id: str
    keep: bool = False
    client: Any = None
    token: str = field(default_factory=lambda: secrets.token_hex(6))
    #: messages of removals that failed (the run goes on; they are reported)
    errors: list[str] = field(default_factory=list)
    #: what was left in place because keep=True
    kept: list[str] = field(default_factory=list)
    _entries: list[_Entry] = field(default_factory=list)
    _saved: dict[int, Any] = field(default_factory=dict)
    _pending: list[int] = field(default_factory=list)

    # -- registration
    def labels(self) -> dict[str, str]:
        """Labels for a resource made inside this block (run id, owner, time, keep, token)."""
        return {**labels(self.run_id, keep=self.keep), SCOPE_LABEL: self.token}

    def container(self, ref: str) -> None:
        self._entries.append(_Entry("container", ref))

    def volume(self, name: str) -> None:
        self._entries.append(_Entry("volume", name))

    def image(self, ref: str) -> None:
        self._entries.append(_Entry("image", ref))

    def path(self, path: Path) -> None:
        self._entries.append(_Entry("path", str(path)))

    def callback(self, fn: Callable[[], None], what: str = "callback") -> None:
        """Call *fn* on exit (kept or not: use it for processes and threads)."""
        self._entries.append(_Entry("callback", what, fn))

    # -- context manager
    def __enter__(self) -> Cleanup:
        if threading.current_thread() is threading.main_thread():
            self._saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, _raise_terminated)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._signals_held():
            self.close()
        self._restore_signals()
        if self._pending and exc_type is None:
            if self._pending[0] == signal.SIGTERM:
                raise Terminated
            raise KeyboardInterrupt

    def close(self) -> None:
        """Remove everything registered (newest first), then anything else with our token."""
        entries, self._entries = self._entries, []
        removing = [e for e in entries if e.kind != "callback" and not self.keep]
        shown = logs.progress(f"clean-up of run {self.run_id}",
                                                   quiet=True) if removing else None
        with shown or contextlib.nullcontext():
            for e in reversed(entries):
                if e.kind == "callback":
                    _quiet(e.ref, e.fn or (lambda: None), self.errors)
                elif self.keep:
                    self.kept.append(f"{e.kind} {e.ref}")
                else:
                    if shown is not None:  # removing a 1 GB image takes seconds
                        short = e.ref[:12] if len(e.ref) == 64 and e.ref.isalnum() else e.ref
                        shown.step(f"{e.kind} {short}")
                    if e.kind == "path":
                        remove_path(Path(e.ref), self.errors)
                    else:
                        _remove_kind(self._client(), e.kind, e.ref, self.errors)
            if not self.keep and self.client is not None:
                self._remove_unregistered()

    def _remove_unregistered(self) -> None:
        try:
            found = _labelled(self.client, f"{SCOPE_LABEL}={self.token}")
        except Exception as e:
            self.errors.append(f"could not list leftovers of run {self.run_id}: {e}")
            return
        for kind in ("container", "volume", "image"):
            for ref, _ in found[kind]:
                _remove_kind(self.client, kind, ref, self.errors)

    def _client(self) -> Any:
        if self.client is None:
            self.client = shared_client()
        return self.client

    # -- signals
    @contextlib.contextmanager
    def _signals_held(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def hold(signum: int, frame: FrameType | None) -> None:
            self._pending.append(signum)

        before = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in before.items():
                signal.signal(s, h)

    def _restore_signals(self) -> None:
        for s, h in self._saved.items():
            signal.signal(s, h)
        self._saved.clear()


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


# ---------------------------------------------------------------------------- sweep


@dataclass
class SweepResult:
    removed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"removed": list(self.removed), "errors": list(self.errors)}


def _stale(lbl: dict[str, str], max_age_s: float, now: float) -> bool:
    if lbl.get(KEEP_LABEL) == "true":
        return False
    alive = owner_alive(lbl.get(OWNER_LABEL, ""))
    if alive is False:
        return True
    try:
        created = float(lbl.get(CREATED_LABEL, "nan"))
    except ValueError:
        return False
    return now - created > max_age_s


def sweep(
    max_age_s: float = DEFAULT_MAX_AGE_S, *, run_id: str | None = None, client: Any = None
) -> SweepResult:
    """Remove leftovers of killed runs: labelled resources whose owner process on this host is
    gone, or older than *max_age_s*. With *run_id*, remove everything of that run instead."""
    client = client or shared_client()
    out = SweepResult()
    flt = f"{RUN_ID_LABEL}={run_id}" if run_id else RUN_ID_LABEL
    found = _labelled(client, flt)
    now = time.time()
    for kind in ("container", "volume", "image"):
        for ref, lbl in found[kind]:
            if run_id is None and not _stale(lbl, max_age_s, now):
                continue
            errors_before = len(out.errors)
            _remove_kind(client, kind, ref, out.errors)
            if len(out.errors) == errors_before:
                shown = {"container": ref[:12], "image": ref[:19]}.get(kind, ref)
                out.removed.append(f"{kind} {shown} (run {lbl.get(RUN_ID_LABEL, '?')})")
    return out
