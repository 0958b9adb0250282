"""Full against lazy pulling on this machine, side by side, for one image.

For each round, the same image (by default the example's base, copied into a repository of the
bench's own so that its SOCI index is the bench's alone) is pulled twice on a fresh node:

* **full**: a private containerd pulls and unpacks it (overlayfs), then a harness start runs
  the image's Python and imports modules (``--import``) with ``ctr run``;
* **lazy**: a private containerd with soci-snapshotter-grpc pulls it with ``soci image rpull``
  (the index discovered on the TLS registry), then the same harness start, with the snapshotter
  ``soci``: the modules' files are fetched on demand.

Printed per round and as medians: pull seconds, pull + harness start seconds, bytes fetched
(full: the image; lazy: the registry's access log) and bytes read lazily (the snapshotter's
``synchronous_bytes_served``). The harness start is a Python import, not the image's server:
servelab's own start on the lazy node comes with the private containerd's start.

Needs root, FUSE, soci-snapshotter, and the TLS registry of scripts/bootstrap.sh (127.0.0.1:5443
over the same storage as 127.0.0.1:5000, its CA and access log under /var/tmp/servelab-setup).

    .venv/bin/python bench/lazy_pull.py [--image REF@sha256:...] [--import torch] [--rounds 3]
    .venv/bin/python bench/lazy_pull.py --quick     # the base, one round: does it run?
"""

from __future__ import annotations

import argparse
import math
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import base_image, machine, short_tmpdir

SETUP = Path("/var/tmp/servelab-setup")
TLS_REGISTRY = "127.0.0.1:5443"
DEFAULT_IMPORT = "json,email.mime.multipart,http.client,sqlite3"


def harness(pc: Any, ref: str, snapshotter: str, modules: str, name: str) -> float:
    """Seconds of a ``ctr run`` of the image's Python importing *modules*."""
    from servelab import proc

    code = f"import {modules}; print('imported')"
    t0 = time.monotonic()
    out = proc.run(["nsenter", "-t", str(pc.pid), "-m", "--", "ctr", "-a", str(pc.socket),
                    "-n", pc.namespace, "run", "--snapshotter", snapshotter, "--runc-root",
                    str(pc.work / "runc"), "--fifo-dir", str(pc.work / "fifo"), "--rm", ref,
                    name, "python3", "-c", code], timeout=900)
    if out.stdout.strip() != "imported":
        raise SystemExit(f"the harness start printed {out.stdout.strip()!r}")
    return time.monotonic() - t0


def full_round(img: Any, modules: str, cu: Any) -> dict[str, float]:
    from servelab.node.containerd import PrivateContainerd

    pc = PrivateContainerd(f"bench-full-{secrets.token_hex(3)}")
    cu.callback(pc.stop, f"private containerd {pc.work}")
    with pc:
        pull = pc.pull(img.ref, plain_http=True)
        start = harness(pc, img.ref, "overlayfs", modules, "bench-full")
    return {"pull_s": pull, "to_ready_s": pull + start, "fetched": float(img.total_bytes),
            "read": float("nan")}


def lazy_round(img: Any, index: Any, registry: Any, modules: str, cu: Any
               ) -> dict[str, float]:
    from servelab.node.lazypull import account_bytes, lazy_pull

    with lazy_pull(img, registry, index, f"bench-lazy-{secrets.token_hex(3)}", cu) as (pc, rec):
        if not rec.lazy or rec.pull_s is None:
            raise SystemExit(f"the lazy pull was not lazy: {rec.notes}")
        start = harness(pc, rec.ref, "soci", modules, "bench-lazy")
        account_bytes(pc, rec, img)
    fetched = (rec.bytes_fetched or {}).get("total", 0)
    read = (rec.bytes_read or {}).get("synchronous_bytes_served", 0)
    return {"pull_s": rec.pull_s, "to_ready_s": rec.pull_s + start, "fetched": float(fetched),
            "read": float(read)}


def _mb(n: float) -> str:
    return "-" if math.isnan(n) else f"{n / 1e6:,.1f} MB"


def show(label: str, r: dict[str, float]) -> None:
    print(f"  {label:5} pull {r['pull_s']:7.2f} s   pull+start {r['to_ready_s']:7.2f} s   "
          f"fetched {_mb(r['fetched']):>12}   read lazily {_mb(r['read']):>12}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", help="image on 127.0.0.1:5000 (default: the example's base)")
    ap.add_argument("--import", dest="modules", default=DEFAULT_IMPORT,
                    help=f"modules the harness start imports (default: {DEFAULT_IMPORT})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round (does it run?)")
    args = ap.parse_args()
    from servelab.cleanup import Cleanup
    from servelab.image.ref import ImageRef
    from servelab.image.registry import RegistryClient
    from servelab.node import read_layers
    from servelab.node.lazypull import build_index
    from servelab.node.soci import LazyRegistry, lazy_unavailable

    tempfile.tempdir = short_tmpdir() or tempfile.tempdir  # the instances' dirs go there
    why = lazy_unavailable()
    if why is not None:
        raise SystemExit(f"lazy pulling cannot run here: {why}")
    registry = LazyRegistry(TLS_REGISTRY, SETUP / "tls" / "ca.pem", SETUP / "registry-tls.log",
                            SETUP / "registry-data")
    modules = args.modules.replace(" ", "")
    rounds = 1 if args.quick else max(1, args.rounds)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from lazyimages import copy_image  # the lazy tests' copy: blobs mounted, manifest put

    ref = copy_image(args.image or base_image(), f"servelab-bench/lazy-{secrets.token_hex(4)}")
    img = read_layers(RegistryClient(), ImageRef.parse(ref))
    print(f"image {ref}: {len(img.layers)} layers, {_mb(img.total_bytes)}; {machine()}")
    results: dict[str, list[dict[str, float]]] = {"full": [], "lazy": []}
    try:
        with Cleanup(f"bench-lazy-{secrets.token_hex(3)}") as cu:
            index = build_index(img, registry, cu.run_id, cu)
            print(f"SOCI index {index.digest[:19]}: {len(index.ztocs)} of {len(img.layers)} "
                  f"layers indexed (min {index.min_layer_size} bytes), built in "
                  f"{index.build_s:.1f} s")
            for n in range(rounds):
                print(f"round {n + 1}:")
                for label, run in (("full", lambda: full_round(img, modules, cu)),
                                   ("lazy", lambda: lazy_round(img, index, registry, modules,
                                                               cu))):
                    results[label].append(run())
                    show(label, results[label][-1])
    finally:
        RegistryClient().delete_manifest(ImageRef.parse(ref))
    print(f"medians of {rounds} round(s) (harness start: python3 -c 'import {modules}'):")
    for label, rows in results.items():
        show(label, {k: statistics.median(r[k] for r in rows) for k in rows[0]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
