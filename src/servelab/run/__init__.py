"""servelab.run: the runner of an experiment and everything after the stages.

* :mod:`~servelab.run.runner`: :func:`run_experiment` (interleaved repeats and arms, the
  fixed-factor check, gates) and :func:`build_experiment` (the same loop, build stage only);
  :mod:`~servelab.run.options` holds :class:`RunOptions` below it.
* :mod:`~servelab.run.stages`: adapters that run each stage and return its typed outcome
  (:mod:`~servelab.run.outcomes`); :mod:`~servelab.run.results` assembles ``result.json``
  from them once and validates it.
* :mod:`~servelab.run.aggregate` (per-arm statistics, deltas, the verdict),
  :mod:`~servelab.run.summary` and :mod:`~servelab.run.explain` (summary.md and its Why),
  :mod:`~servelab.run.render` (the closing text, the history's text and charts),
  :mod:`~servelab.run.merge` (``report`` and ``compare``), :mod:`~servelab.run.lazyview`
  (the lazy pull in the summary), :mod:`~servelab.run.history`
  (``history``: the trend of past runs) and :mod:`~servelab.run.svg` (its SVG).
* :mod:`~servelab.run.doctor`: ``servelab doctor``, what this machine can do for a run, each
  part tried for real.

GitHub's protocols (outputs, annotations, the stop report, artifacts, the PR comment) are
:mod:`servelab.github`.

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.run.history import History, read_history
    from servelab.run.merge import compare_runs, merge_runs
    from servelab.run.options import RunOptions
    from servelab.run.outcomes import RepeatResult
    from servelab.run.runner import RunResult, build_experiment, run_experiment

_WHERE = {
    "RunOptions": "options", "RunResult": "runner", "run_experiment": "runner",
    "build_experiment": "runner", "RepeatResult": "outcomes", "merge_runs": "merge",
    "compare_runs": "merge", "History": "history", "read_history": "history",
}
__all__ = [
    "History",
    "RepeatResult",
    "RunOptions",
    "RunResult",
    "build_experiment",
    "compare_runs",
    "merge_runs",
    "read_history",
    "run_experiment",
]
__getattr__ = lazy_exports(__name__, _WHERE)
