"""The calibration's figures from A/A runs (synthetic figures, labelled so: the command's
runs on the example are in docs/run.md), and its file read back as run reads it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from servelab.errors import InputError
from servelab.run import aggregate, calfile, calibrate
from servelab.spec import validator


def _rows(values: list[float]) -> list[dict[str, Any]]:
    from test_aggregate import result  # the synthetic results of the aggregation tests

    return [result("treatment", i, ready=v) for i, v in enumerate(values, 1)]


def _noisy(n: int, sd: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)  # noqa: S311 - synthetic figures, reproducible
    return [1.0 + rng.gauss(0, sd) for _ in range(n)]


def test_noise_sets_the_threshold_and_the_detectable_effect() -> None:
    quiet = calibrate.calibrate_figures(_rows(_noisy(10, 0.01)), repeats=3, draws=60)
    loud = calibrate.calibrate_figures(_rows(_noisy(10, 0.3)), repeats=3, draws=60)
    q = {m.key: m for m in quiet.metrics}["startup"]
    n = {m.key: m for m in loud.metrics}["startup"]
    assert q.threshold == pytest.approx(0.05)  # the minimum effect: the noise is below it
    assert n.threshold > q.threshold and n.mad > q.mad
    assert q.min_detectable_effect is not None and n.min_detectable_effect is not None
    assert n.min_detectable_effect > q.min_detectable_effect >= q.threshold
    assert q.false_positive_rate <= 0.1 and n.false_positive_rate <= 0.1
    # exact figures (the image's size) have no noise: any change is seen
    size = {m.key: m for m in quiet.metrics}["size"]
    assert size.mad == 0 and size.false_positive_rate == 0


def test_the_repeats_needed_fall_as_the_effect_grows() -> None:
    vals = _noisy(12, 0.2)
    small = calibrate.repeats_needed(vals, 0.25, 0.05, draws=60)
    large = calibrate.repeats_needed(vals, 1.5, 0.05, draws=60)
    assert large is not None and (small is None or small >= large)


def test_the_file_validates_and_run_reads_its_thresholds(tmp_path: Path) -> None:
    cal = calibrate.calibrate_figures(_rows(_noisy(8, 0.1)), repeats=3, draws=40,
                                      effects={"startup": 0.5})
    doc = cal.to_dict()
    assert list(validator("calibration").iter_errors(doc)) == []
    assert set(doc["metrics"]["startup"]["repeats_needed"]) == {"0.5"}
    assert 0 <= doc["verdict_false_positive_rate"] <= doc[
        "verdict_false_positive_rate_uncalibrated"] + 0.05
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(doc))
    back = calfile.load(path)
    thresholds = {k: v["threshold"] for k, v in back["metrics"].items()}
    c, t = (aggregate.arm_stats(a, [r | {"arm": a} for r in _rows(v)])
            for a, v in (("control", [1.0, 1.1, 1.2]), ("treatment", [2.0, 2.1, 2.2])))
    d = {x.metric: x for x in aggregate.compare_arms(c, t, calibration=thresholds)}
    assert d["startup"].threshold_from in ("calibration", "min effect")
    assert d["startup"].threshold == pytest.approx(max(0.05, thresholds["startup"]))


def test_a_file_that_is_not_a_calibration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"schemaVersion": 1, "kind": "servelab-calibration"}))
    with pytest.raises(InputError, match="not a servelab calibration file"):
        calfile.load(path)


def test_the_summary_names_the_calibration_file_it_used() -> None:
    from servelab.run import summary

    rows = [r | {"arm": a} for a, v in (("control", [1.0, 1.1, 1.2]),
                                        ("treatment", [2.0, 2.1, 2.2])) for r in _rows(v)]
    c, t = (aggregate.arm_stats(a, [r for r in rows if r["arm"] == a])
            for a in ("control", "treatment"))
    deltas = aggregate.compare_arms(c, t, calibration={"startup": 0.3})
    data = {"verdict": "x", "reasons": [], "repeats": 3, "experiment": {},
            "calibration": {"file": "cal/ubuntu.json", "repeats": 3, "runs": 10}}
    md = summary.render_markdown(data, c, t, deltas, rows)
    assert "the noise the calibration file `cal/ubuntu.json` measured" in md
    assert "| 0.300 s | **worse** |" in md  # the file's threshold, in the table
    plain = summary.render_markdown(data | {"calibration": None}, c, t,
                                    aggregate.compare_arms(c, t), rows)
    assert "no calibration file: `servelab calibrate`" in plain
