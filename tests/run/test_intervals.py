"""The interval on a metric's Δ and its reading: properties checked with hypothesis, and the
exact coverage checked by enumerating every split of a set of figures into two arms."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servelab.run import aggregate, intervals

figure = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
arm = st.lists(figure, min_size=1, max_size=8)


@given(arm, arm)
def test_the_interval_holds_its_estimate_and_lies_within_the_differences(
        c: list[float], t: list[float]) -> None:
    iv = intervals.shift_interval(c, t)
    diffs = [b - a for b in t for a in c]
    assert min(diffs) <= iv.low <= iv.estimate <= iv.high <= max(diffs)
    assert 0.0 <= iv.coverage < 1.0


@given(arm, arm, st.floats(min_value=-1e3, max_value=1e3, allow_nan=False))
def test_a_shift_of_the_treatment_shifts_the_interval(c: list[float], t: list[float],
                                                      s: float) -> None:
    a = intervals.shift_interval(c, t)
    b = intervals.shift_interval(c, [x + s for x in t])
    for x, y in ((a.low, b.low), (a.high, b.high), (a.estimate, b.estimate)):
        assert y == pytest.approx(x + s, rel=1e-9, abs=1e-6)
    assert a.coverage == b.coverage


@given(arm, arm)
def test_swapping_the_arms_mirrors_the_interval(c: list[float], t: list[float]) -> None:
    a, b = intervals.shift_interval(c, t), intervals.shift_interval(t, c)
    assert (b.low, b.high) == pytest.approx((-a.high, -a.low))


@pytest.mark.parametrize(("m", "n", "coverage"), [(3, 3, 0.9), (2, 2, 4 / 6), (1, 1, 0.0),
                                                   (5, 5, 1 - 2 * 4 / 252)])
def test_coverage_is_exact_for_the_common_repeats(m: int, n: int, coverage: float) -> None:
    iv = intervals.shift_interval([float(i) for i in range(n)], [float(i) for i in range(m)])
    assert iv.coverage == pytest.approx(coverage)
    assert sum(intervals.u_counts(m, n)) == math.comb(m + n, m)


@settings(max_examples=30, deadline=None)
@given(st.lists(figure, min_size=4, max_size=8, unique=True), st.data())
def test_under_no_change_the_interval_misses_zero_at_most_as_often_as_it_says(
        pool: list[float], data: st.DataObject) -> None:
    """Every split of one set of distinct figures into two arms is equally likely when nothing
    changed: the share of splits whose interval misses 0 is at most 1 − coverage."""
    m = data.draw(st.integers(min_value=1, max_value=len(pool) - 1))
    missed = total = 0
    coverage = 0.0
    for idx in itertools.combinations(range(len(pool)), m):
        t = [pool[i] for i in idx]
        c = [pool[i] for i in range(len(pool)) if i not in idx]
        iv = intervals.shift_interval(c, t)
        coverage = iv.coverage
        total += 1
        missed += not (iv.low <= 0.0 <= iv.high)
    assert missed / total <= 1 - coverage + 1e-9


@given(st.floats(min_value=-10, max_value=10), st.floats(min_value=0, max_value=10),
       st.floats(min_value=0, max_value=5))
def test_the_reading_follows_where_the_interval_lies(low: float, width: float,
                                                     threshold: float) -> None:
    iv = intervals.Interval(low + width / 2, low, low + width, 0.9)
    r = intervals.reading(iv, threshold)
    if r == "worse":
        assert iv.low > threshold
    elif r == "better":
        assert iv.high < -threshold
    elif r == "no detectable change":
        assert -threshold <= iv.low and iv.high <= threshold
    else:  # the interval spans the threshold, one way or the other
        assert iv.low <= threshold < iv.high or iv.low < -threshold <= iv.high
    # the same noise around a true shift of the detectable size would clear the threshold
    size = intervals.detectable(iv, threshold) + 1e-6
    moved = intervals.Interval(size, size - (iv.estimate - iv.low), size + iv.high - iv.estimate,
                               0.9)
    assert intervals.reading(moved, threshold) == "worse"


def _arms(control: list[float], treatment: list[float]) -> tuple[aggregate.ArmStats, ...]:
    from test_aggregate import result  # the synthetic results of the aggregation tests

    return tuple(aggregate.arm_stats(name, [result(name, i, ready=v)
                                            for i, v in enumerate(vals, 1)])
                 for name, vals in (("control", control), ("treatment", treatment)))


@given(st.lists(st.floats(min_value=0.5, max_value=5), min_size=2, max_size=5),
       st.lists(st.floats(min_value=0.5, max_value=5), min_size=2, max_size=5))
def test_a_verdict_never_rests_on_an_inconclusive_metric(c: list[float],
                                                         t: list[float]) -> None:
    control, treatment = _arms(c, t)
    deltas = aggregate.compare_arms(control, treatment)
    v = aggregate.judge(control, treatment, deltas, [], [])
    for d in deltas:
        assert d.changed == (d.reading in ("better", "worse"))
        if d.reading == "inconclusive":
            assert not any(d.label in r for r in v.reasons if r.startswith(("better",
                                                                            "worse")))
    if not any(d.changed for d in deltas):
        assert v.verdict == "no detectable change"
        assert any("the smallest change this run could have detected" in r
                   for r in v.reasons)


def test_a_spread_that_spans_the_threshold_is_inconclusive_not_a_change() -> None:
    control, treatment = _arms([1.0, 1.1, 1.2], [1.05, 1.4, 1.9])
    d = {x.metric: x for x in aggregate.compare_arms(control, treatment)}["startup"]
    assert d.interval is not None and d.interval.coverage == pytest.approx(0.9)
    assert d.reading == "inconclusive" and not d.changed
    assert aggregate.judge(control, treatment, [d], [], []).verdict == "no detectable change"
    clear = {x.metric: x for x in aggregate.compare_arms(*_arms([1.0, 1.1, 1.2],
                                                                  [2.0, 2.1, 2.2]))}
    assert clear["startup"].reading == "worse" and clear["startup"].threshold_from == "spread"


def test_a_calibration_figure_sets_the_threshold() -> None:
    control, treatment = _arms([1.0, 1.1, 1.2], [2.0, 2.1, 2.2])
    d = {x.metric: x for x in aggregate.compare_arms(control, treatment,
                                                     calibration={"startup": 1.5})}
    assert d["startup"].threshold == 1.5 and d["startup"].threshold_from == "calibration"
    assert d["startup"].reading == "no detectable change"  # [0.8, 1.2] lies within ±1.5
