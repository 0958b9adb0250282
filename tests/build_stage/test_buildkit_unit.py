"""servelab.build.buildkit without an engine: a real rawjson capture (tests/data/build/progress/
failing) decoded as it streams, whatever the pieces, and its error tail against the plain
capture of the same build."""

from __future__ import annotations

import io
import re

import pytest
from servelab_build_testlib import DATA

from servelab import logs
from servelab.build import buildkit

FAILING = DATA / "progress" / "failing"
RAW = (FAILING / "rawjson.stderr").read_text()
PLAIN = (FAILING / "plain.stderr").read_text()


def plain_tail(text: str) -> list[str]:
    """What plain output ends a failure with: from the first ``------`` rule to the end, the
    seconds before each log line removed (they differ from build to build)."""
    lines = text.splitlines()
    start = lines.index("------")
    return [re.sub(r"^\d+\.\d+ ", "", x).replace("\r", "") for x in lines[start:] if x.strip()]


def read(pieces: list[str], progress: logs.Progress | None = None) -> buildkit.Reader:
    r = buildkit.Reader(buildkit.RAWJSON, progress)
    for p in pieces:
        r.feed(p)
    r.close()
    return r


def by_lines() -> list[str]:
    return RAW.splitlines(keepends=True)


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_any_pieces_decode_to_the_same_steps(size: int) -> None:
    whole = read(by_lines())
    cut = read([RAW[i:i + size] for i in range(0, len(RAW), size)])
    names = [v.name for v in whole.vertices.values()]
    assert [v.name for v in cut.vertices.values()] == names
    assert cut.error_tail() == whole.error_tail()
    assert whole.objects == RAW.count("\n}\n") + RAW.endswith("\n}")
    assert "[2/3] RUN <<EOF (echo \"Collecting fastapi==0.110.0\"...)" in names
    assert any(n.startswith("[3/3] RUN python3 -c") for n in names)


def test_the_error_tail_is_the_one_plain_output_prints() -> None:
    tail = read(by_lines()).error_tail()
    got = [re.sub(r"^\d+\.\d+ ", "", x) for x in tail.splitlines()]
    assert got == plain_tail(PLAIN)
    # each log line with its seconds since the step started, as plain output shows it
    assert re.search(r"^\d\.\d{3} ModuleNotFoundError: No module named uvicorn$", tail, re.M)
    # the rawjson capture has no such block: it was rebuilt from the vertex error and logs
    assert " > [3/3] RUN" not in RAW


def test_logs_are_base64_decoded_into_a_plain_build_log() -> None:
    log = read(by_lines()).log_text()
    assert "Collecting fastapi==0.110.0" in log
    assert "b25lCg==" not in log and '"vertexes"' not in log
    assert re.search(r"^#\d+ \[3/3\] RUN python3", log, re.M)
    assert re.search(r"^#\d+ ERROR: process \"/bin/sh -c python3", log, re.M)
    assert re.search(r"^#\d+ DONE \d+\.\d+s$", log, re.M)
    assert log.rstrip().endswith("did not complete successfully: exit code: 1")


def test_build_text_on_the_progress_lines_is_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "QUIET_S", 0.0)  # a line for every step, however quick
    out = io.StringIO()
    with logs.Progress("build treatment #1", mode=logs.LINES, stream=out) as p:
        read(by_lines(), p)
    lines = out.getvalue().splitlines()
    assert any("RUN <<EOF" in x for x in lines)
    assert all(x.startswith("servelab: ") and "\r" not in x for x in lines)
    steps = [x for x in lines if x.startswith("servelab: build treatment #1: ")]
    assert len(steps) == len(read(by_lines()).vertices) + 1  # + its "done" line


def test_a_buildx_without_rawjson_is_told_apart_from_a_failed_build() -> None:
    refused = read(["ERROR: invalid progress mode rawjson\n"])
    assert refused.refused()
    assert not read(by_lines()).refused()
    assert not read(["ERROR: failed to solve: invalid progress mode in a RUN\n", "{\n",
                     '  "vertexes": []\n', "}\n"]).refused()


def test_plain_fallback_shows_steps_and_keeps_its_own_tail(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "QUIET_S", 0.0)  # a line for every step, however quick
    out = io.StringIO()
    with logs.Progress("build", mode=logs.LINES, stream=out) as p:
        r = buildkit.Reader(buildkit.PLAIN, p)
        for line in PLAIN.splitlines(keepends=True):
            r.feed(line)
        r.close()
    assert "servelab: build: [3/3] RUN python3" in out.getvalue()
    assert plain_tail(r.error_tail()) == plain_tail(PLAIN)


def test_truncated_or_foreign_text_is_kept_as_text() -> None:
    r = read(['{\n  "vertexes": [\n', "not json at all\n", "}\n", "Dockerfile:3\n"])
    assert "Dockerfile:3" in r.text
    r = read(by_lines()[:12])  # cut inside the second object: the first counts, no error
    assert r.objects == 1
    assert len(r.vertices) == 1


def test_refused_mode_is_not_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buildkit, "MODES", [buildkit.RAWJSON, buildkit.PLAIN])
    buildkit.refuse(buildkit.RAWJSON)
    assert buildkit.modes() == [buildkit.PLAIN]
    buildkit.refuse(buildkit.PLAIN)  # the last mode stays
    assert buildkit.modes() == [buildkit.PLAIN]
