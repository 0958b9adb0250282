"""The interval on a metric's difference between two arms, and its reading against a threshold.

Method: the Hodges–Lehmann shift (the median of every treatment − control difference) with its
exact Mann–Whitney interval. With *m* and *n* repeats the pairwise differences sorted
``D(1) ≤ … ≤ D(mn)`` give the interval ``[D(k), D(mn+1−k)]``, whose coverage for a pure shift
of continuous figures is exactly ``1 − 2·P(U ≤ k−1)`` (U the Mann–Whitney statistic under no
change, counted exactly, not approximated). *k* is the largest that reaches 95 %; with few
repeats no *k* does, and the interval is the widest one (every difference), whose coverage is
stated: 3 against 3 repeats give 90 %, 2 against 2 give 67 %.

The reading: ``worse`` or ``better`` only when the whole interval lies beyond the threshold;
``no detectable change`` when the whole interval lies within it; otherwise ``inconclusive`` (the
interval spans the threshold), and a verdict never rests on that metric. The smallest change a
run could have detected is the threshold plus the interval's larger half-width: a shift that
size moves this run's interval clear of the threshold.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

METHOD = "Hodges–Lehmann shift with its exact Mann–Whitney interval"
#: the coverage aimed at; fewer repeats than reach it get the widest interval, its coverage stated
TARGET = 0.95
#: below this coverage a timing's interval cannot carry a reading (1 repeat an arm: 0 %)
MIN_COVERAGE = 0.6
#: the repeats an arm may have (the spec's maximum); the exact count is a table of C(m+n, m)
MAX_REPEATS = 100

READINGS = ("better", "worse", "no detectable change", "inconclusive")


@dataclass(frozen=True)
class Interval:
    """The shift treatment − control: estimate and interval, with the interval's coverage."""

    estimate: float
    low: float
    high: float
    coverage: float

    @property
    def half_width(self) -> float:
        return max(self.estimate - self.low, self.high - self.estimate)


@lru_cache(maxsize=512)
def u_counts(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orderings of two samples give each Mann–Whitney U (0..mn)."""
    if m == 0 or n == 0:
        return (1,)
    # f(m, n)(u) = f(m-1, n)(u - n) + f(m, n-1)(u): the largest value is a treatment's or not
    a, b = u_counts(m - 1, n), u_counts(m, n - 1)
    out = [0] * (m * n + 1)
    for u, c in enumerate(a):
        out[u + n] += c
    for u, c in enumerate(b):
        out[u] += c
    return tuple(out)


def _rank(m: int, n: int, target: float) -> tuple[int, float]:
    """(k, coverage): the order statistic of the interval and the coverage it has exactly."""
    counts = u_counts(m, n)
    total = math.comb(m + n, m)
    alpha_half = (1.0 - target) / 2
    k, below = 1, counts[0]
    while k < len(counts) and (below + counts[k]) / total <= alpha_half:
        below += counts[k]
        k += 1
    # k - 1 is the largest u with P(U <= u) <= alpha/2 (or 0: the widest interval)
    return k, max(0.0, 1.0 - 2.0 * sum(counts[:k]) / total)


def shift_interval(control: list[float], treatment: list[float],
                   target: float = TARGET) -> Interval:
    """The Hodges–Lehmann shift of *treatment* against *control* and its exact interval."""
    m, n = len(treatment), len(control)
    if not m or not n:
        raise ValueError("an interval needs at least one figure in each arm")
    if m > MAX_REPEATS or n > MAX_REPEATS:
        raise ValueError(f"an interval takes at most {MAX_REPEATS} figures an arm")
    diffs = sorted(t - c for t in treatment for c in control)
    k, coverage = _rank(m, n, target)
    return Interval(statistics.median(diffs), diffs[k - 1], diffs[len(diffs) - k], coverage)


def reading(iv: Interval, threshold: float) -> str:
    """better / worse / no detectable change / inconclusive (see the module's docstring)."""
    if iv.low > threshold:
        return "worse"
    if iv.high < -threshold:
        return "better"
    if -threshold <= iv.low and iv.high <= threshold:
        return "no detectable change"
    return "inconclusive"


def detectable(iv: Interval, threshold: float) -> float:
    """The smallest shift this run could have detected: the threshold plus the half-width."""
    return threshold + iv.half_width


def coverage_label(coverage: float) -> str:
    """``90 %`` (rounded down to a whole percent, never above the exact coverage)."""
    return f"{math.floor(coverage * 100 + 1e-9)} %"
