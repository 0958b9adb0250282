#!/usr/bin/env python3
"""servelab's own share of a `servelab run` on the bundled example (target: <= 5 %).

Runs the whole experiment once (3 repeats, as the example says) in a child Python that calls
``servelab.cli.main`` and then reports ``os.times()``: the child's *own* CPU time (user + sys,
excluding its children: docker buildx, docker load, trivy, the prober) is the time servelab
itself worked; everything else of the wall time was spent waiting on tools and containers.
Prints both figures and the ratio, measured in this one run.

    python bench/run_overhead.py [--repeats N] [--check]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

CHILD = """
import json, os, sys, time
from servelab.cli import main
t0 = time.monotonic()
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
    args = ap.parse_args()
    import trivydb

    with tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp:
        cache = Path(tmp) / "trivy"
        trivydb.write_db(cache, trivydb.FIXTURE_ADVISORIES)
        cmd = [sys.executable, "-c", CHILD, "run", str(ROOT / "examples" / "experiment.yaml"),
               "--out", str(Path(tmp) / "out"), "--repeats", str(args.repeats), "--offline",
               "--trivy-cache-dir", str(cache)]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        total = time.monotonic() - t0
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("BENCH ")), None)
    if line is None:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 2
    m = json.loads(line[6:])
    share = m["own_cpu"] / m["wall"]
    print(f"servelab run, {args.repeats} repeats x 2 arms, exit {m['rc']}")
    print(f"wall time               {m['wall']:8.2f} s  (process incl. start-up {total:.2f} s)")
    print(f"servelab's own CPU time {m['own_cpu']:8.2f} s")
    print(f"children's CPU time     {m['children_cpu']:8.2f} s  (buildx, load, trivy, prober)")
    print(f"servelab's own share    {share:8.1%}  (target <= 5%)")
    return 1 if args.check and share > 0.05 else 0


if __name__ == "__main__":
    sys.exit(main())
