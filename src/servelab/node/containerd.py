"""A private containerd: the runtime a Kubernetes node uses, started for one cold pull and gone
after it.

A cold pull measured through the engine's own containerd would not be cold: its content store
is shared with every other image on the machine. So each cold repeat starts a containerd of its
own (Debian's ``containerd``, the one the engine's set-up installs):

* ``root``, ``state``, the gRPC, ttrpc and debug sockets and the ``opt`` plugin path all live in
  a fresh temp dir; the CRI plugin is disabled; the namespace is unique to the run;
  ``max_concurrent_downloads = 3`` (the CRI default), recorded with the figure;
* it runs in a private mount namespace (``unshare --mount --propagation private``), so the
  snapshots it mounts are invisible to the host and vanish with it;
* the pull is ``ctr images pull`` with unpacking (what a kubelet's pull does through CRI),
  timed from the call to its return: download and unpack overlap as containerd does them;
* before the pull: the instance's root must be empty (checked), ``sync`` runs, and the
  registry's blob files are evicted from the page cache (``posix_fadvise(DONTNEED)``) when the
  registry's data directory is known; a global ``drop_caches`` only when asked for;
* after the pull: the registry's access log, when known, must show every layer served in full
  (a 200 with the layer's size): otherwise the figure is marked as not verified cold;
* at the end: containerd and its children are stopped and the temp dir removed, on every exit
  path; a dir left by a killed run (its owner process gone) is swept by the next run, which
  says so.

Where a private containerd cannot run (no binary, not root, a temp dir on overlayfs), servelab
keeps its own fetch and names the reason (:func:`unavailable`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab import proc
from servelab.errors import CapabilityError, CommandError

#: statfs f_type of overlayfs: containerd's overlayfs snapshotter cannot nest on it
OVERLAYFS_MAGIC = 0x794C7630
PREFIX = "servelab-ctd-"
OWNER_FILE = "servelab-owner.json"
MAX_CONCURRENT_DOWNLOADS = 3
START_TIMEOUT_S = 30.0
PULL_TIMEOUT_S = float(os.environ.get("SERVELAB_CONTAINERD_PULL_TIMEOUT", "1800"))
_ACCESS = re.compile(r'"GET /v2/(?P<repo>\S+)/blobs/(?P<digest>sha256:[0-9a-f]{64}) HTTP/[0-9.]+"'
                     r' (?P<status>[0-9]{3}) (?P<bytes>[0-9]+|-)')


def _fs_type(path: Path) -> int | None:
    """The filesystem magic of *path* (Linux statfs), None when it cannot be read."""
    import ctypes
    import ctypes.util

    class _StatFs(ctypes.Structure):
        _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 120)]

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    buf = _StatFs()
    if libc.statfs(str(path).encode(), ctypes.byref(buf)) != 0:
        return None
    return int(buf.f_type) & 0xFFFFFFFF


def unavailable(parent: Path | None = None) -> str | None:
    """Why a private containerd cannot run here, or None when it can."""
    for tool in ("containerd", "ctr", "unshare"):
        if proc.which(tool) is None:
            return f"`{tool}` is not installed (Debian: apt-get install containerd util-linux)"
    if os.geteuid() != 0:
        return "not root: a private containerd needs root (docs/action.md says how to enable it)"
    where = parent or Path(tempfile.gettempdir())
    if _fs_type(where) == OVERLAYFS_MAGIC:
        return f"the temp dir {where} is on overlayfs, where the overlayfs snapshotter cannot run"
    return None


def config_text(work: Path) -> str:
    """containerd's config for an instance living in *work*."""
    return "\n".join([
        "version = 2",
        f'root = "{work / "root"}"',
        f'state = "{work / "state"}"',
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        "[grpc]", f'  address = "{work / "containerd.sock"}"',
        "[ttrpc]", f'  address = "{work / "containerd.sock.ttrpc"}"',
        "[debug]", f'  address = "{work / "debug.sock"}"',
        "[metrics]", '  address = ""',
        '[plugins."io.containerd.internal.v1.opt"]', f'  path = "{work / "opt"}"',
        '[plugins."io.containerd.transfer.v1.local"]',
        f"  max_concurrent_downloads = {MAX_CONCURRENT_DOWNLOADS}",
        "",
    ])


@dataclass
class ColdCheck:
    """Was a cold pull really cold? Each part is True, False, or None (not checked: why)."""

    root_empty: bool
    blobs_served_in_full: bool | None
    page_cache: str
    detail: list[str] = field(default_factory=list)

    @property
    def cold(self) -> bool:
        return self.root_empty and self.blobs_served_in_full is not False

    def to_dict(self) -> dict[str, Any]:
        return {"cold": self.cold, "root_empty": self.root_empty,
                "blobs_served_in_full": self.blobs_served_in_full,
                "page_cache": self.page_cache, "detail": list(self.detail)}


def _alive(pid: int, start_time: str | None) -> bool:
    from servelab import cleanup

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start_time is None or cleanup.owner_id(pid) == f"{pid}:{start_time}" or \
        cleanup.owner_id(pid).endswith(start_time)


def _pids_using(work: Path) -> list[int]:
    """Processes whose command line names *work* (containerd, its shims)."""
    needle = str(work).encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle in (d / "cmdline").read_bytes():
                found.append(int(d.name))
    return found


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def sweep(parent: Path | None = None) -> list[str]:
    """Remove what killed runs left (their owner process is gone): processes, then dirs."""
    where = parent or Path(tempfile.gettempdir())
    notes = []
    for d in sorted(where.glob(PREFIX + "*")):
        try:
            owner = json.loads((d / OWNER_FILE).read_text(encoding="utf-8"))
            pid, started = int(owner["pid"]), str(owner.get("owner") or "")
        except (OSError, ValueError, KeyError, TypeError):
            pid, started = -1, ""
        if pid > 0 and _alive(pid, started.partition(":")[2] or None):
            continue
        _kill_all(_pids_using(d))
        shutil.rmtree(d, ignore_errors=True)
        notes.append(f"removed a private containerd left by a killed run: {d}")
    return notes


class PrivateContainerd:
    """One containerd of servelab's own, in a temp dir and a private mount namespace."""

    def __init__(self, run_id: str, *, parent: Path | None = None) -> None:
        safe = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")[:40] or "run"
        self.namespace = f"servelab-{safe}"
        self.work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{safe}-", dir=parent))
        self.socket = self.work / "containerd.sock"
        self._child: Any = None

    def __enter__(self) -> PrivateContainerd:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        from servelab import cleanup

        (self.work / OWNER_FILE).write_text(json.dumps(
            {"pid": os.getpid(), "owner": cleanup.owner_id()}), encoding="utf-8")
        cfg = self.work / "config.toml"
        cfg.write_text(config_text(self.work), encoding="utf-8")
        log = (self.work / "containerd.log").open("w", encoding="utf-8")
        try:
            self._child = proc.start(
                ["unshare", "--mount", "--propagation", "private", "--",
                 "containerd", "--config", str(cfg)],
                stdin=None, stdout=log.fileno(), stderr=log.fileno(), new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._child.poll() is not None:
                break
            if self.socket.exists() and self.ctr("version", check=False, timeout=5).returncode == 0:
                return
            time.sleep(0.05)
        raise CapabilityError(f"the private containerd did not start: {self._log_tail()}",
                              hint="run `servelab doctor`; see docs/run.md (cold pulls)")

    def _log_tail(self) -> str:
        try:
            text = (self.work / "containerd.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "no log"
        return proc.tail(text, 3, inline=True) or "no output"

    def ctr(self, *args: str, check: bool = True, timeout: float = 60.0) -> proc.Completed:
        return proc.run(["ctr", "-a", str(self.socket), "-n", self.namespace, *args],
                        check=check, timeout=timeout)

    def root_empty(self) -> bool:
        """No blob in the content store and no snapshot: nothing of any image is held."""
        root = self.work / "root"
        blobs = root / "io.containerd.content.v1.content" / "blobs" / "sha256"
        snaps = root / "io.containerd.snapshotter.v1.overlayfs" / "snapshots"
        return not any(_entries(blobs)) and not any(_entries(snaps))

    def pull(self, ref: str, *, plain_http: bool) -> float:
        """``ctr images pull`` with unpacking; the seconds it took."""
        args = ["images", "pull", *(["--plain-http"] if plain_http else []), ref]
        t0 = time.monotonic()
        try:
            self.ctr(*args, timeout=PULL_TIMEOUT_S)
        except CommandError as e:
            raise CapabilityError(f"the private containerd could not pull {ref}: "
                                  f"{proc.tail(e.stderr, 3, inline=True)}",
                                  hint="is the registry reachable from this machine?") from e
        return time.monotonic() - t0

    def stop(self) -> None:
        """Stop containerd and every process that names its dir, then remove the dir."""
        child, self._child = self._child, None
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=10)
            except Exception:
                _kill_all([child.pid])
                with contextlib.suppress(Exception):
                    child.wait(timeout=5)
        _kill_all(_pids_using(self.work))
        shutil.rmtree(self.work, ignore_errors=True)


def _entries(d: Path) -> Iterator[str]:
    try:
        yield from (p.name for p in d.iterdir())
    except OSError:
        return


def evict_registry_blobs(data_dir: Path, digests: Iterable[str]) -> int:
    """Drop the registry's blob files of *digests* from the page cache; how many were."""
    done = 0
    for d in digests:
        algo, _, hexd = d.partition(":")
        path = data_dir / "docker" / "registry" / "v2" / "blobs" / algo / hexd[:2] / hexd / "data"
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            done += 1
        finally:
            os.close(fd)
    return done


def drop_caches() -> None:
    """The global page-cache drop (every other job on the machine pays for it: opt-in only)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n", encoding="ascii")


def served_in_full(log_text: str, sizes: dict[str, int]) -> tuple[bool, list[str]]:
    """Did the registry's access log (*log_text*, the lines written during the pull) serve
    every blob of *sizes* (digest -> size) with a 200 of that many bytes?"""
    served: dict[str, int] = {}
    for m in _ACCESS.finditer(log_text):
        if m.group("status") == "200" and m.group("bytes") != "-":
            served[m.group("digest")] = max(served.get(m.group("digest"), 0),
                                            int(m.group("bytes")))
    missing = [f"{d[:19]}: {'not served' if d not in served else f'{served[d]} of {n} bytes'}"
               for d, n in sizes.items() if served.get(d) != n]
    return not missing, missing
