"""``servelab calibrate``: how much this runner's figures move on their own, and what the
verdict rule can see here.

It runs the experiment's control *runs* times (one run, the control as its only arm, every
stage as ``run`` does it) and treats the figures as an A/A test: two arms of *repeats* each are
drawn from them with replacement (a fixed seed, :data:`DRAWS` draws), and every draw judged as
``run`` judges (:mod:`servelab.run.intervals`). Per judged metric it reports

* the noise: median, min–max and the median absolute deviation of the runs;
* the threshold later runs use (``run --calibration FILE``): the 95th percentile of the A/A
  shifts, never below the metric's minimum effect;
* the false-positive rate of the verdict rule with that threshold, and without the file (the
  threshold from the arms' own spread);
* the minimum detectable effect at *repeats*: the smallest shift found "worse" in 80 % of the
  draws;
* for each asked effect, the repeats needed to find it in 80 % of the draws (up to
  :data:`MAX_REPEATS`).

The core returns a :class:`Calibration`; the command writes it (``calibration.json``, its
schema in ``schemas/calibration.schema.json``).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servelab.run import intervals
from servelab.run.aggregate import NUMERIC, MetricDef

if TYPE_CHECKING:
    from servelab.run.options import Progress, RunOptions
    from servelab.run.runner import RunResult
    from servelab.spec import Experiment

#: A/A draws a figure is computed from, and the seed that makes them the same on every run
DRAWS = 200
SEED = 20261203
#: the share of draws a detectable effect must be found in
POWER = 0.8
#: the share of A/A shifts the calibrated threshold lies above
QUANTILE = 0.95
#: the most repeats an arm "repeats needed" looks at
MAX_REPEATS = 20


@dataclass
class MetricCalibration:
    key: str
    label: str
    unit: str
    runs: int
    median: float
    min: float
    max: float
    mad: float
    threshold: float
    false_positive_rate: float
    false_positive_rate_uncalibrated: float
    min_detectable_effect: float | None
    repeats_needed: dict[str, int | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Calibration:
    repeats: int
    runs: int
    metrics: list[MetricCalibration]
    draws: int = DRAWS
    seed: int = SEED
    method: str = intervals.METHOD
    not_measured: list[str] = field(default_factory=list)

    def thresholds(self) -> dict[str, float]:
        return {m.key: m.threshold for m in self.metrics}

    def to_dict(self) -> dict[str, Any]:
        return {"schemaVersion": 1, "kind": "servelab-calibration", "repeats": self.repeats,
                "runs": self.runs, "draws": self.draws, "seed": self.seed,
                "method": self.method, "power": POWER, "quantile": QUANTILE,
                "metrics": {m.key: m.to_dict() for m in self.metrics},
                "not_measured": self.not_measured}


def _draw(rng: random.Random, values: Sequence[float], n: int) -> list[float]:
    return [values[rng.randrange(len(values))] for _ in range(n)]


def _pairs(values: Sequence[float], repeats: int, draws: int) -> list[tuple[list[float],
                                                                             list[float]]]:
    rng = random.Random(SEED)  # noqa: S311 - resampling, reproducible by design
    return [(_draw(rng, values, repeats), _draw(rng, values, repeats)) for _ in range(draws)]


def _spread_threshold(a: Sequence[float], b: Sequence[float], effect: float) -> float:
    """The threshold ``run`` uses without a calibration file."""
    return max(effect, (max(max(a) - min(a), max(b) - min(b))) / 2)


def _found(a: Sequence[float], b: Sequence[float], threshold: float) -> str:
    return intervals.reading(intervals.shift_interval(list(a), list(b)), threshold)


def noise_threshold(values: Sequence[float], repeats: int, effect: float,
                    draws: int = DRAWS) -> float:
    """The 95th percentile of the A/A shifts at *repeats*, never below *effect*."""
    shifts = sorted(abs(intervals.shift_interval(a, b).estimate)
                    for a, b in _pairs(values, repeats, draws))
    at = shifts[min(len(shifts) - 1, int(QUANTILE * len(shifts)))]
    return max(effect, at)


def power(values: Sequence[float], repeats: int, shift: float, threshold: float,
          draws: int = DRAWS) -> float:
    """The share of draws, *shift* added to one arm, that read "worse"."""
    hits = sum(_found(a, [x + shift for x in b], threshold) == "worse"
               for a, b in _pairs(values, repeats, draws))
    return hits / draws


def min_detectable(values: Sequence[float], repeats: int, threshold: float,
                   draws: int = DRAWS) -> float | None:
    """The smallest shift found in :data:`POWER` of the draws (bisection), None if none is
    (one repeat an arm: a timing has no interval)."""
    if max(values) == min(values):
        return threshold  # no noise: any shift beyond the threshold is found every time
    scale = max(threshold, max(values) - min(values))
    high = threshold + 4 * scale
    if power(values, repeats, high, threshold, draws) < POWER:
        return None
    low = threshold
    for _ in range(18):
        mid = (low + high) / 2
        if power(values, repeats, mid, threshold, draws) >= POWER:
            high = mid
        else:
            low = mid
    return high


def repeats_needed(values: Sequence[float], effect_size: float, effect: float,
                   draws: int = DRAWS) -> int | None:
    """The fewest repeats an arm at which a shift of *effect_size* is found in :data:`POWER`
    of the draws, with the threshold calibrated at those repeats; None beyond MAX_REPEATS."""
    for n in range(2, MAX_REPEATS + 1):
        thr = noise_threshold(values, n, effect, draws)
        if effect_size > thr and power(values, n, effect_size, thr, draws) >= POWER:
            return n
    return None


def false_positive_rates(values: Sequence[float], repeats: int, threshold: float,
                         effect: float, draws: int = DRAWS) -> tuple[float, float]:
    """(with the calibrated threshold, with the arms' own spread): the share of A/A draws
    the verdict rule reads as a change."""
    pairs = _pairs(values, repeats, draws)
    cal = sum(_found(a, b, threshold) in ("better", "worse") for a, b in pairs)
    own = sum(_found(a, b, _spread_threshold(a, b, effect)) in ("better", "worse")
              for a, b in pairs)
    return cal / draws, own / draws


def metric_calibration(m: MetricDef, values: Sequence[float], repeats: int, effect: float,
                       *, effects: Mapping[str, float],
                       draws: int = DRAWS) -> MetricCalibration:
    """One metric's calibration from its *values* over the A/A runs."""
    med = statistics.median(values)
    thr = noise_threshold(values, repeats, effect, draws)
    fp, fp_own = false_positive_rates(values, repeats, thr, effect, draws)
    wanted = {k: v for k, v in effects.items() if k in (m.key, m.spec_metric)}
    return MetricCalibration(
        m.key, m.label, m.unit, len(values), med, min(values), max(values),
        statistics.median(abs(v - med) for v in values), thr, fp, fp_own,
        min_detectable(values, repeats, thr, draws),
        {f"{size:g}": repeats_needed(values, size, effect, draws)
         for size in wanted.values()})


def calibrate_figures(rows: list[dict[str, Any]], repeats: int,
                      min_effect: Mapping[str, float] | None = None,
                      effects: Mapping[str, float] | None = None,
                      draws: int = DRAWS) -> Calibration:
    """The calibration of the judged metrics from the control's result.json of each run."""
    out: list[MetricCalibration] = []
    missing: list[str] = []
    for m in NUMERIC:
        values = [float(v) for v in (m.extract(r) for r in rows)
                  if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(values) < 2:
            missing.append(f"{m.key}: {len(values)} figure(s) of {len(rows)} runs")
            continue
        effect = (min_effect or {}).get(m.key, (min_effect or {}).get(m.spec_metric,
                                                                        m.min_effect))
        out.append(metric_calibration(m, values, repeats, effect, effects=effects or {},
                                      draws=draws))
    return Calibration(repeats, len(rows), out, draws, not_measured=missing)


def calibrate(exp: Experiment, opts: RunOptions, runs: int, repeats: int, *,
              effects: Mapping[str, float] | None = None,
              progress: Progress | None = None) -> tuple[Calibration, RunResult]:
    """Run the control of *exp* *runs* times (the A/A runs, written under ``OUT/aa``) and
    calibrate from them. Returns the calibration and the run's result."""
    from servelab.errors import InputError
    from servelab.run.runner import run_experiment

    if exp.control is None:
        raise InputError("calibrate runs the control against itself: the experiment has no "
                         "control arm", file=str(exp.file),
                         hint="add spec.control (the image as it is today)")
    aa = replace(exp, treatment=replace(exp.control, name="treatment"), control=None,
                 repeats=runs, change="A/A calibration: the control against itself")
    result = run_experiment(aa, replace(opts, out_dir=Path(opts.out_dir) / "aa", repeats=runs),
                            progress)
    rows = [r for r in result.summary.get("results", []) if r.get("arm") == "treatment"]
    return calibrate_figures(rows, repeats, exp.gates.min_effect, effects), result
