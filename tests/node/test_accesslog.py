"""The registry access-log check of a cold pull, on fixture folders of log excerpts (the
distribution registry's combined format, with each response's byte count): positive-* folders
were served in full, negative-* were not, and say which blob fell short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.node import Blob, ColdSettings, ImageLayers
from servelab.node.coldpull import check_log, served_in_full

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


def test_a_log_that_cannot_be_read_is_not_checked(tmp_path: Path) -> None:
    """The log was replaced by a directory after the run's start (log rotation gone wrong):
    the check says it could not tell, it does not fail the figure."""
    log = tmp_path / "registry.log"
    log.write_text("")
    settings = ColdSettings(registry_log=log)
    log.unlink()
    log.mkdir()
    case = CASES / "positive-full-pull"
    given = json.loads((case / "sizes.json").read_text())
    (config, size), *layers = given["sizes"].items()
    img = ImageLayers(f"127.0.0.1:5000/{given['repository']}@sha256:" + "d" * 64,
                      Blob("sha256:" + "d" * 64, 406), Blob(config, size),
                      tuple(Blob(d, n) for d, n in layers))
    served, detail = check_log(settings, 0, img)
    assert served is None
    assert detail[0].startswith("the registry's access log could not be read: ")
