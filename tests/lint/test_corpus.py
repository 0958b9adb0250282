"""The realistic corpus (tests/data/lint/corpus, corpus-heldout): every judged problem is
found where it is, nothing unjudged is reported, and the serving rules stay >= 95% right.
The scoring itself is bench/lint_precision.py's, so the test and the figure in docs/lint.md
cannot drift apart."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from .conftest import REPO


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_precision",
                                                  REPO / "bench" / "lint_precision.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["lint_precision"] = module
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


@pytest.mark.parametrize("folder", BENCH.SETS, ids=lambda p: p.name)
def test_corpus_is_judged_and_serving_rules_are_right(folder) -> None:  # type: ignore[no-untyped-def]
    entries = [BENCH.load(d) for d in sorted(folder.iterdir()) if d.is_dir()]
    assert len(entries) >= 15
    got = BENCH.findings(entries, REPO / "src")
    assert BENCH.unjudged(entries, got) == []
    truth = sum((e.truth for e in entries), start=type(got)())
    assert sorted((truth - got).elements()) == []  # every judged problem is still found
    serving = BENCH.score(entries, got, set(BENCH.SERVING))
    assert serving.precision >= BENCH.TARGET
    assert serving.found >= 30


def test_the_corpus_has_each_serving_problem_class() -> None:
    entries = [BENCH.load(d) for folder in BENCH.SETS for d in sorted(folder.iterdir())
               if d.is_dir()]
    rules = {k[1] for e in entries for k in e.truth}
    assert set(BENCH.SERVING) <= rules
    assert {"download-unverified", "unpinned-packages", "base-latest"} <= rules
