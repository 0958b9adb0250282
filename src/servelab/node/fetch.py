"""The cold fetch: every blob of the image fetched from the registry into an empty directory
(sha256 checked) and each layer unpacked there with ``tar``, in order, download and unpack timed
apart."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from servelab import logs, proc
from servelab.errors import CapabilityError
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node.layers import Blob, ImageLayers
from servelab.node.pull import COLD, LayerPull, PullRecord, short_digest
from servelab.textio import open_output

CHUNK = 1 << 20


def _download(reg: RegistryClient, ref: ImageRef, blob: Blob, dest: Path,
              shown: logs.Progress | None = None) -> None:
    h = hashlib.sha256()
    n = 0
    with reg.open_blob(ref, blob.digest) as r, open_output(dest, what="a fetched layer") as f:
        while chunk := r.read(CHUNK):
            h.update(chunk)
            f.write(chunk)
            n += len(chunk)
            if shown is not None:
                shown.advance(len(chunk))
    if f"sha256:{h.hexdigest()}" != blob.digest or n != blob.size:
        raise CapabilityError(f"the registry served other bytes for {blob.digest} "
                              f"({n} bytes, sha256:{h.hexdigest()[:12]}...)",
                              hint="check the registry's storage")


def _untar(blob: Path, root: Path) -> str | None:
    """Unpack one layer into *root*; the first error line of tar, or None."""
    res = proc.run(["tar", "-x", "-f", str(blob), "-C", str(root), "--no-same-owner",
                    "--delay-directory-restore"], check=False, timeout=3600)
    if res.returncode == 0:
        return None
    return (res.stderr.strip().splitlines() or [f"tar exit code {res.returncode}"])[0][:300]


def fetch_cold(reg: RegistryClient, img: ImageLayers, work: Path) -> PullRecord:
    """Fetch every blob of *img* into *work* (which must be empty) and unpack its layers in
    order: a node with nothing of the image, timed by servelab."""
    ref = ImageRef.parse(img.ref)
    blobs, root = work / "blobs", work / "rootfs"
    blobs.mkdir(parents=True)
    root.mkdir()
    t0, w0 = time.monotonic(), time.time()
    reg.get_manifest(ref)
    _download(reg, ref, img.config, blobs / "config")
    layers: list[LayerPull] = []
    with logs.progress("cold fetch", total=sum(b.size for b in img.layers)) as shown:
        for i, b in enumerate(img.layers):
            shown.step(f"layer {i + 1}/{len(img.layers)} {short_digest(b.digest)}")
            lp = LayerPull(b.digest, b.size, True, started_s=time.monotonic() - t0)
            _download(reg, ref, b, blobs / str(i), shown)
            lp.downloaded_s = time.monotonic() - t0
            layers.append(lp)
    downloaded = time.monotonic() - t0
    notes: list[str] = []
    with logs.progress("cold unpack", total=len(layers), unit="layers") as shown:
        for i, lp in enumerate(layers):
            shown.step(f"layer {i + 1}/{len(layers)} {short_digest(lp.digest)}")
            err = _untar(blobs / str(i), root)
            lp.unpacked_s = time.monotonic() - t0
            shown.advance(1)
            if err:
                notes.append(f"layer {i} ({short_digest(lp.digest)}): tar: {err}")
    total = time.monotonic() - t0
    return PullRecord(COLD, "servelab fetch + tar", img.ref, [], t0, w0, img.manifest.size,
                      img.config.size, layers, downloaded, total - downloaded, total,
                      "tar -x of each layer into one empty directory, after every download",
                      notes)
