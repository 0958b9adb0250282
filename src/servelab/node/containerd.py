"""A private containerd: the runtime a Kubernetes node uses, started for one cold pull and gone
after it.

A cold pull measured through the engine's own containerd would not be cold: its content store
is shared with every other image on the machine. So each cold repeat starts a containerd of its
own (Debian's ``containerd``, the one the engine's set-up installs):

* ``root``, ``state``, the gRPC, ttrpc and debug sockets and the ``opt`` plugin path all live in
  a fresh temp dir (``servelab-ctd-*``); the CRI plugin is disabled; the namespace is unique to
  the run; ``max_concurrent_downloads = 3`` (the CRI default);
* it runs in a private mount namespace (``unshare --mount --propagation private``), so the
  snapshots it mounts are invisible to the host and vanish with it;
* the pull is ``ctr images pull`` with unpacking (what a kubelet's pull does through CRI):
  download and unpack overlap as containerd does them;
* at the end containerd and every process naming its dir are stopped and the dir is removed,
  on every exit path; a dir left by a killed run (its owner process gone) is swept by the next
  run (:func:`sweep`), which says so.

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
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from servelab import proc
from servelab.cleanup import Started
from servelab.errors import CapabilityError, CommandError

#: statfs f_type of overlayfs: containerd's overlayfs snapshotter cannot nest on it
OVERLAYFS_MAGIC = 0x794C7630
PREFIX = "servelab-ctd-"
#: the longest unix socket path containerd accepts
SOCKET_PATH_MAX = 104
#: an instance dir's longest socket name, and mkdtemp's suffix with its dash
_LONGEST_SOCKET = "/containerd.sock.ttrpc"
_SUFFIX = 9
OWNER_FILE = "servelab-owner.json"
MAX_CONCURRENT_DOWNLOADS = 3
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
PULL_TIMEOUT_S = 1800.0
CONTENT = Path("io.containerd.content.v1.content") / "blobs" / "sha256"
SNAPSHOTS = Path("io.containerd.snapshotter.v1.overlayfs") / "snapshots"
#: the name containerd gives a proxy snapshotter (SOCI's) in its config
PROXY_SNAPSHOTTER = "soci"
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _name_room(parent: Path) -> int:
    """How many characters of the run id fit in an instance dir's name under *parent*, so
    that its sockets' paths stay within SOCKET_PATH_MAX."""
    return SOCKET_PATH_MAX - len(str(parent)) - 1 - len(PREFIX) - _SUFFIX - len(_LONGEST_SOCKET)


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


def temp_parent() -> Path:
    """Where the instances' dirs are made (and swept): the temp dir."""
    return Path(tempfile.gettempdir())


def unavailable(parent: Path | None = None) -> str | None:
    """Why a private containerd cannot run here, or None when it can."""
    for tool in ("containerd", "ctr", "unshare"):
        if proc.which(tool) is None:
            return (f"`{tool}` is not installed (Debian: apt-get install containerd "
                    "util-linux)")
    if os.geteuid() != 0:
        return ("not root: a private containerd needs root (docs/action.md says how to "
                "enable it on a runner)")
    where = parent or temp_parent()
    if _name_room(where) < 1:
        return (f"the temp dir {where} is too long a path for containerd's unix sockets (at "
                f"most {SOCKET_PATH_MAX} characters): set TMPDIR to a shorter one, e.g. /tmp")
    if _fs_type(where) == OVERLAYFS_MAGIC:
        return (f"the temp dir {where} is on overlayfs, where containerd's overlayfs "
                "snapshotter cannot run (set TMPDIR to a directory on ext4 or xfs)")
    return None


def config_text(work: Path, proxy_socket: Path | None = None) -> str:
    """containerd's config for an instance living in *work*; with *proxy_socket*, a proxy
    snapshotter named ``soci`` served there (:mod:`servelab.node.soci`)."""
    proxy = ([f"[proxy_plugins.{PROXY_SNAPSHOTTER}]", '  type = "snapshot"',
              f'  address = "{proxy_socket}"'] if proxy_socket is not None else [])
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
        *proxy,
        "",
    ])


# ---------------------------------------------------------------------------- leftovers


def _pids_using(work: Path) -> list[int]:
    """Processes whose command line names *work* (containerd, its shims)."""
    needle = str(work).encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (d / "cmdline").read_bytes():
                found.append(int(d.name))
    return found


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _owner_gone(d: Path) -> bool:
    """Whether the run that made *d* is gone (its owner file names a dead process, or there is
    no readable owner file and the dir is older than a minute)."""
    from servelab import cleanup

    try:
        owner = json.loads((d / OWNER_FILE).read_text(encoding="utf-8"))
        alive = cleanup.owner_alive(str(owner["owner"]))
    except (OSError, ValueError, KeyError, TypeError):
        try:
            return time.time() - d.stat().st_mtime > 60
        except OSError:
            return False
    return alive is False


def _cgroup_dirs(namespace: str) -> list[Path]:
    """The cgroup dirs runc made for an instance's *namespace* (``ctr``'s default path
    ``/<namespace>/<container>``, per v1 controller or in the unified tree)."""
    return [*sorted(CGROUP_ROOT.glob(f"*/{namespace}")), CGROUP_ROOT / namespace]


def _cgroup_pids(namespace: str) -> list[int]:
    """The processes of the instance's containers (they do not name its dir)."""
    pids: set[int] = set()
    for d in _cgroup_dirs(namespace):
        for procs in d.glob("*/cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(x) for x in procs.read_text(encoding="ascii").split())
    return sorted(pids)


def remove_cgroups(namespace: str) -> list[str]:
    """Remove the (empty) cgroup dirs of *namespace*, its containers' first; those removed."""
    removed = []
    for d in _cgroup_dirs(namespace):
        for sub in sorted(d.glob("*/"), reverse=True) if d.is_dir() else []:
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()
            removed.append(str(d))
    return removed


#: how long a killed container's cgroups may take to empty (a loaded machine: seconds)
CGROUP_WAIT_S = 5.0


def remove_cgroups_waiting(namespace: str, seconds: float = CGROUP_WAIT_S) -> None:
    """:func:`remove_cgroups` until none of the namespace's cgroup dirs is left: a killed
    container leaves its cgroup only once it has exited, and a dir with no process listed
    can still be busy for a moment (rmdir: EBUSY)."""
    deadline = time.monotonic() + seconds
    while True:
        remove_cgroups(namespace)
        if not any(d.exists() for d in _cgroup_dirs(namespace)):
            return
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def namespace_of(work: Path) -> str:
    """The containerd namespace of the instance living in *work* (``PREFIX<safe>-<random>``)."""
    return "servelab-" + work.name.removeprefix(PREFIX).rpartition("-")[0]


def _remove(work: Path) -> None:
    """Kill every process naming *work* and those of its containers, remove its cgroup dirs,
    then remove it."""
    ns = namespace_of(work)
    _kill_all(_pids_using(work))
    _kill_all(_cgroup_pids(ns))
    for _ in range(50):  # killed processes close their files and leave /proc shortly after
        if not _pids_using(work):
            break
        time.sleep(0.02)
    remove_cgroups_waiting(ns)
    unmount_under(work)
    shutil.rmtree(work, ignore_errors=True)


#: the image file of an instance's own filesystem, in its dir
OWN_FS_IMAGE = "root.ext4"


def own_filesystem(work: Path, root: Path, size: int) -> str:
    """Give *root* an ext4 filesystem of its own: a sparse image of *size* bytes in *work*,
    loop-mounted (no discard). Removing it is an unmount and one file's deletion, never the
    deletion of an unpacked tree file by file, whose cost (ext4 with discard: up to 11 s of
    system CPU for the next repeat's unpack, docs/run.md) would land in the next cold figure.
    Returns how the root is held; where it cannot be made, the temp dir's filesystem and why."""
    missing = [t for t in ("mkfs.ext4", "mount", "umount") if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:
        why = "not root" if os.geteuid() != 0 else f"no {', '.join(missing)}"
        return f"the temp dir's filesystem (no filesystem of its own: {why})"
    image = work / OWN_FS_IMAGE
    try:
        with image.open("wb") as f:
            f.truncate(size)
        proc.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E",
                  "nodiscard,lazy_itable_init=1,lazy_journal_init=1", str(image)], timeout=120)
        root.mkdir(exist_ok=True)
        proc.run(["mount", "-o", "loop,nodiscard", str(image), str(root)], timeout=60)
    except (OSError, CommandError) as e:
        unmount_under(work)
        image.unlink(missing_ok=True)
        return f"the temp dir's filesystem (no filesystem of its own: {str(e)[:200]})"
    return (f"an ext4 filesystem of its own ({size >> 20} MiB sparse image, loop-mounted), "
            "removed by unmount")


def _mounts_under(work: Path) -> list[str]:
    prefix = str(work).rstrip("/") + "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    points = [line.split()[4].replace("\\040", " ") for line in lines
              if len(line.split()) > 4]
    return sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True)


def unmount_under(work: Path) -> None:
    """Unmount every mount below *work* (deepest first; lazily when busy); the loop device of
    an own filesystem goes with it (mount's autoclear)."""
    for point in _mounts_under(work):
        for args in (["umount", point], ["umount", "-l", point]):
            with contextlib.suppress(CommandError, OSError):
                proc.run(args, timeout=60)
                break


def left_by_killed_runs(parent: Path, prefix: str) -> list[Path]:
    """The dirs under *parent* whose name starts with *prefix* and whose run is gone
    (:func:`_owner_gone`): what a sweep removes (a private containerd's, a private
    registry's)."""
    return [d for d in sorted(parent.glob(prefix + "*"))
            if d.is_dir() and not d.is_symlink() and _owner_gone(d)]


def log_tail(log: Path, lines: int = 3) -> str:
    """The last *lines* of a private instance's log file, on one line ("no log" when it
    cannot be read)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "no log"
    return proc.tail(text, lines, inline=True) or "no output"


def sweep(parent: Path | None = None) -> list[str]:
    """Remove what killed runs left (their owner process is gone): processes, then dirs; one
    message per instance removed."""
    notes = []
    for d in left_by_killed_runs(parent or temp_parent(), PREFIX):
        _remove(d)
        notes.append(f"removed a private containerd left by a killed run: {d}")
    return notes + _sweep_orphan_cgroups(parent or temp_parent())


#: how servelab names the containers it starts in an instance (``node/ctrstart.py``)
CONTAINER_PREFIX = "serve-"


def _sweep_orphan_cgroups(parent: Path) -> list[str]:
    """Containers of an instance whose dir is already gone (swept by a servelab without this
    step, or removed by hand): their cgroups are found by namespace; only namespaces holding
    servelab's own containers (``serve-*``) and no instance dir are touched."""
    notes = []
    names = {d.name for d in CGROUP_ROOT.glob("*/servelab-*") if d.is_dir()}
    for ns in sorted(names):
        safe = ns.removeprefix("servelab-")
        subs = {s.name for d in _cgroup_dirs(ns) if d.is_dir() for s in d.iterdir()
                if s.is_dir()}
        if not subs or not all(n.startswith(CONTAINER_PREFIX) for n in subs):
            continue
        if any(parent.glob(f"{PREFIX}{safe}-*")):
            continue  # a live instance (or one the sweep above could not remove)
        _kill_all(_cgroup_pids(ns))
        remove_cgroups_waiting(ns)
        notes.append(f"removed the containers of a private containerd whose dir was gone: {ns}")
    return notes


# ---------------------------------------------------------------------------- the instance


class PrivateContainerd(Started):
    """One containerd of servelab's own, in a temp dir and a private mount namespace::

        with PrivateContainerd(run_id) as ctd:
            ctd.root_empty()          # True: nothing of any image held
            seconds = ctd.pull(ref, plain_http=True)
    """

    def __init__(self, run_id: str, *, parent: Path | None = None,
                 own_fs_bytes: int | None = None) -> None:
        safe = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")[:40] or "run"
        self.namespace = f"servelab-{safe}"
        room = max(1, min(40, _name_room(parent or temp_parent())))
        self.work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{safe[:room].rstrip('-')}-",
                                          dir=parent))
        self.socket = self.work / "containerd.sock"
        self.root = self.work / "root"
        self._child: subprocess.Popen[str] | None = None
        #: a filesystem of its own for the root, of this many (sparse) bytes; None: the dir's
        self.own_fs_bytes = own_fs_bytes
        #: how the root is held, in words (see :func:`own_filesystem`)
        self.root_fs = "the temp dir's filesystem"

    def start(self) -> None:
        from servelab import cleanup

        (self.work / OWNER_FILE).write_text(json.dumps(
            {"pid": os.getpid(), "owner": cleanup.owner_id()}), encoding="utf-8")
        if self.own_fs_bytes:
            self.root_fs = own_filesystem(self.work, self.root, self.own_fs_bytes)
        cfg = self.work / "config.toml"
        cfg.write_text(self.config(), encoding="utf-8")
        with (self.work / "containerd.log").open("w", encoding="utf-8") as log:
            self._child = proc.start(
                ["unshare", "--mount", "--propagation", "private", "--",
                 *self.launch(cfg)],
                stdin=subprocess.DEVNULL, stdout=log.fileno(), stderr=log.fileno(),
                new_session=True)
        self._wait_ready()

    def config(self) -> str:
        """containerd's config text (a subclass adds a proxy snapshotter)."""
        return config_text(self.work)

    def launch(self, cfg: Path) -> list[str]:
        """What runs inside the private mount namespace; it must end by exec'ing containerd
        (a subclass starts its snapshotter there first)."""
        return ["containerd", "--config", str(cfg)]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._child is None or self._child.poll() is not None:
                break
            if self.socket.exists() and self.ctr("version", check=False,
                                                 timeout=5).returncode == 0:
                return
            time.sleep(0.05)
        raise CapabilityError(f"the private containerd did not start: {self.log_tail()}",
                              hint="run `servelab doctor`; docs/run.md (cold pulls) says "
                              "what it needs")

    def log_tail(self, lines: int = 3) -> str:
        return log_tail(self.work / "containerd.log", lines)

    def ctr(self, *args: str, check: bool = True, timeout: float = 60.0) -> proc.Completed:
        return proc.run(["ctr", "-a", str(self.socket), "-n", self.namespace, *args],
                        check=check, timeout=timeout)

    def root_empty(self) -> bool:
        """No blob in the content store and no snapshot: nothing of any image is held."""
        return not any(_entries(self.root / CONTENT)) and not any(
            _entries(self.root / SNAPSHOTS))

    def blob_mtimes(self) -> dict[str, float]:
        """digest -> when its blob was written to the content store (wall clock)."""
        out = {}
        for name in _entries(self.root / CONTENT):
            with contextlib.suppress(OSError):
                out[f"sha256:{name}"] = (self.root / CONTENT / name).stat().st_mtime
        return out

    @property
    def pid(self) -> int | None:
        """containerd's pid (in the host's pid namespace; its mount namespace is private)."""
        child = self._child
        return child.pid if child is not None and child.poll() is None else None

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) containerd and its waited-for children (``unpigz``) have
        used so far: unlike wall seconds, other jobs on the machine barely change it."""
        if self._child is None:
            return None
        try:
            stat = Path(f"/proc/{self._child.pid}/stat").read_text(encoding="ascii")
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[-1].split()
        ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def pull(self, ref: str, *, plain_http: bool,
             timeout: float = PULL_TIMEOUT_S) -> float:
        """``ctr images pull`` with unpacking; the seconds it took."""
        args = ["images", "pull", "--max-concurrent-downloads", str(MAX_CONCURRENT_DOWNLOADS),
                *(["--plain-http"] if plain_http else []), ref]
        t0 = time.monotonic()
        try:
            self.ctr(*args, timeout=timeout)
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
                child.terminate()
            try:
                child.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _kill_all([child.pid])
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=5)
        _remove(self.work)

    def describe(self) -> dict[str, Any]:
        return {"namespace": self.namespace,
                "max_concurrent_downloads": MAX_CONCURRENT_DOWNLOADS}


def _entries(d: Path) -> Iterator[str]:
    try:
        yield from (p.name for p in d.iterdir())
    except OSError:
        return
