"""history, report and compare against hostile inputs (issue 31): absence is never sameness
(item 3), appends are atomic and locked and stay one record a line (item 7), numbers out of
range and failing standard streams are clear errors (item 10). Each kind is a corpus.

Test ids named in docs/limits.md: hostile-history-absence, hostile-history-append,
hostile-history-values, hostile-numbers, hostile-streams.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostile.harness import run_servelab
from hostile_same.runs import D1, D2, result, write_run
from servelab.run.history import read_history
from servelab.run.merge import compare_runs

CARRIED = Path(__file__).resolve().parents[1] / "data" / "history" / "positive" / "carried" \
    / "history.jsonl"
SRC = Path(__file__).resolve().parents[2] / "src"


def _base() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CARRIED.read_text().splitlines()[0])
    return data


def _line(n: int, digest: str | None, **over: Any) -> dict[str, Any]:
    d = json.loads(json.dumps(_base()))
    d["run"]["id"] = f"run-{n:03d}"
    d["run"]["started_at"] = f"2026-11-{1 + n // 24:02d}T{n % 24:02d}:00:00Z"
    d["arms"]["treatment"]["digests"] = [digest] if digest else []
    if digest is None:
        d["arms"]["treatment"].update(size_bytes=None, startup_s=None, findings=None)
    for k, v in over.items():
        d[k] = v
    return d


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ------------------------------------------------------------------ absence is never sameness

#: digests of the treatment run after run (None: the build failed), and for each run whether
#: it must be marked as a change or break
ABSENCE: dict[str, tuple[list[str | None], list[bool]]] = {
    "failed-between-equal": ([D1, None, D1], [False, True, True]),
    "failed-at-the-end": ([D1, D1, None], [False, False, True]),
    "failed-twice": ([D1, None, None, D1], [False, True, False, True]),
    "failed-first": ([None, D1, D1], [False, True, False]),
    "failed-then-other": ([D1, None, D2], [False, True, True]),
    "never-built": ([None, None], [False, False]),
}


@pytest.mark.parametrize("case", list(ABSENCE))
def test_hostile_history_absence(tmp_path: Path, case: str) -> None:
    digests, marked = ABSENCE[case]
    path = _write(tmp_path / "h.history.jsonl", [_line(i, d) for i, d in enumerate(digests)])
    h = read_history([path])
    oldest_first = h.rows[::-1]
    got = [any(c.arm == "treatment" for c in r.changes) for r in oldest_first]
    assert got == marked
    for r, d in zip(oldest_first, digests, strict=True):
        for c in r.changes:  # a break never reads as a build that is not reproducible
            if d is None or not c.before:
                assert c.digest_unknown and "not reproducible" not in c.reading
    out = run_servelab(["history", "--format", "markdown", str(path)], cwd=tmp_path)
    assert out.code == 0 and not out.problems(), out.explain()
    if None in digests:
        assert "unknown" in out.stdout
    text = run_servelab(["history", str(path)], cwd=tmp_path).stdout
    rows = [ln for ln in text.splitlines() if ln.startswith(("◆ 2026", "2026"))]
    assert len(rows) == len(digests)
    for row, d in zip(rows, reversed(digests), strict=True):
        assert ("unknown" in row) is (d is None)


def test_compare_unknown_inputs_are_never_the_same(tmp_path: Path) -> None:
    """Two results that recorded no commit or Dockerfile hash: unknown, not "same"."""
    rows = [result("treatment", 1, D1), result("treatment", 1, D1)]
    for r in rows:  # as an older servelab, or a build that never hashed them, left it
        r["inputs"]["dockerfile_sha256"] = None
    a = write_run(tmp_path / "a", [rows[0]])
    b = write_run(tmp_path / "b", [rows[1]])
    cmp = compare_runs(a, b)
    inputs = cmp.data["arms"][0]["inputs"]
    for name in ("commit", "dockerfile_sha256"):
        assert inputs[name]["unknown"] is True and inputs[name]["same"] is False
    assert "Inputs unknown" in cmp.markdown and "commit" in cmp.markdown.split(
        "Inputs unknown")[1]
    b2 = write_run(tmp_path / "b2", [result("treatment", 1, None)])
    md = compare_runs(a, b2).markdown
    assert "| digest |" in md and "unknown" in md.split("| digest |")[1].splitlines()[0]


# ------------------------------------------------------------------ appends: locked, one a line


def _one_run_file(tmp: Path, n: int) -> Path:
    return _write(tmp / f"in-{n}.history.jsonl", [_line(n, D1)])


def test_hostile_history_append_20_processes_lose_nothing(tmp_path: Path) -> None:
    target = tmp_path / "shared.history.jsonl"
    inputs = [_one_run_file(tmp_path, n) for n in range(20)]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = [subprocess.Popen([sys.executable, "-m", "servelab", "history", str(p),
                               "--append-to", str(target)], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for p in inputs]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 20, errors
    lines = target.read_bytes().split(b"\n")
    assert lines[-1] == b""
    ids = sorted(json.loads(x)["run"]["id"] for x in lines[:-1])
    assert ids == sorted(f"run-{n:03d}" for n in range(20))
    assert read_history([target]).skipped == []


#: values that once split a line of a history file or ended in an internal error
VALUES = ["a\u2028b", "p\u2029q", "nel\x85", "fs\x1cgs\x1drs\x1e", "cr\rlf\n", "lone \udc80",
          "high \ud800", "bidi \u202e", "nul \x00", "ünï 中 🙂"]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_hostile_history_values_stay_one_record_a_line(tmp_path: Path, value: str) -> None:
    src = tmp_path / "src.history.jsonl"
    line = _line(1, D1, verdict=value)
    line["run"]["name"] = value
    # json.dumps escapes a lone surrogate: the file is valid UTF-8 with \udc80 in it
    src.write_text(json.dumps(line, ensure_ascii=False, default=str) + "\n",
                   encoding="utf-8", errors="backslashreplace")
    target = tmp_path / "out.history.jsonl"
    out = run_servelab(["history", str(src), "--append-to", str(target)], cwd=tmp_path)
    made = [f"left behind: {[str(target)]}"]  # the history file it was asked to write
    assert out.code == 0 and out.problems() in ([], made), out.explain()
    raw = target.read_bytes()
    assert raw.isascii() and raw.count(b"\n") == 1
    assert len(raw.decode().splitlines()) == 1  # no U+2028 or \x85 left to split on
    back = read_history([target])
    assert back.skipped == [] and len(back.rows) == 1
    for fmt in ("text", "markdown", "json"):
        shown = run_servelab(["history", "--format", fmt, str(target)], cwd=tmp_path)
        assert shown.code == 0 and not shown.problems(), shown.explain()


# ------------------------------------------------------------------ numbers out of range

NUMBERS = ["1e308", "-1e308", "1e16", "NaN", "Infinity", "-Infinity", "1e400"]


@pytest.mark.parametrize("number", NUMBERS)
def test_hostile_numbers_in_result_files(tmp_path: Path, number: str) -> None:
    rows = [result("treatment", n, D1) for n in (1, 2)]
    a = write_run(tmp_path / "a", rows)
    b = write_run(tmp_path / "b", rows)
    bad = b / "treatment" / "repeat-1" / "result.json"
    bad.write_text(bad.read_text().replace('"compressed_bytes": 1000', '"compressed_bytes": '
                                           + number))
    assert number in bad.read_text()
    for cmd in (["compare", str(a), str(b)], ["report", str(a), str(b)]):
        out = run_servelab(cmd, cwd=tmp_path)
        assert out.code == 2 and not out.problems(), out.explain()
        assert str(bad) in out.stderr


@pytest.mark.parametrize("number", NUMBERS)
def test_hostile_numbers_in_history_lines(tmp_path: Path, number: str) -> None:
    good = json.dumps(_line(1, D1))
    bad = json.dumps(_line(2, D1)).replace('"size_bytes": 67100000.0',
                                           f'"size_bytes": {number}')
    assert number in bad
    path = tmp_path / "h.history.jsonl"
    path.write_text(good + "\n" + bad + "\n")
    out = run_servelab(["history", "--format", "json", str(path)], cwd=tmp_path)
    assert out.code == 0 and not out.problems(), out.explain()
    data = json.loads(out.stdout)
    assert len(data["runs"]) == 1 and f"{path}:2" in data["skipped"][0]["source"]


# ------------------------------------------------------------------ standard output failing

STREAM_COMMANDS = [["history", str(CARRIED)], ["history", "--format", "json", str(CARRIED)],
                   ["validate", str(Path(__file__).resolve().parents[2] / "examples"
                                    / "experiment.yaml")]]


@pytest.mark.parametrize("argv", STREAM_COMMANDS, ids=lambda a: "-".join(a[:2])[:20])
def test_hostile_streams_dev_full(tmp_path: Path, argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    with open("/dev/full", "w") as full:  # noqa: PTH123
        proc = subprocess.run([sys.executable, "-m", "servelab", *argv], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=60,
                              check=False)
    assert proc.returncode == 3, proc.stderr
    assert "No space left on device" in proc.stderr and "standard output" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


@pytest.mark.parametrize("argv", STREAM_COMMANDS, ids=lambda a: "-".join(a[:2])[:20])
def test_hostile_streams_closed_pipe(tmp_path: Path, argv: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    r, w = os.pipe()
    os.close(r)  # the reader is gone before servelab writes a byte
    try:
        proc = subprocess.run([sys.executable, "-m", "servelab", *argv], stdout=w,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=60,
                              check=False)
    finally:
        os.close(w)
    assert proc.returncode == 2, proc.stderr
    assert "standard output" in proc.stderr and "Broken pipe" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert "Exception ignored" not in proc.stderr
