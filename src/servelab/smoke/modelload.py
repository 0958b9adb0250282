"""What the server read to become ready: the model load, in bytes.

API::

    evict_page_cache(paths) -> EvictResult          # before the start: a cold node cache
    read_block_bytes(container_id, pids) -> (bytes, source) | (None, why)
    server_bytes(health_body) -> int | None         # what the server says it read
    ModelLoad(...)                                  # one start's figures, ``to_dict()``

Two sources, both optional, never guessed:

* **the server's own count**: the first health 2xx body, when it is a JSON object with an
  integer ``model_bytes_read`` (top level or under ``model``). A server that wants its load
  counted says so there (the bundled example does); nothing else is assumed.
* **block I/O of the container before ready**: with cgroup v2, ``rbytes`` of the container's
  ``io.stat`` (every device, every process the cgroup ever held); otherwise the sum of
  ``read_bytes`` of ``/proc/<pid>/io`` over the container's processes when ready (cgroup v1's
  ``blkio.throttle`` counters read 0 on recent kernels, and processes that already exited are
  not counted). It counts bytes fetched from a block device: a file served from the page
  cache adds nothing, a sparse file's holes add nothing, a network filesystem adds nothing.
  :func:`evict_page_cache` drops the mounted model's files from the page cache first
  (``fdatasync`` then ``posix_fadvise(DONTNEED)``, per file, nothing global), so that a read
  of the model shows up; the image's own files (baked weights) are not evicted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: where a container's cgroup v2 io.stat lives (systemd and cgroupfs drivers)
IO_STAT = (
    "/sys/fs/cgroup/system.slice/docker-{id}.scope/io.stat",
    "/sys/fs/cgroup/docker/{id}/io.stat",
)
SERVER_KEY = "model_bytes_read"


@dataclass
class EvictResult:
    files: int = 0
    bytes: int = 0
    errors: list[str] = field(default_factory=list)


def evict_page_cache(paths: Iterable[Path]) -> EvictResult:
    """Drop each regular file under *paths* from the page cache (it is written back first)."""
    out = EvictResult()
    for root in paths:
        for f in _files(root):
            try:
                fd = os.open(f, os.O_RDONLY)
            except OSError as e:
                out.errors.append(f"{f}: {e.strerror}")
                continue
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                out.files += 1
                out.bytes += os.fstat(fd).st_size
            except OSError as e:
                out.errors.append(f"{f}: {e.strerror}")
            finally:
                os.close(fd)
    return out


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        found += [Path(dirpath) / n for n in names if (Path(dirpath) / n).is_file()]
    return found


def parse_io_stat(text: str) -> int:
    """Sum of ``rbytes=`` over the devices of a cgroup v2 ``io.stat``."""
    total = 0
    for line in text.splitlines():
        for part in line.split()[1:]:
            key, _, value = part.partition("=")
            if key == "rbytes" and value.isdigit():
                total += int(value)
    return total


def parse_proc_io(text: str) -> int | None:
    """``read_bytes`` of a ``/proc/<pid>/io`` file."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "read_bytes" and value.strip().isdigit():
            return int(value.strip())
    return None


def read_block_bytes(container_id: str, pids: Iterable[int]) -> tuple[int | None, str]:
    """(bytes the container read from block devices so far, how it was measured); (None,
    why) when neither the cgroup v2 counter nor /proc can be read here."""
    for pattern in IO_STAT:
        p = Path(pattern.format(id=container_id))
        try:
            return parse_io_stat(p.read_text()), f"cgroup v2 {p.name} rbytes"
        except OSError:
            continue
    total, seen = 0, 0
    for pid in pids:
        try:
            value = parse_proc_io(Path(f"/proc/{pid}/io").read_text())
        except OSError:
            continue
        if value is not None:
            total += value
            seen += 1
    if seen:
        return total, (f"read_bytes of /proc/<pid>/io over the container's {seen} "
                       "process(es) when ready (exited processes not counted)")
    return None, "no cgroup v2 io.stat and no readable /proc/<pid>/io for the container"


def cgroup_pids(procs_files: Iterable[str]) -> list[int]:
    """The PIDs listed in the first readable of a container's cgroup.procs files."""
    for path in procs_files:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        pids = [int(x) for x in text.split() if x.isdigit()]
        if pids:
            return pids
    return []


def server_bytes(body: bytes | None) -> int | None:
    """``model_bytes_read`` from a health 2xx body (a JSON object), else None."""
    if not body:
        return None
    try:
        doc = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        return None
    for where in (doc, doc.get("model") if isinstance(doc, dict) else None):
        value = where.get(SERVER_KEY) if isinstance(where, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


@dataclass
class ModelLoad:
    """The bytes one start read before it was ready (see the module docstring)."""

    #: the size of the mounted model's files (None without a mounted model)
    model_bytes: int | None = None
    server_bytes: int | None = None
    block_read_bytes: int | None = None
    block_source: str | None = None
    #: "evicted" (the model's files were dropped from the page cache before the start),
    #: "as found", or "not evictable" (a volume servelab cannot read)
    page_cache: str = "as found"
    evicted_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def bytes_read(self) -> int | None:
        """The server's own count when it gives one, else the block I/O."""
        return self.server_bytes if self.server_bytes is not None else self.block_read_bytes

    @property
    def source(self) -> str | None:
        if self.server_bytes is not None:
            return "server"
        return "block-io" if self.block_read_bytes is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"bytes_read": self.bytes_read, "source": self.source,
                "model_bytes": self.model_bytes, "server_bytes": self.server_bytes,
                "block_read_bytes": self.block_read_bytes, "block_source": self.block_source,
                "page_cache": self.page_cache, "evicted_bytes": self.evicted_bytes,
                "notes": list(self.notes)}
