"""The verdict rule's A/A false-positive rate and its power on a known change, measured.

Runs ``servelab calibrate`` on the bundled example (the control against itself, ``--runs``
runs; or reads the runs of an earlier one with ``--from DIR``), then, from those runs:

* **A/A**: the share of draws of two disjoint arms of ``--repeats`` runs whose verdict would
  move (any judged metric read better or worse), with the calibration's thresholds and with
  the arms' own spread (no file). Issue 34's target: "no detectable change" (or inconclusive)
  in at least 9 A/A runs of 10, so at most 10 %.
* **Power on a known change**: the same draws with a known shift added to one arm's figures:
  each judged timing metric's shift of +50 % of its median and of its calibrated minimum
  detectable effect, and the example's real change in bytes (the control's 8 MiB of baked
  weights, minus). Printed: the share of draws read "worse" (or "better" for the bytes).

    .venv/bin/python bench/verdict_aa.py [--runs 10] [--repeats 3] [--from DIR]
    .venv/bin/python bench/verdict_aa.py --big         # the same on the ~1 GB bench image
    .venv/bin/python bench/verdict_aa.py --quick       # 2 runs of 1 repeat: does it run?
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import ROOT, machine, servelab_env
from node_starts import big_experiment

from servelab.run import intervals
from servelab.run.aggregate import NUMERIC
from servelab.run.calibrate import DRAWS, SEED, calibrate_figures

SETUP = Path("/var/tmp/servelab-setup")
REGISTRY = "127.0.0.1:5000"
TARGET = 0.10
WEIGHTS = 8 << 20


def calibrate(spec: Path, out: Path, runs: int, repeats: int, cold: bool) -> int:
    argv = [sys.executable, "-m", "servelab", "calibrate", str(spec), "--out", str(out),
            "--runs", str(runs), "--repeats", str(repeats), "--stages", "build,smoke",
            "--effect", "startup=0.5", "--effect", "node_ready_cold=2"]
    if cold:
        argv += ["--cold-start-registry", REGISTRY, "--registry-data",
                 str(SETUP / "registry-data"), "--registry-log", str(SETUP / "registry.log")]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=7200,
                          env=servelab_env())
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
    return proc.returncode


def runs_of(out: Path) -> list[dict[str, Any]]:
    summary = json.loads((out / "aa" / "summary.json").read_text())
    return [r for r in summary["results"] if r.get("arm") == "treatment"]


def power(values: list[float], repeats: int, shift: float, threshold: float) -> float:
    """The share of draws of disjoint arms (or arms of distinct runs) read "worse" with
    *shift* added to one arm."""
    rng = random.Random(SEED)  # noqa: S311 - resampling, reproducible by design
    n, hits = len(values), 0
    for _ in range(DRAWS):
        if n >= 2 * repeats:
            idx = rng.sample(range(n), 2 * repeats)
            a, b = idx[:repeats], idx[repeats:]
        else:
            a, b = rng.sample(range(n), min(n, repeats)), rng.sample(range(n), min(n, repeats))
        iv = intervals.shift_interval([values[i] for i in a], [values[i] + shift for i in b])
        hits += intervals.reading(iv, threshold) == ("better" if shift < 0 else "worse")
    return hits / DRAWS


def report(rows: list[dict[str, Any]], repeats: int) -> bool:
    cal = calibrate_figures(rows, repeats)
    vfp, vfp0 = cal.verdict_false_positive_rate, cal.verdict_false_positive_rate_uncalibrated
    print(f"{len(rows)} runs of the control, arms of {repeats}, {DRAWS} draws")
    for why in cal.not_measured:
        print(f"  not measured: {why}")
    print(f"A/A: the verdict moved in {vfp:.0%} of the draws with the file's thresholds, "
          f"{vfp0:.0%} without (target <= {TARGET:.0%})")
    by_key = {m.key: m for m in NUMERIC}
    for m in cal.metrics:
        values = [float(v) for v in (by_key[m.key].extract(r) for r in rows)
                  if isinstance(v, (int, float))]
        if m.unit == "bytes":
            p = power(values, repeats, -WEIGHTS, m.threshold)
            print(f"  {m.label}: known change -8 MiB found in {p:.0%} of the draws")
            continue
        if m.unit in ("findings",) or len(values) < 2:
            continue
        half = power(values, repeats, 0.5 * m.median, m.threshold)
        mde = (power(values, repeats, m.min_detectable_effect, m.threshold)
               if m.min_detectable_effect else None)
        print(f"  {m.label}: A/A {m.false_positive_rate:.0%} (without the file "
              f"{m.false_positive_rate_uncalibrated:.0%}); +50% of the median found in "
              f"{half:.0%}" + (f", +{m.min_detectable_effect:.3g} (its detectable effect) in "
                               f"{mde:.0%}" if mde is not None else ""))
    return vfp is not None and vfp0 is not None and vfp <= TARGET and vfp0 <= TARGET


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--from", dest="source", type=Path,
                    help="the --out of an earlier servelab calibrate (its aa/summary.json)")
    ap.add_argument("--big", action="store_true",
                    help="calibrate on the ~1 GB bench image (bench/node_starts.py's) instead "
                         "of the example")
    ap.add_argument("--keep-out", type=Path, metavar="DIR",
                    help="write the calibration there (kept) instead of a temp dir")
    ap.add_argument("--quick", action="store_true", help="2 runs of 1 repeat, no cold pull")
    args = ap.parse_args()
    print(machine(), flush=True)
    if args.source is not None:
        return 0 if report(runs_of(args.source), args.repeats) else 1
    runs, repeats = (2, 1) if args.quick else (args.runs, args.repeats)
    with tempfile.TemporaryDirectory(prefix="servelab-bench-aa-") as tmp:
        out = args.keep_out or Path(tmp) / "cal"
        spec = (big_experiment(Path(tmp) / "big") if args.big
                else ROOT / "examples" / "experiment.yaml")
        rc = calibrate(spec, out, runs, repeats, cold=not args.quick)
        if rc != 0:
            print(f"servelab calibrate exited {rc}")
            return rc
        met = report(runs_of(out), repeats)
    return 0 if met or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
