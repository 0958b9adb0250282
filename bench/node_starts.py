"""Full against lazy starts of the real server, as ``servelab run`` measures them, side by side
for both images: the bundled example (about 67 MB compressed) and a ~1 GB one (the example's
server on the base plus a CPU PyTorch tree, the one tests/run/test_run_big_image.py builds).

For each image, one ``servelab run --stages build,smoke --lazy soci`` with the cold-start
registry of scripts/bootstrap.sh (127.0.0.1:5000) and its TLS twin for the lazy pulls
(127.0.0.1:5443); per arm, the medians over ``--repeats``:

* full: cold pull + unpack through a fresh private containerd, then the hardened start from it
  to ready (``to_ready_s.cold``); bytes pulled (the image) and bytes the server read of the
  unpacked image before ready (an untimed second start, ``read_before_ready``);
* lazy: ``soci image rpull`` in a fresh private containerd with soci-snapshotter-grpc, then the
  same start (``to_ready_s.lazy``); bytes fetched from the registry (its access log) and read
  on demand before ready (the snapshotter's ``synchronous_bytes_served``).

Bytes pulled and fetched are compressed; bytes read are file bytes. Needs root, FUSE,
soci-snapshotter, the two registries, and for the big image the torch tree set-up unpacks.

    .venv/bin/python bench/node_starts.py [--repeats 1] [--only example|big]
    .venv/bin/python bench/node_starts.py --quick     # the example, one repeat: does it run?
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import ROOT, base_image, machine, servelab_env

SETUP = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup"))
REGISTRY = os.environ.get("SERVELAB_REGISTRY", "127.0.0.1:5000")
TLS_REGISTRY = "127.0.0.1:5443"


def big_experiment(tmp: Path) -> Path:
    """The ~1 GB experiment of the big-image test, written under *tmp*."""
    sys.path[:0] = [str(ROOT / "tests" / "run"), str(ROOT / "tests")]
    from test_run_big_image import TORCH, _experiment

    if not (TORCH / ".servelab-torch").is_file():
        raise SystemExit(f"no CPU torch tree at {TORCH}: scripts/bootstrap.sh unpacks one")
    tmp.mkdir(parents=True, exist_ok=True)
    return _experiment(tmp, base_image())


def run(experiment: Path, out: Path, repeats: int) -> None:
    argv = [sys.executable, "-m", "servelab", "run", str(experiment), "--out", str(out),
            "--repeats", str(repeats), "--stages", "build,smoke",
            "--cold-start-registry", REGISTRY, "--registry-data", str(SETUP / "registry-data"),
            "--registry-log", str(SETUP / "registry.log"), "--lazy", "soci", "--require-lazy",
            "--lazy-registry", TLS_REGISTRY, "--registry-ca", str(SETUP / "tls" / "ca.pem"),
            "--lazy-registry-log", str(SETUP / "registry-tls.log"), "--format", "json"]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600,
                          env=servelab_env())
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"servelab run exited {proc.returncode}")


def figures(cs: dict[str, Any]) -> dict[str, float | None]:
    """One repeat's full and lazy figures from ``metrics.coldstart``."""
    lazy = cs.get("lazy") or {}
    rb = cs.get("read_before_ready") or {}
    ok = lazy.get("lazy") is True
    return {
        "full_ready_s": (cs.get("to_ready_s") or {}).get("cold"),
        "lazy_ready_s": (cs.get("to_ready_s") or {}).get("lazy") if ok else None,
        "pulled": cs.get("image_bytes"),
        "full_read": rb.get("read_bytes") if rb.get("measured") else None,
        "lazy_fetched": (lazy.get("bytes_fetched") or {}).get("total") if ok else None,
        "lazy_read": (lazy.get("bytes_read") or {}).get("synchronous_bytes_served")
        if ok else None,
    }


def medians(out: Path, arm: str) -> dict[str, float | None]:
    rows = [figures(json.loads((d / "result.json").read_text())["metrics"]["coldstart"])
            for d in sorted((out / arm).glob("repeat-*"))]
    keys = rows[0] if rows else {}
    return {k: (statistics.median(v) if (v := [r[k] for r in rows if r[k] is not None])
                else None) for k in keys}


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def _mb(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e6:,.1f} MB"


def show(image: str, arm: str, m: dict[str, float | None]) -> None:
    speed = (f"{m['full_ready_s'] / m['lazy_ready_s']:.1f}x"
             if m["full_ready_s"] and m["lazy_ready_s"] else "-")
    print(f"{image:7} {arm:9} | full: pull->ready {_s(m['full_ready_s']):>9}, pulled "
          f"{_mb(m['pulled']):>10}, read before ready {_mb(m['full_read']):>9} | lazy: "
          f"pull->ready {_s(m['lazy_ready_s']):>9}, fetched {_mb(m['lazy_fetched']):>10}, "
          f"read before ready {_mb(m['lazy_read']):>9} | full/lazy {speed}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--only", choices=["example", "big"])
    ap.add_argument("--quick", action="store_true", help="the example, one repeat")
    a = ap.parse_args()
    images = ["example"] if a.quick else ([a.only] if a.only else ["example", "big"])
    repeats = 1 if a.quick else max(1, a.repeats)
    print(f"{machine()}; {repeats} repeat(s) per arm, medians")
    with tempfile.TemporaryDirectory(prefix="servelab-bench-node-") as tmp:
        for image in images:
            exp = (ROOT / "examples" / "experiment.yaml" if image == "example"
                   else big_experiment(Path(tmp) / "big"))
            out = Path(tmp) / f"out-{image}"
            t0 = time.monotonic()
            run(exp, out, repeats)
            for arm in ("control", "treatment"):
                show(image, arm, medians(out, arm))
            print(f"{image}: servelab run took {time.monotonic() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
