"""Precision of the serving rules on realistic manifests written after public serving repos.

Each file in ``tests/data/k8s/realistic/`` says, for the serving rules only, every finding it
must give (``# expect:``), any finding the tool gives that is wrong (``# wrong: rule@line
why``) and any real problem it misses (``# missed: rule@line why``). The tool must give exactly
expect + wrong, nothing of missed, and expect / (expect + wrong) must stay at or above 95%.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab.k8s import SERVING_RULES, check_manifests
from servelab.k8s.kinds import READ_KINDS

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
REALISTIC = sorted((DATA / "realistic").glob("*.yaml"))
Reader = Callable[[Path], Any]


def _serving(path: Path) -> Counter[tuple[str, int]]:
    report = check_manifests([path])
    return Counter((f.rule_id, f.line or 0) for f in report.findings if f.rule_id in SERVING_RULES)


@pytest.mark.parametrize("path", REALISTIC, ids=lambda p: p.stem)
def test_realistic_manifest(path: Path, k8s_fixture: Reader) -> None:
    fx = k8s_fixture(path)
    got = _serving(path)
    assert got == fx.expect + fx.wrong, (
        f"{path.name}: serving findings differ from the labels:\n"
        f"  unexpected: {dict(got - fx.expect - fx.wrong)}\n"
        f"  not found: {dict(fx.expect + fx.wrong - got)}")
    assert not got & fx.missed, f"{path.name}: a 'missed' finding is found now: relabel it"


def test_precision_of_the_serving_rules(k8s_fixture: Reader) -> None:
    fixtures = [k8s_fixture(p) for p in REALISTIC]
    right = sum(sum(fx.expect.values()) for fx in fixtures)
    wrong = sum(sum(fx.wrong.values()) for fx in fixtures)
    assert len(fixtures) >= 15
    assert right >= 30, "the set must give the rules something to find"
    assert right / (right + wrong) >= 0.95


def test_the_set_covers_every_kind_read() -> None:
    text = "\n".join(p.read_text() for p in REALISTIC)
    kinds = {k for ks in READ_KINDS.values() for k in ks} - {"Service", "LLMInferenceServiceConfig"}
    missing = {k for k in kinds if f"kind: {k}\n" not in text}
    assert not missing, f"no realistic manifest of kind(s) {missing}"


def test_the_set_is_modelled_on_public_repos() -> None:
    for path in REALISTIC:
        head = path.read_text().split("\napiVersion", 1)[0]
        assert "modelled on:" in head and "(pattern only)" in head, path.name
