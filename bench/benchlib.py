"""Helpers shared by the benches: the local base image, machine load, disk sampling, and
removing the build cache a bench made."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parent.parent
#: in the path a big bench copies its layer to, so its build-cache records can be found
BIG_MARK = "servelab-bench-big"


def base_image() -> str:
    """The example's base image (name@sha256) that scripts/bootstrap.sh pushed locally."""
    path = ROOT / "examples" / "build-args.env"
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.startswith("BASE_IMAGE="):
                return line.split("=", 1)[1].strip()
    raise SystemExit("no BASE_IMAGE in examples/build-args.env: run scripts/bootstrap.sh")


def short_tmpdir() -> str | None:
    """A temp dir short enough for the private containerds' unix sockets, where the current
    one is too long for them (the quick test's per-test dir), else None."""
    import tempfile

    return "/tmp" if len(tempfile.gettempdir()) > 40 else None


def servelab_env() -> dict[str, str]:
    """The environment for a ``servelab run`` a bench starts: its own, with a short TMPDIR
    where the current one is too long for the private containerds' sockets."""
    short = short_tmpdir()
    return dict(os.environ, **({"TMPDIR": short} if short else {}))


def machine() -> str:
    """CPUs and load average, printed with every figure (the machine may be shared)."""
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.1f} (1 min) {five:.1f} (5 min)"


class DiskPeak:
    """Samples the used bytes of the file systems holding *paths* while the block runs;
    ``peak`` is the largest growth over the start (other processes' writes count too)."""

    def __init__(self, paths: list[Path], every_s: float = 0.2) -> None:
        self.paths = [p for p in paths if p.exists()]
        self.every_s = every_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-disk", daemon=True)
        self._start: dict[int, int] = {}

    def _used(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for p in self.paths:
            out.setdefault(p.stat().st_dev, shutil.disk_usage(p).used)
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self._used()
            self.peak = max(self.peak, sum(now[d] - self._start.get(d, now[d]) for d in now))
            self._stop.wait(self.every_s)

    def __enter__(self) -> DiskPeak:
        self._start = self._used()
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()



ENGINE = ("dockerd", "containerd")


def engine_cpu() -> float | None:
    """CPU seconds used so far by the engine's processes on this machine (dockerd, with the
    BuildKit it embeds, and containerd), or None when they are not here (a remote engine).
    Other users of the engine count too."""
    total, found = 0, False
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().strip() not in ENGINE:
                continue
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
        found = True
    return total / os.sysconf("SC_CLK_TCK") if found else None


def prune_build_cache(mark: str) -> int:
    """Remove the engine's build-cache records whose step names *mark* (a bench's own COPY:
    each no-cache build leaves one as large as the layer), and the records of the later steps
    built on them (a record with children is not removed). Returns how many were removed."""
    from servelab import proc

    res = proc.run(["docker", "buildx", "du", "--verbose"], check=False, timeout=300)
    parent: dict[str, str] = {}
    marked: list[str] = []
    current = ""
    for line in res.stdout.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "ID":
            current = value
        elif key in ("Parent", "Parents") and current:
            parent[current] = value.split(",")[0].strip()
        elif key == "Description" and mark in value and current:
            marked.append(current)
    order: list[str] = []  # children before their parents
    todo = list(marked)
    while todo:
        rid = todo.pop()
        if rid not in order:
            order.insert(0, rid)
            todo.extend(c for c, p in parent.items() if p == rid)
    for rid in order:  # one at a time: buildx's filter takes no spaces, so no description
        proc.run(["docker", "buildx", "prune", "-f", "--filter", f"id={rid}"], check=False,
                 timeout=300)
    return len(order)
