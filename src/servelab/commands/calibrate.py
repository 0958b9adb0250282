"""Measure this runner's noise: run the experiment's control against itself (A/A) and write
a calibration file that later runs use for their thresholds (``run --calibration FILE``).

Runs the control ``--runs`` times (OUT/aa/ holds that run's artifacts) and writes
OUT/calibration.json: per judged metric the noise (median, min–max, median absolute
deviation), the threshold, the verdict rule's false-positive rate with and without the file,
the minimum detectable effect at ``--repeats`` and, for each ``--effect``, the repeats needed.
Keep the file per runner class (a workflow caches it, see workflows-examples/calibrate.yml).

Exit codes: 0 written, 2 bad input, 3 a missing tool, engine or capability.
"""

from __future__ import annotations

import argparse
from typing import Any


def _effect(text: str) -> tuple[str, float]:
    """``startup=0.5``: a metric (or spec metric) and the effect whose repeats are wanted."""
    from servelab.commands._common import finite_float

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give METRIC=VALUE, e.g. startup=0.5")
    return key.strip(), finite_float(value)


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import ascii_int
    from servelab.commands.run import add_run_options

    add_run_options(parser)
    parser.set_defaults(out="servelab-calibration")
    parser.add_argument("--runs", type=ascii_int, default=10, metavar="N",
                        help="how many times the control runs (default: 10; 2 to 50)")
    parser.add_argument("--effect", type=_effect, action="append", default=[],
                        metavar="METRIC=VALUE",
                        help="an effect whose repeats needed are wanted (repeatable), e.g. "
                        "startup=0.5 or node_ready_cold=1.0 (seconds, bytes: the metric's unit)")


def run(args: argparse.Namespace) -> int:
    import json
    import os
    import platform
    from datetime import UTC, datetime

    from servelab.commands.run import experiment_and_options, progress
    from servelab.errors import UsageError
    from servelab.run.calfile import CALIBRATION_FILE
    from servelab.run.calibrate import calibrate
    from servelab.textio import write_file

    if not 2 <= args.runs <= 50:
        raise UsageError("--runs must be between 2 and 50")
    exp, opts = experiment_and_options(args)
    repeats = args.repeats or exp.repeats
    cal, result = calibrate(exp, opts, args.runs, repeats, effects=dict(args.effect),
                            progress=progress)
    doc = cal.to_dict()
    doc["created_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    doc["runner"] = {"machine": platform.node(), "os": platform.platform(),
                     "environment": os.environ.get("RUNNER_ENVIRONMENT"),
                     "runner_os": os.environ.get("RUNNER_OS")}
    doc["experiment"] = {"name": exp.name, "file": str(exp.file), "control": exp.control.name
                         if exp.control else None}
    path = opts.out_dir / CALIBRATION_FILE
    write_file(path, json.dumps(doc, indent=2) + "\n", what="calibration.json")
    print(render(doc, path))
    return 0 if result.exit_code in (0, 1) else result.exit_code


def render(doc: dict[str, Any], path: object) -> str:
    """The calibration as a person reads it: one line a metric."""
    from servelab.run.aggregate import fmt

    metrics: dict[str, Any] = doc["metrics"]
    out = [f"servelab calibrate: {doc['runs']} runs of the control, figures for "
           f"{doc['repeats']} repeats an arm ({doc['method']})"]
    for m in metrics.values():
        mde = m["min_detectable_effect"]
        fp, fp0 = m["false_positive_rate"], m["false_positive_rate_uncalibrated"]
        out.append(f"  {m['label']}: {fmt(m['median'], m['unit'])} ({fmt(m['min'], m['unit'])}"
                   f"–{fmt(m['max'], m['unit'])}), threshold {fmt(m['threshold'], m['unit'])}, "
                   f"false positives {fp:.0%} (without the file {fp0:.0%}), detects "
                   + ("any change" if mde == 0 else f"≥ {fmt(mde, m['unit'])}"
                      if mde is not None else "nothing at these repeats")
                   + "".join(f"; {k}: {n or '> 20'} repeats"
                             for k, n in m["repeats_needed"].items()))
    vfp, vfp0 = (doc.get("verdict_false_positive_rate"),
                 doc.get("verdict_false_positive_rate_uncalibrated"))
    if vfp is not None and vfp0 is not None:
        out.append(f"  A/A verdicts other than 'no detectable change': {vfp:.0%} of the draws "
                   f"(without the file {vfp0:.0%})")
    for why in doc.get("not_measured") or []:
        out.append(f"  not measured: {why}")
    out.append(f"written: {path} (use it: servelab run --calibration {path})")
    return "\n".join(out)
