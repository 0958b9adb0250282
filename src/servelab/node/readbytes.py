"""Bytes read before ready, for a full pull: of the files a cold pull unpacked, how many bytes
the server had read by the time it was ready.

In a separate, untimed start (after the timed one, in the same private containerd): the
unpacked snapshots' files are dropped from the page cache (``fdatasync`` +
``POSIX_FADV_DONTNEED``, :func:`servelab.smoke.modelload.evict_page_cache`), the server is
started again (:func:`~servelab.node.ctrstart.start_in`), and at its first health 2xx the pages
of those files that are resident again are counted (``mmap`` + ``mincore(2)``): what the start
read. Reported with the top directories of the image's tree, and against the bytes pulled
("pulled 66 MB; 9.1 MB (14%) read before ready").

The snapshots are plain directories under the instance's root (``io.containerd.snapshotter.
v1.overlayfs/snapshots/<n>/fs``): overlayfs reads the lower layers' own inodes, so their page
cache is what the container read. Symlinks are never followed (an absolute link in a layer
would name a host file). A file hidden under a mount (the control's baked ``/models`` under
the model mount) shows as unpacked, not read. Other snapshotters (lazy: FUSE-backed) are "not
measured" here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.errors import ServelabError
from servelab.node.containerd import SNAPSHOTS

if TYPE_CHECKING:
    from servelab.cleanup import Cleanup
    from servelab.node.containerd import PrivateContainerd
    from servelab.node.ctrstart import CtrStart, CtrStartSpec

TOP_DIRS = 5
#: the depth of a "top directory" (``usr/lib``, ``app``)
TOP_DEPTH = 2
PROT_READ = 0x1
MAP_SHARED = 0x01


@dataclass
class ReadBeforeReady:
    """What the untimed start read of the unpacked image before it was ready."""

    measured: bool
    bytes_pulled: int
    unpacked_bytes: int = 0
    unpacked_files: int = 0
    read_bytes: int = 0
    files_read: int = 0
    #: (directory in the image, bytes read), the largest first
    top_dirs: list[tuple[str, int]] = field(default_factory=list)
    evicted_bytes: int = 0
    outcome: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def share(self) -> float | None:
        """Read before ready as a share of the bytes pulled."""
        return self.read_bytes / self.bytes_pulled if self.measured and self.bytes_pulled else None

    def line(self) -> str:
        """"pulled 66.6 MB; 9.1 MB (14%) read before ready", or why not measured."""
        if not self.measured:
            return "bytes read before ready: " + ("; ".join(self.notes) or "not measured")
        pct = f" ({self.share:.0%})" if self.share is not None else ""
        return (f"pulled {_mb(self.bytes_pulled)}; {_mb(self.read_bytes)}{pct} read before "
                "ready")

    def to_dict(self) -> dict[str, Any]:
        return {"measured": self.measured, "bytes_pulled": self.bytes_pulled,
                "unpacked_bytes": self.unpacked_bytes, "unpacked_files": self.unpacked_files,
                "read_bytes": self.read_bytes, "files_read": self.files_read,
                "share_of_pulled": round(self.share, 4) if self.share is not None else None,
                "top_dirs": [{"dir": d, "bytes": n} for d, n in self.top_dirs],
                "evicted_bytes": self.evicted_bytes, "start_outcome": self.outcome,
                "line": self.line(), "notes": list(self.notes)}


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


# ---------------------------------------------------------------------------- the files


def snapshot_roots(pc: PrivateContainerd) -> list[Path]:
    """The ``fs`` dirs of every snapshot the instance holds (after a pull: the image's
    unpacked layers)."""
    base = pc.root / SNAPSHOTS
    try:
        return sorted(d / "fs" for d in base.iterdir() if (d / "fs").is_dir())
    except OSError:
        return []


def regular_files(roots: list[Path]) -> list[tuple[Path, str, int]]:
    """(path, path inside the image, size) of every regular file under *roots*; symlinks are
    never followed."""
    out = []
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):  # os.walk does not follow links
            for n in names:
                p = Path(dirpath) / n
                try:
                    st = p.lstat()
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    out.append((p, str(p.relative_to(root)), st.st_size))
    return out


def _libc() -> Any:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def resident_bytes(path: Path, size: int, libc: Any) -> int:
    """Bytes of *path* (of *size*) in the page cache now (``mincore(2)``); 0 when unknown."""
    if size <= 0:
        return 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return 0
        try:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                return 0
            n = sum(1 for b in bytes(vec) if b & 1)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return min(n * mmap.PAGESIZE, size)


def count_resident(files: list[tuple[Path, str, int]]) -> tuple[int, int, Counter[str]]:
    """(bytes resident, files with any, bytes per top directory) over *files*."""
    libc = _libc()
    total, nfiles, per_dir = 0, 0, Counter[str]()
    for path, rel, size in files:
        n = resident_bytes(path, size, libc)
        if n:
            total += n
            nfiles += 1
            parts = rel.split("/")[:-1][:TOP_DEPTH]
            per_dir["/" + "/".join(parts)] += n
    return total, nfiles, per_dir


# ---------------------------------------------------------------------------- the start


def read_before_ready(pc: PrivateContainerd, ref: str, spec: CtrStartSpec, *,
                      bytes_pulled: int, cleanup: Cleanup, timeout_s: float,
                      snapshotter: str = "overlayfs") -> ReadBeforeReady:
    """Evict the unpacked image, start it again (untimed), count what it read by ready."""
    from servelab.node.ctrstart import start_in
    from servelab.smoke.modelload import evict_page_cache

    out = ReadBeforeReady(False, bytes_pulled)
    if snapshotter != "overlayfs":
        out.notes.append(f"not measured: the {snapshotter} snapshotter's files are not plain "
                         "directories here")
        return out
    files = regular_files(snapshot_roots(pc))
    if not files:
        out.notes.append(f"not measured: no unpacked snapshot found under {pc.root / SNAPSHOTS}")
        return out
    out.unpacked_files, out.unpacked_bytes = len(files), sum(f[2] for f in files)
    ev = evict_page_cache([f[0] for f in files])
    out.evicted_bytes = ev.bytes
    out.notes += [f"not evicted: {e}" for e in ev.errors[:3]]
    counted: list[tuple[int, int, Counter[str]]] = []

    def at_ready(_rec: CtrStart) -> None:
        counted.append(count_resident(files))

    try:
        rec = start_in(pc, ref, spec, snapshotter=snapshotter, cleanup=cleanup,
                       timeout_s=timeout_s, on_ready=at_ready)
    except ServelabError as e:
        out.notes.append(f"not measured: the untimed start failed: {e.message}")
        return out
    out.outcome = rec.outcome
    if not counted:
        out.notes.append(f"not measured: the untimed start was not ready ({rec.outcome})")
        return out
    out.read_bytes, out.files_read, per_dir = counted[0]
    out.top_dirs = per_dir.most_common(TOP_DIRS)
    out.measured = True
    return out
