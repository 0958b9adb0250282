"""The registry access-log check of a cold pull, on fixture folders of log excerpts (the
distribution registry's combined format, with each response's byte count): positive-* folders
were served in full, negative-* were not, and say which blob fell short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.node.coldpull import served_in_full

CASES = Path(__file__).resolve().parent.parent / "data" / "node" / "accesslog"
FOLDERS = sorted(p for p in CASES.iterdir() if p.is_dir())


def test_there_are_both_kinds() -> None:
    kinds = {p.name.split("-", 1)[0] for p in FOLDERS}
    assert kinds == {"positive", "negative"}


@pytest.mark.parametrize("case", FOLDERS, ids=lambda p: p.name)
def test_access_log(case: Path) -> None:
    given = json.loads((case / "sizes.json").read_text())
    expect = json.loads((case / "expect.json").read_text())
    ok, missing = served_in_full((case / "access.log").read_text(), given["repository"],
                                 given["sizes"])
    assert ok is expect["served_in_full"] is case.name.startswith("positive-")
    assert missing == expect["missing"]
