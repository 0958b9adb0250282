"""``servelab calibrate``: how much this runner's figures move on their own, and what the
verdict rule can see here.

It runs the experiment's control *runs* times (one run, the control as its only arm, every
stage as ``run`` does it) and treats the figures as an A/A test: two arms of *repeats* each are
drawn from them (distinct runs when there are at least twice *repeats*, else distinct
within each arm; a fixed seed, :data:`DRAWS` draws), and every draw judged as ``run``
judges (:mod:`servelab.run.intervals`). Per judged metric it reports

* the noise: median, min–max and the median absolute deviation of the runs;
* the threshold later runs use (``run --calibration FILE``): the 95th percentile of the A/A
  shifts, never below the metric's minimum effect, all raised by one factor until no more
  than 5 % of the A/A draws of whole runs would move the verdict (:data:`RUN_FP_TARGET`);
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
    #: the share of A/A draws whose verdict would not be "no detectable change" (any judged
    #: metric read better or worse), with the file's thresholds and without
    verdict_false_positive_rate: float | None = None
    verdict_false_positive_rate_uncalibrated: float | None = None
    #: what every metric's 95th percentile was multiplied by to hold the run-level rate
    threshold_factor: float = 1.0

    def thresholds(self) -> dict[str, float]:
        return {m.key: m.threshold for m in self.metrics}

    def to_dict(self) -> dict[str, Any]:
        return {"schemaVersion": 1, "kind": "servelab-calibration", "repeats": self.repeats,
                "runs": self.runs, "draws": self.draws, "seed": self.seed,
                "method": self.method, "power": POWER, "quantile": QUANTILE,
                "metrics": {m.key: m.to_dict() for m in self.metrics},
                "threshold_factor": self.threshold_factor,
                "verdict_false_positive_rate": self.verdict_false_positive_rate,
                "verdict_false_positive_rate_uncalibrated":
                    self.verdict_false_positive_rate_uncalibrated,
                "not_measured": self.not_measured}


def _split(rng: random.Random, n: int, repeats: int) -> tuple[list[int], list[int]]:
    """Two arms' run indexes: distinct runs when there are enough (a real run never has one
    figure twice); else distinct within each arm; else drawn with replacement."""
    if n >= 2 * repeats:
        idx = rng.sample(range(n), 2 * repeats)
        return idx[:repeats], idx[repeats:]
    if n >= repeats:
        return rng.sample(range(n), repeats), rng.sample(range(n), repeats)
    return ([rng.randrange(n) for _ in range(repeats)],
            [rng.randrange(n) for _ in range(repeats)])


def _pairs(values: Sequence[float], repeats: int, draws: int) -> list[tuple[list[float],
                                                                             list[float]]]:
    rng = random.Random(SEED)  # noqa: S311 - resampling, reproducible by design
    out = []
    for _ in range(draws):
        a, b = _split(rng, len(values), repeats)
        out.append(([values[i] for i in a], [values[i] for i in b]))
    return out


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
                       *, effects: Mapping[str, float], draws: int = DRAWS,
                       threshold: float | None = None) -> MetricCalibration:
    """One metric's calibration from its *values* over the A/A runs (*threshold*: the one the
    run-level rate set, else the metric's own 95th percentile)."""
    med = statistics.median(values)
    thr = noise_threshold(values, repeats, effect, draws) if threshold is None else threshold
    fp, fp_own = false_positive_rates(values, repeats, thr, effect, draws)
    wanted = {k: v for k, v in effects.items() if k in (m.key, m.spec_metric)}
    return MetricCalibration(
        m.key, m.label, m.unit, len(values), med, min(values), max(values),
        statistics.median(abs(v - med) for v in values), thr, fp, fp_own,
        min_detectable(values, repeats, thr, draws),
        {f"{size:g}": repeats_needed(values, size, effect, draws)
         for size in wanted.values()})


def verdict_false_positives(table: dict[str, list[float | None]], repeats: int,
                            thresholds: Mapping[str, float], effects: Mapping[str, float],
                            draws: int = DRAWS) -> tuple[float, float]:
    """The run-level A/A rate: draws of whole runs (every metric of a run together, as a real
    run has them) into two arms; the share whose verdict any metric would move, with the
    calibrated thresholds and with the arms' own spread."""
    n = len(next(iter(table.values()), []))
    rng = random.Random(SEED)  # noqa: S311 - resampling, reproducible by design
    cal = own = 0
    for _ in range(draws):
        a, b = _split(rng, n, repeats)
        hit_cal = hit_own = False
        for key, col in table.items():
            va = [v for v in (col[i] for i in a) if v is not None]
            vb = [v for v in (col[i] for i in b) if v is not None]
            if not va or not vb:
                continue
            hit_cal |= _found(va, vb, thresholds[key]) in ("better", "worse")
            hit_own |= _found(va, vb, _spread_threshold(va, vb, effects[key])) in (
                "better", "worse")
        cal += hit_cal
        own += hit_own
    return cal / draws, own / draws


def calibrate_figures(rows: list[dict[str, Any]], repeats: int,
                      min_effect: Mapping[str, float] | None = None,
                      effects: Mapping[str, float] | None = None,
                      draws: int = DRAWS) -> Calibration:
    """The calibration of the judged metrics from the control's result.json of each run."""
    missing: list[str] = []
    measured = [r for r in rows if any(_number(m.extract(r)) is not None for m in NUMERIC)]
    if len(measured) < len(rows):
        missing.append(f"{len(rows) - len(measured)} of {len(rows)} runs gave no figure "
                       "(their build or start failed): left out")
    if len(measured) < 2 * repeats:
        missing.append(f"{len(measured)} runs are fewer than two arms of {repeats}: the A/A "
                       "arms share runs, which understates the false-positive rates; give "
                       f"--runs {2 * repeats} or more")
    rows = measured
    table: dict[str, list[float | None]] = {}
    floors: dict[str, float] = {}
    base: dict[str, float] = {}
    judged: list[MetricDef] = []
    for m in NUMERIC:
        col = [_number(m.extract(r)) for r in rows]
        values = [v for v in col if v is not None]
        if len(values) < 2:
            missing.append(f"{m.key}: {len(values)} figure(s) of {len(rows)} runs")
            continue
        effect = (min_effect or {}).get(m.key, (min_effect or {}).get(m.spec_metric,
                                                                        m.min_effect))
        table[m.key], floors[m.key] = col, effect
        base[m.key] = noise_threshold(values, repeats, 0.0, draws)  # the noise alone
        judged.append(m)
    factor = _run_level_factor(table, repeats, base, floors, draws)
    thresholds = {k: max(floors[k], v * factor) for k, v in base.items()}
    out = [metric_calibration(m, [v for v in table[m.key] if v is not None], repeats,
                              floors[m.key], effects=effects or {}, draws=draws,
                              threshold=thresholds[m.key]) for m in judged]
    cal = Calibration(repeats, len(rows), out, draws, not_measured=missing)
    cal.threshold_factor = factor
    if table:
        cal.verdict_false_positive_rate, cal.verdict_false_positive_rate_uncalibrated = (
            verdict_false_positives(table, repeats, thresholds, floors, draws))
    return cal


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


#: the run-level A/A false-positive rate the calibrated thresholds hold (a run judges up to
#: nine metrics: each one's own 95th percentile alone would let several in ten A/A runs move)
RUN_FP_TARGET = 0.05


def _run_level_factor(table: dict[str, list[float | None]], repeats: int,
                      base: Mapping[str, float], floors: Mapping[str, float],
                      draws: int) -> float:
    """The smallest factor (from 1, in steps of 1.25×) on every metric's 95th percentile that
    holds the run-level A/A rate at :data:`RUN_FP_TARGET`."""
    factor = 1.0
    for _ in range(16):
        thresholds = {k: max(floors[k], v * factor) for k, v in base.items()}
        if not table or verdict_false_positives(table, repeats, thresholds, floors,
                                                draws)[0] <= RUN_FP_TARGET:
            break
        factor *= 1.25
    return factor


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
