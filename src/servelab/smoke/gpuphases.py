"""GPU phases of one start, and one servelab run per GPU at a time.

API::

    keys = lock_keys(res.gpu["host"], count="all")      # GPU UUIDs (else indices) it gets
    with gpu_lock(keys, timeout_s=3600) as lock: ...     # flock per GPU; lock.to_dict()
    phases(python_probe)            # {"torch_import_s", "cuda_init_s", "first_kernel_s"}
    freed(after_ready, after_cleanup)  # per GPU: MiB in use when ready, after cleanup, freed

The in-container probe (:mod:`servelab.gpu.torch_probe`, run after ready in a fresh process)
times ``import torch``, CUDA's initialisation up to a first allocation (the context), and the
first kernel (a small matmul): what a server pays for CUDA before and apart from reading its
weights, which the model load's bytes and the time to ready measure.

The lock: on a self-hosted runner several jobs can share a GPU machine; a start that measures
a GPU must not share its GPUs with another. Each GPU the container gets is locked with
``flock(2)`` on ``<dir>/servelab-gpu-<uuid or index>.lock`` (``<dir>``:
``$SERVELAB_GPU_LOCK_DIR``, else ``/run/lock`` when writable, else the temp directory), in
sorted order (no deadlock between runs asking for several), held from before the start until
the GPU memory after cleanup is read. A run waits for the lock up to its timeout and records
how long it waited. The kernel drops a lock when its process dies: nothing to clean up.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.errors import CapabilityError

POLL_S = 0.2


def lock_dir() -> Path:
    env = os.environ.get("SERVELAB_GPU_LOCK_DIR")
    if env:
        return Path(env)
    run_lock = Path("/run/lock")
    if run_lock.is_dir() and os.access(run_lock, os.W_OK):
        return run_lock
    return Path(tempfile.gettempdir())


def lock_keys(host: dict[str, Any] | None, count: int | str) -> list[str]:
    """The GPUs a container with *count* GPUs gets, named by UUID (else index)."""
    gpus = [g for g in (host or {}).get("gpus") or [] if isinstance(g, dict)]
    gpus.sort(key=lambda g: int(g.get("index") or 0))
    if count != "all":
        gpus = gpus[:int(count)]
    return [str(g.get("uuid") or f"index-{g.get('index', i)}") for i, g in enumerate(gpus)]


@dataclass
class GpuLock:
    keys: list[str]
    paths: list[str]
    waited_s: float = 0.0
    _fds: list[int] = field(default_factory=list)

    def release(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the descriptor drops the flock
        self._fds = []

    def to_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "paths": list(self.paths),
                "waited_s": round(self.waited_s, 3)}


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:100]


def _take(path: Path, deadline: float) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise CapabilityError(
                    f"the GPU lock {path} is held by another run (waited too long)",
                    hint="wait for the other servelab run on this GPU, or raise "
                    "gpu lock timeout") from None
            time.sleep(POLL_S)


@contextlib.contextmanager
def gpu_lock(keys: list[str], *, timeout_s: float, directory: Path | None = None
             ) -> Iterator[GpuLock]:
    """Hold an exclusive flock per GPU in *keys* (sorted) for the ``with`` block."""
    where = directory or lock_dir()
    paths = [where / f"servelab-gpu-{_safe(k)}.lock" for k in sorted(set(keys))]
    lock = GpuLock(sorted(set(keys)), [str(p) for p in paths])
    t0 = time.monotonic()
    try:
        where.mkdir(parents=True, exist_ok=True)
        for p in paths:
            lock._fds.append(_take(p, t0 + timeout_s))
    except OSError as e:
        lock.release()
        raise CapabilityError(f"cannot take the GPU lock in {where}: {e}",
                              hint="set SERVELAB_GPU_LOCK_DIR to a writable directory") from e
    except BaseException:
        lock.release()
        raise
    lock.waited_s = time.monotonic() - t0
    try:
        yield lock
    finally:
        lock.release()


def phases(probe: dict[str, Any] | None) -> dict[str, float | None]:
    """The probe's timings: import torch, CUDA init to a context, first kernel (device 0)."""
    torch = (probe or {}).get("torch") or {}
    devices = torch.get("devices") or [{}]
    first = (devices[0] or {}).get("matmul") or {}
    return {"torch_import_s": torch.get("import_s"), "cuda_init_s": torch.get("cuda_init_s"),
            "first_kernel_s": first.get("seconds") if first.get("ok") else None}


def freed(after_ready: list[dict[str, Any]] | None,
          after_cleanup: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Per GPU index: MiB in use when ready, after cleanup, and the difference (None when
    either is unknown)."""
    ready = {r.get("index"): r.get("memory_used_mib") for r in after_ready or []}
    out = []
    for r in after_cleanup or []:
        idx, left = r.get("index"), r.get("memory_used_mib")
        was = ready.get(idx)
        out.append({"index": idx, "after_ready_mib": was, "after_cleanup_mib": left,
                    "freed_mib": was - left if was is not None and left is not None else None})
    return out


@dataclass(frozen=True)
class GpuPhases:
    """One start's GPU figures (``metrics.gpu`` of result.json)."""

    torch_import_s: float | None
    cuda_init_s: float | None
    first_kernel_s: float | None
    memory: list[dict[str, Any]]
    lock_waited_s: float | None

    @classmethod
    def from_gpu(cls, gpu: dict[str, Any] | None) -> GpuPhases | None:
        """From the smoke result's ``gpu`` (None when the start had no GPU checks)."""
        inside = (gpu or {}).get("inside")
        if not gpu or not inside:
            return None
        ph = inside.get("phases") or phases(inside.get("python_probe"))
        mem = inside.get("memory_freed") or freed(inside.get("memory_used"), None) or [
            {"index": r.get("index"), "after_ready_mib": r.get("memory_used_mib"),
             "after_cleanup_mib": None, "freed_mib": None}
            for r in inside.get("memory_used") or []]
        return cls(ph.get("torch_import_s"), ph.get("cuda_init_s"), ph.get("first_kernel_s"),
                   mem, (gpu.get("lock") or {}).get("waited_s"))

    def to_dict(self) -> dict[str, Any]:
        return {"torch_import_s": self.torch_import_s, "cuda_init_s": self.cuda_init_s,
                "first_kernel_s": self.first_kernel_s, "memory": list(self.memory),
                "lock_waited_s": self.lock_waited_s}
