#!/usr/bin/env python3
"""servelab's own share of a `servelab run` on the bundled example (target: <= 5 %).

Runs the whole experiment once (3 repeats, as the example says) in a child Python that calls
``servelab.cli.main`` and then reports ``os.times()``: the child's *own* CPU time (user + sys,
excluding its children: docker buildx, docker load, trivy, the prober) is the time servelab
itself worked; everything else of the wall time was spent waiting on tools and containers.
Prints both figures and the ratio, measured in this one run, and how much of servelab's
CPU was the registry shaping (``export.cpu_s`` of the builds: the gzip compression of the
layers the builds made, which BuildKit's exporter did before, inside the engine, where this
bench does not see it). servelab's caches start empty (a temporary SERVELAB_CACHE_DIR).

``--big`` runs the same experiment on a big image instead: both arms get the installed CPU
PyTorch tree (about 750 MB, one layer; see bench/big_image.py for where it comes from) copied
in after the base, so the image is about 0.9 GB and both arms share that layer, as two
versions of one serving image do. ``--quick`` runs one repeat of the small example and does
not judge the figure (CI runs it to check the script works).

    python bench/run_overhead.py [--repeats N] [--check] [--big] [--quick] [--profile F]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
BIG_MARK = "servelab-bench-big"  # as in benchlib: the big layer's path names it

CHILD = """
import json, os, sys, time
from servelab.cli import main
t0 = time.monotonic()
if os.environ.get("SERVELAB_BENCH_PROFILE"):
    import cProfile
    prof = cProfile.Profile()
    rc = prof.runcall(main, sys.argv[1:])
    prof.dump_stats(os.environ["SERVELAB_BENCH_PROFILE"])
else:
    rc = main(sys.argv[1:])
wall = time.monotonic() - t0
t = os.times()
sys.stderr.write("BENCH " + json.dumps({"rc": rc, "wall": wall, "own_cpu": t.user + t.system,
                 "children_cpu": t.children_user + t.children_system}) + "\\n")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3,
                    help="repeats (default: 3, the example's own)")
    ap.add_argument("--check", action="store_true", help="exit 1 when the share is over 5 %%")
    ap.add_argument("--big", action="store_true",
                    help="the example with a 750 MB PyTorch layer in both arms (0.9 GB image)")
    ap.add_argument("--profile", metavar="FILE", type=Path,
                    help="also write cProfile statistics of servelab's main thread to FILE "
                         "(slows the run: read where the time goes, not the share)")
    ap.add_argument("--quick", action="store_true",
                    help="one repeat of the small example, no verdict: checks the script")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.check, args.big = 1, False, False
    import trivydb

    with tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp:
        cache = Path(tmp) / "trivy"
        trivydb.write_db(cache, trivydb.FIXTURE_ADVISORIES)
        spec = big_experiment(Path(tmp)) if args.big else ROOT / "examples" / "experiment.yaml"
        cmd = [sys.executable, "-c", CHILD, "run", str(spec),
               "--out", str(Path(tmp) / "out"), "--repeats", str(args.repeats), "--offline",
               "--trivy-cache-dir", str(cache)]
        # servelab's caches (layer sizes, baked-weights listings) start empty: a cold run
        env = dict(os.environ, SERVELAB_CACHE_DIR=str(Path(tmp) / "servelab-cache"))
        if args.profile:
            env["SERVELAB_BENCH_PROFILE"] = str(args.profile.resolve())
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        total = time.monotonic() - t0
        shaping = sum(json.loads(p.read_text()).get("export", {}).get("cpu_s", 0.0)
                      for p in (Path(tmp) / "out").glob("*/repeat-*/build.json"))
        if args.big:
            from benchlib import prune_build_cache

            prune_build_cache(BIG_MARK)
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("BENCH ")), None)
    if line is None:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 2
    m = json.loads(line[6:])
    share = m["own_cpu"] / m["wall"]
    what = "the big image (0.9 GB)" if args.big else "the example"
    print(f"servelab run of {what}, {args.repeats} repeats x 2 arms, exit {m['rc']}")
    print(f"wall time               {m['wall']:8.2f} s  (process incl. start-up {total:.2f} s)")
    print(f"servelab's own CPU time {m['own_cpu']:8.2f} s")
    print(f"children's CPU time     {m['children_cpu']:8.2f} s  (buildx, load, trivy, prober)")
    print(f"servelab's own share    {share:8.1%}  (target <= 5%)")
    print(f"  of which the registry shaping (gzip of the layers the builds made, once per "
          f"distinct image; BuildKit's work before): {shaping:.2f} s CPU; the rest "
          f"{(m['own_cpu'] - shaping) / m['wall']:.1%}")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[1]:.1f} over the last "
          "5 min (a busy machine stretches the wall time and lowers the share)")
    verdict = [ln for ln in proc.stdout.splitlines() if ln.strip()][-3:]
    print("the run said: " + " | ".join(x.strip() for x in verdict))
    if args.quick:
        return 0 if m["rc"] in (0, 1) else 2
    return 1 if args.check and share > 0.05 else 0


def big_experiment(tmp: Path) -> Path:
    """The example's experiment in *tmp*, a PyTorch tree copied into both arms' images."""
    from big_image import material

    ctx = tmp / "big"
    shutil.copytree(ROOT / "examples", ctx, ignore=shutil.ignore_patterns("*.safetensors"))
    torch = material(False, tmp)
    try:
        shutil.copytree(torch, ctx / "torch", copy_function=os.link)  # cheap: hard links
    except OSError:
        shutil.rmtree(ctx / "torch", ignore_errors=True)
        shutil.copytree(torch, ctx / "torch")
    for name in ("Dockerfile", "Dockerfile.control"):
        lines = (ctx / name).read_text().splitlines()
        at = next(i for i, x in enumerate(lines) if x.startswith("FROM ")) + 1
        lines[at:at] = [f"COPY torch/ /opt/{BIG_MARK}/torch/"]
        (ctx / name).write_text("\n".join(lines) + "\n")
    spec = ctx / "experiment.yaml"
    text = spec.read_text().replace("  repeats: 3\n",
                                    "  repeats: 3\n  build: {sourceDateEpoch: 1700000000}\n")
    spec.write_text(text)
    return spec


if __name__ == "__main__":
    sys.exit(main())
