"""Real A/A runs and real changes: what the verdict says, run after run.

Issue 34's last two targets, measured as stated, with whole ``servelab run``s (not resampled
from a calibration as ``bench/verdict_aa.py`` does):

* **A/A** (``--aa N``): N runs of the bundled example with the *same* image in both arms (the
  example's treatment, built as both control and treatment from a copy of ``examples/``),
  3 repeats each, interleaved ABBA, with the cold pull on a private containerd. Target: the
  verdict says "no detectable change" (every metric inside its threshold, or inconclusive)
  in at least 9 of 10 runs. From the same runs, the **order effect**: each repeat's pair of
  cold pull-to-ready figures, the one started second against the one started first (ABBA
  puts each arm first half of the time), as a Hodges–Lehmann shift with its exact interval;
  read against the runs' median threshold for that metric, it must not read "worse" or
  "better" (no order effect beyond the threshold).
* **Real change** (``--change N``): N runs of the example itself (the treatment drops 8 MiB
  of baked weights, pins the base, runs as non-root). Target: "improved" in N of N.

Every run's verdict and its judged timing metrics' readings are printed, with the load.

    .venv/bin/python bench/verdict_runs.py [--aa 10] [--change 5] [--repeats 3] [--check]
    .venv/bin/python bench/verdict_runs.py --quick    # 1 A/A run and 1 real run, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import ROOT, machine
from cold_steady import run_once

from servelab.run import intervals
from servelab.run.runner import abba_names

AA_TARGET = 0.9
QUIET = ("no detectable change", "inconclusive")
ORDER_METRICS = ("node_ready_cold", "node_ready_warm_base", "startup")


def aa_spec(tmp: Path) -> Path:
    """A copy of ``examples/`` whose experiment builds the example's treatment in both arms."""
    ex = tmp / "examples"
    shutil.copytree(ROOT / "examples", ex, ignore=shutil.ignore_patterns("servelab-out*"))
    doc = yaml.safe_load((ex / "experiment.yaml").read_text())
    doc["metadata"]["name"] = "aa-example-treatment-twice"
    doc["spec"]["change"] = "none: A/A, the example's treatment in both arms"
    doc["spec"]["control"] = dict(doc["spec"]["treatment"])
    # the copy is no git checkout: the build's timestamps come from the example's last commit
    epoch = subprocess.run(["git", "log", "-1", "--format=%ct", "--", "examples"], cwd=ROOT,
                           capture_output=True, text=True, check=False).stdout.strip()
    doc["spec"].setdefault("build", {})["sourceDateEpoch"] = int(epoch or 1700000000)
    path = ex / "experiment-aa.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def timing_readings(summary: dict[str, Any]) -> str:
    cells = []
    for m in summary["comparison"]["metrics"]:
        if m["unit"] in ("s", "ms"):
            iv = m.get("interval") or {}
            cells.append(f"{m['metric']} {m['reading']} ({iv.get('low', 0):+.3g}.."
                         f"{iv.get('high', 0):+.3g} vs ±{m['threshold']:.3g})")
    return "; ".join(cells)


def order_pairs(summary: dict[str, Any], metric: str) -> list[tuple[float, float]]:
    """(first started, second started) of each repeat's pair of *metric* figures."""
    from servelab.run.aggregate import ALL_METRICS

    get = next(m for m in ALL_METRICS if m.key == metric).extract
    by = {(r["arm"], r["repeat"]): get(r) for r in summary["results"]}
    pairs = []
    for n in range(1, summary["repeats"] + 1):
        first, second = (by.get((a, n)) for a in abba_names(list(summary["arms"]), n))
        if isinstance(first, (int, float)) and isinstance(second, (int, float)):
            pairs.append((float(first), float(second)))
    return pairs


def order_effect(summaries: list[dict[str, Any]]) -> bool:
    """Print the order effect of each timing metric over all A/A runs; whether none reads
    beyond its threshold."""
    ok = True
    for metric in ORDER_METRICS:
        pairs = [p for s in summaries for p in order_pairs(s, metric)]
        thresholds = [m["threshold"] for s in summaries for m in s["comparison"]["metrics"]
                      if m["metric"] == metric]
        if len(pairs) < 2 or not thresholds:
            print(f"order effect {metric}: not measured ({len(pairs)} pairs)")
            continue
        if len(pairs) > intervals.MAX_REPEATS:
            pairs = pairs[:intervals.MAX_REPEATS]
        iv = intervals.shift_interval([a for a, _ in pairs], [b for _, b in pairs])
        thr = statistics.median(thresholds)
        read = intervals.reading(iv, thr)
        ok = ok and read not in ("worse", "better")
        print(f"order effect {metric}: second started minus first {iv.estimate:+.3f} "
              f"({iv.low:+.3f}..{iv.high:+.3f}, {intervals.coverage_label(iv.coverage)}) over "
              f"{len(pairs)} pairs, median threshold ±{thr:.3f}: {read}")
    return ok


def series(label: str, spec: Path, runs: int, repeats: int, tmp: Path) -> list[dict[str, Any]]:
    summaries = []
    for n in range(1, runs + 1):
        out = tmp / f"{label}-{n}"
        load = machine()
        rc, took = run_once(out, repeats, spec=spec)
        if not (out / "summary.json").is_file():
            raise SystemExit(f"{label} {n}: servelab run exited {rc}, no summary ({load})")
        s = json.loads((out / "summary.json").read_text())
        summaries.append(s)
        print(f"{label} {n}: {s['verdict']} (exit {rc}, {took:.0f} s; {load}) "
              f"{timing_readings(s)}", flush=True)
        shutil.rmtree(out, ignore_errors=True)
    return summaries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aa", type=int, default=10, help="A/A runs (default 10)")
    ap.add_argument("--change", type=int, default=5, help="runs of the real change (default 5)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1 A/A run, 1 real run, 1 repeat")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    aa_n, change_n, repeats = (1, 1, 1) if a.quick else (a.aa, a.change, a.repeats)
    met = True
    with tempfile.TemporaryDirectory(prefix="servelab-bench-verdicts-") as t:
        tmp = Path(t)
        if aa_n:
            aa = series("A/A", aa_spec(tmp), aa_n, repeats, tmp)
            quiet = sum(s["verdict"] in QUIET for s in aa)
            need = -(-aa_n * AA_TARGET // 1)
            print(f"A/A: {quiet} of {aa_n} run(s) said no detectable change "
                  f"(target >= {need:.0f})")
            order_ok = order_effect(aa)
            met = met and quiet >= need and order_ok
        if change_n:
            real = series("change", ROOT / "examples" / "experiment.yaml", change_n, repeats,
                          tmp)
            improved = sum(s["verdict"] == "improved" for s in real)
            print(f"real change: improved in {improved} of {change_n} run(s) "
                  f"(target {change_n} of {change_n})")
            met = met and improved == change_n
    print(f"targets {'met' if met else 'NOT met'}")
    return 1 if a.check and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
