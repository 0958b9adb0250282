"""The cold pull through a private containerd (:mod:`servelab.node.containerd`), and the check
that it really was cold.

Per repeat (:func:`containerd_cold_pull`):

* a fresh instance: its root must be empty (checked and recorded);
* ``sync``, then the registry's blob files of the image are evicted from the page cache
  (``posix_fadvise(DONTNEED)``) when its data directory is known (``--registry-data``); a
  global ``drop_caches`` only when asked for (``--drop-caches``: every other job on the
  machine pays for it);
* the pull, timed from the call to its return; each layer's download end is its blob's write
  time in the content store, the unpack is what follows the last download;
* the registry's access log, when known (``--registry-log``), must show every blob of the
  image served in full (a 200 of its size) during the pull: else the figure is not cold, and
  the record says why.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.errors import InputError
from servelab.image.ref import DIGEST_PATTERN, ImageRef
from servelab.image.registry import scheme_for
from servelab.node.containerd import MAX_CONCURRENT_DOWNLOADS, PrivateContainerd
from servelab.node.layers import ImageLayers
from servelab.node.pull import COLD, LayerPull, PullRecord

METHOD = "containerd pull (private instance)"
#: the most of the registry's log read after one pull (the lines it wrote meanwhile)
MAX_LOG_BYTES = 64 << 20
LOG_WAIT_S = 2.0
_ACCESS = re.compile(rf'"GET /v2/(?P<repo>\S+)/blobs/(?P<digest>{DIGEST_PATTERN}) '
                     r'HTTP/[0-9.]+" (?P<status>[0-9]{3}) (?P<bytes>[0-9]+|-)')


@dataclass
class ColdSettings:
    """What a cold pull may use: the registry's data dir and access log (optional), and the
    global page-cache drop (opt-in)."""

    registry_data: Path | None = None
    registry_log: Path | None = None
    drop_caches: bool = False

    def __post_init__(self) -> None:
        if self.registry_data is not None:
            blobs = self.registry_data / "docker" / "registry" / "v2" / "blobs"
            if not blobs.is_dir():
                raise InputError(f"--registry-data {self.registry_data}: no registry blobs "
                                 f"there ({blobs} is not a directory)",
                                 hint="give the registry's storage rootdirectory (the "
                                 "`filesystem: rootdirectory:` of its config.yml)")
        if self.drop_caches and os.geteuid() != 0:
            raise InputError("--drop-caches needs root: it writes /proc/sys/vm/drop_caches",
                             hint="run as root, or leave --drop-caches out (sync and the "
                             "registry's blob files evicted still run)")
        if self.registry_log is not None and not self.registry_log.is_file():
            raise InputError(f"--registry-log {self.registry_log}: not a regular file",
                             hint="give the file the registry writes its access log to")


@dataclass
class ColdCheck:
    """Was a cold pull really cold? ``blobs_served_in_full`` is None when not checked."""

    root_empty: bool
    blobs_served_in_full: bool | None
    page_cache: str
    detail: list[str] = field(default_factory=list)
    #: the machine's 1-minute load average just before the pull (other jobs' CPU and disk
    #: work shows here: what a steady figure needs, and a noisy one is explained by)
    load_1m: float | None = None
    #: how the instance's root was held (:func:`servelab.node.containerd.own_filesystem`)
    root_fs: str | None = None

    @property
    def cold(self) -> bool:
        return self.root_empty and self.blobs_served_in_full is not False

    def to_dict(self) -> dict[str, Any]:
        return {"cold": self.cold, "root_empty": self.root_empty,
                "blobs_served_in_full": self.blobs_served_in_full,
                "page_cache": self.page_cache, "detail": list(self.detail),
                "load_1m": self.load_1m,
                **({"root_fs": self.root_fs} if self.root_fs else {})}


# ---------------------------------------------------------------------------- page cache


def blob_file(data_dir: Path, digest: str) -> Path:
    """Where the distribution registry keeps a blob under its storage root."""
    algo, _, hexd = digest.partition(":")
    return data_dir / "docker" / "registry" / "v2" / "blobs" / algo / hexd[:2] / hexd / "data"


def evict_registry_blobs(data_dir: Path, digests: list[str]) -> int:
    """Drop the registry's blob files of *digests* from the page cache; how many were."""
    done = 0
    for d in digests:
        try:
            fd = os.open(blob_file(data_dir, d), os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            done += 1
        finally:
            os.close(fd)
    return done


def drop_caches() -> None:
    """The global page-cache drop (every other job on the machine pays for it: opt-in). Only
    the page cache (``1``): that is what makes writing the unpacked files cost twice the CPU
    after the previous repeat's tree was deleted (docs/run.md); dentries and inodes stay."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n", encoding="ascii")


def prepare_cache(settings: ColdSettings, digests: list[str]) -> str:
    """``sync``, then evict what *settings* allow; what was done, in words."""
    os.sync()
    done = ["sync"]
    if settings.registry_data is not None:
        n = evict_registry_blobs(settings.registry_data, digests)
        done.append(f"the registry's blob files evicted ({n} of {len(digests)})")
    if settings.drop_caches:
        drop_caches()
        done.append("global drop_caches")
    if len(done) == 1:
        done.append("registry blobs not evicted (no --registry-data)")
    return "; ".join(done)


# ---------------------------------------------------------------------------- access log


def log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def read_log_from(path: Path, offset: int) -> str:
    """What the registry appended to its log after *offset* (at most MAX_LOG_BYTES)."""
    with path.open("rb") as f:
        f.seek(offset)
        return f.read(MAX_LOG_BYTES).decode("utf-8", errors="replace")


def served_in_full(log_text: str, repo: str, sizes: dict[str, int]) -> tuple[bool, list[str]]:
    """Did the registry's access log (*log_text*) serve, for repository *repo*, every blob of
    *sizes* (digest -> size) with a 200 of that many bytes? What fell short."""
    served: dict[str, int] = {}
    for m in _ACCESS.finditer(log_text):
        if m.group("repo") == repo and m.group("status") == "200" and m.group("bytes") != "-":
            d = m.group("digest")
            served[d] = max(served.get(d, 0), int(m.group("bytes")))
    missing = [f"{d[:19]}: " + (f"{served[d]} of {n} bytes served" if d in served
                                else "not fetched from the registry")
               for d, n in sizes.items() if served.get(d) != n]
    return not missing, missing


def check_log(settings: ColdSettings, offset: int, img: ImageLayers
              ) -> tuple[bool | None, list[str]]:
    """Whether the registry served every blob of *img* in full since *offset*: None with why
    when it cannot be told."""
    if settings.registry_log is None:
        return None, ["the registry's access log was not checked (no --registry-log)"]
    ref = ImageRef.parse(img.ref)
    sizes = {b.digest: b.size for b in (img.config, *img.layers)}
    deadline = time.monotonic() + LOG_WAIT_S
    while True:  # the registry writes a request's line when it ends: give it a moment
        try:
            text = read_log_from(settings.registry_log, offset)
        except OSError as e:
            return None, [f"the registry's access log could not be read: {e}"]
        ok, missing = served_in_full(text, ref.repository, sizes)
        if ok or time.monotonic() > deadline:
            return ok, missing
        time.sleep(0.1)


# ---------------------------------------------------------------------------- the pull


def containerd_cold_pull(img: ImageLayers, settings: ColdSettings, run_id: str,
                         cleanup: Any, *,
                         then: Callable[[PrivateContainerd], None] | None = None
                         ) -> PullRecord:
    """One cold pull of *img* through a fresh private containerd, checked; everything of the
    instance is gone when this returns or raises (and at the run's cleanup).

    *then* is called with the instance after the pull and its check, before the instance
    stops: the start from it (:func:`servelab.node.ctrstart.start_in`)."""
    ctd = PrivateContainerd(run_id, own_fs_bytes=own_fs_size(img))
    cleanup.callback(ctd.stop, f"private containerd {ctd.work}")
    with ctd:
        empty = ctd.root_empty()
        cache = prepare_cache(settings, [b.digest for b in (img.config, *img.layers)])
        offset = log_size(settings.registry_log)
        load = _load_1m()
        plain = scheme_for(ImageRef.parse(img.ref).registry) == "http"
        t0, w0, cpu0 = time.monotonic(), time.time(), ctd.cpu_seconds()
        total = ctd.pull(img.ref, plain_http=plain)
        cpu1 = ctd.cpu_seconds()
        written = ctd.blob_mtimes()
        served, detail = check_log(settings, offset, img)
        if then is not None:
            then(ctd)
    check = ColdCheck(empty, served, cache, detail, load, ctd.root_fs)
    if not empty:
        check.detail.insert(0, "the instance's root held content before the pull")
    rec = _record(img, t0=t0, w0=w0, total=total, written=written, check=check)
    if cpu0 is not None and cpu1 is not None:
        rec.runtime_cpu_s = round(cpu1 - cpu0, 3)
    return rec


#: the own filesystem of a cold pull's root: the image's bytes this many times over (unpacked
#: layers and the content store), never less than OWN_FS_MIN; sparse: it costs what is written
OWN_FS_FACTOR = 8
OWN_FS_MIN = 4 << 30
OWN_FS_MAX = 1 << 40


def own_fs_size(img: ImageLayers) -> int:
    """The size of the sparse image the cold pull's root is held in."""
    return min(OWN_FS_MAX, max(OWN_FS_MIN, OWN_FS_FACTOR * img.total_bytes))


def _load_1m() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _record(img: ImageLayers, *, t0: float, w0: float, total: float,
            written: dict[str, float], check: ColdCheck) -> PullRecord:
    layers = []
    for b in img.layers:
        at = written.get(b.digest)
        done = min(max(at - w0, 0.0), total) if at is not None else None
        layers.append(LayerPull(b.digest, b.size, True, downloaded_s=done))
    ends = [x.downloaded_s for x in layers if x.downloaded_s is not None]
    download = max(ends) if len(ends) == len(layers) and ends else total
    basis = ("containerd unpacks each layer as soon as it is downloaded: the unpack is the "
             "time after the last layer's blob was written to the content store until the "
             "pull returned" if len(ends) == len(layers) and ends else
             "the layers' write times were not found: the whole pull counts as pull")
    rec = PullRecord(COLD, METHOD, img.ref, [], t0, w0, img.manifest.size, img.config.size,
                     layers, download, max(0.0, total - download), total, basis)
    rec.check = check.to_dict()
    rec.max_concurrent_downloads = MAX_CONCURRENT_DOWNLOADS
    return rec
