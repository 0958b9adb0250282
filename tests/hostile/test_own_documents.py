"""servelab's own documents read back (summary.json, result.json, the run's log and archive)
by push, action-outputs, scan --baseline and the GitHub writers; and GitHub's step files
when they cannot be written.

Before, these readers opened the files with no size cap and no file-type check (a named pipe
hung them, a link to /dev/zero grew memory and ended in a traceback), took any JSON object as
a summary, `push --dry-run` named an archive outside the run directory, `push --arm ../x`
read outside it and `--arm ''` was an internal error; an unusable GITHUB_OUTPUT turned a
successful push into exit 3. Each case runs in its own process (tests/hostile/harness.py).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from servelab import github

from .harness import Outcome, run_servelab

GOOD = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good"
DIGEST = "sha256:" + "a" * 64


def _result(arm: str, repeat: int, archive: str) -> dict[str, object]:
    doc = json.loads((GOOD / "result.json").read_text())
    doc.update(arm=arm, repeat=repeat)
    doc["stages"]["build"] = {"status": "ok", "reason": "built", "seconds": 1.0,
                              "record": {"archive": archive}}
    return doc


def make_run(root: Path, *, keep_archive: bool = True, archive: str | None = None) -> Path:
    """A run directory as servelab run leaves it: summary.json, one repeat of the treatment,
    the tested image's archive in images/."""
    run = root / "run"
    (run / "treatment" / "repeat-1").mkdir(parents=True)
    (run / "images").mkdir()
    kept = run / "images" / f"{DIGEST.partition(':')[2]}.oci.tar"
    if keep_archive:
        kept.write_bytes(b"an OCI archive\n")
    result = _result("treatment", 1, archive or str(kept))
    (run / "treatment" / "repeat-1" / "result.json").write_text(json.dumps(result))
    summary = {"schemaVersion": 1, "verdict": "passed", "arms": ["treatment"],
               "reproducibility": {"treatment": {"reproducible": True}}, "results": [result]}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "summary.md").write_text("# servelab: passed\n")
    return run


def test_push_dry_run_names_the_archive_in_the_run(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    outcome = run_servelab(["push", str(run), "--dry-run", "--format", "json"], cwd=tmp_path)
    assert outcome.code == 0, outcome.explain()
    tested = json.loads(outcome.stdout)["tested"]
    assert tested["digest"] == DIGEST and tested["archive"].startswith(str(run / "images"))


# ------------------------------------------------------------------------ push: confinement


def test_push_never_names_an_archive_outside_the_run(tmp_path: Path) -> None:
    """reader-push-outside: a result.json may record any path; only one inside counts."""
    outside = tmp_path / "elsewhere.oci.tar"
    outside.write_bytes(b"not what was tested\n")
    run = make_run(tmp_path, keep_archive=False, archive=str(outside))
    outcome = run_servelab(["push", str(run), "--dry-run"], cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and str(outside) not in outcome.stdout, outcome.explain()
    assert "not in" in outcome.stderr


def test_push_refuses_a_kept_archive_that_links_out(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.oci.tar"
    outside.write_bytes(b"not what was tested\n")
    run = make_run(tmp_path, keep_archive=False)
    (run / "images" / f"{DIGEST.partition(':')[2]}.oci.tar").symlink_to(outside)
    outcome = run_servelab(["push", str(run), "--dry-run"], cwd=tmp_path)
    assert outcome.code == 2 and str(outside) not in outcome.stdout, outcome.explain()


@pytest.mark.parametrize(("arm", "words"), [
    ("../x", "is not an arm name"),
    ("", "is not an arm name"),
    ("/etc", "is not an arm name"),
    ("treatment/../../x", "is not an arm name"),
    ("control", "has no such arm"),
], ids=["dot-dot", "empty", "absolute", "climbs", "not-in-run"])
def test_push_arm_is_a_name_of_this_run(arm: str, words: str, tmp_path: Path) -> None:
    """reader-push-arm: `--arm ../x` reads nothing outside the run, `--arm ''` is exit 2
    with a message."""
    run = make_run(tmp_path)
    decoy = tmp_path / "x" / "repeat-1"  # what ../x would find
    decoy.mkdir(parents=True)
    (decoy / "result.json").write_text((run / "treatment/repeat-1/result.json").read_text())
    outcome = run_servelab(["push", str(run), "--dry-run", "--arm", arm], cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and words in outcome.stderr, outcome.explain()
    assert "internal error" not in outcome.stderr


# ------------------------------------------------------------------------ hostile documents


def _fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def _zero(p: Path) -> None:
    p.unlink()
    p.symlink_to("/dev/zero")


def _no_results(p: Path) -> None:
    p.write_text(json.dumps({"schemaVersion": 1, "verdict": "passed", "results": []}))


def _bad_result(p: Path) -> None:
    doc = json.loads(p.read_text())
    doc["results"][0]["repeat"] = "one"
    p.write_text(json.dumps(doc))


def _not_json(p: Path) -> None:
    p.write_text('{"verdict": "passed",')


def _huge(p: Path) -> None:
    with p.open("wb") as f:  # sparse: over SERVELAB_MAX_JSON_BYTES (32 MiB)
        f.truncate(40 * 1024 * 1024)


#: kind -> (spoil summary.json, words the message must hold)
SPOILED: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "named pipe"),
    "dev-zero-link": (_zero, "character device"),
    "no-results": (_no_results, "invalid summary.json"),
    "bad-result": (_bad_result, "invalid result.json"),
    "not-json": (_not_json, "invalid JSON"),
    "oversized": (_huge, "limit"),
}
#: reader -> argv ({run}: the run directory); env for GitHub's files is added
READERS = {
    "push": ["push", "{run}", "--dry-run"],
    "action-outputs": ["action-outputs", "--results-dir={run}", "--prefix=p", "--job=j"],
    "scan-baseline": ["scan", "{run}/images/x.oci.tar", "--offline", "--baseline",
                      "{run}/summary.json"],
    "report": ["report", "{run}/summary.json"],
}


@pytest.mark.parametrize("kind", list(SPOILED))
@pytest.mark.parametrize("reader", list(READERS))
def test_a_spoiled_summary_is_exit_2_naming_it(reader: str, kind: str, tmp_path: Path) -> None:
    """reader-own-documents: the safe reader and the schema, for every reader of
    summary.json: no hang, no memory growth, no traceback; exit 2 naming the file."""
    run = make_run(tmp_path)
    spoil, words = SPOILED[kind]
    spoil(run / "summary.json")
    env = {"GITHUB_OUTPUT": str(tmp_path / "gh-out"), "GITHUB_ACTIONS": "true"}
    argv = [a.format(run=run) for a in READERS[reader]]
    outcome = run_servelab(argv, cwd=tmp_path, env=env)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2, outcome.explain()
    said = outcome.stdout + outcome.stderr
    assert words in said and "summary.json" in said, outcome.explain()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link", "bad-result"])
def test_push_reads_each_result_safely(kind: str, tmp_path: Path) -> None:
    run = make_run(tmp_path)
    path = run / "treatment" / "repeat-1" / "result.json"
    if kind == "bad-result":
        path.write_text(json.dumps({**json.loads(path.read_text()), "repeat": "one"}))
    else:
        SPOILED[kind][0](path)
    outcome = run_servelab(["push", str(run), "--dry-run"], cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and "result.json" in outcome.stderr, outcome.explain()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link"])
def test_action_outputs_log_that_is_not_a_file_is_skipped(kind: str, tmp_path: Path) -> None:
    """--log (the run's captured output) is only read through the safe reader: a pipe is
    never waited on, /dev/zero never read."""
    results = tmp_path / "results"
    results.mkdir()
    log = tmp_path / "servelab-run.log"
    log.write_text("x")
    SPOILED[kind][0](log)
    outcome = run_servelab(["action-outputs", f"--results-dir={results}", "--prefix=p",
                            "--job=j", "--exit-code=3", f"--log={log}"], cwd=tmp_path,
                           env={"GITHUB_OUTPUT": str(tmp_path / "gh-out"),
                                "GITHUB_STEP_SUMMARY": str(tmp_path / "gh-sum")})
    assert _promise(outcome) == [] and outcome.code == 0, outcome.explain()
    assert (results / "summary.md").is_file()  # the stop report, written (its job)


# ------------------------------------------------------------------------ GitHub's files


def _promise(outcome: Outcome) -> list[str]:
    """The harness's promise, less "left behind" for a command whose job is to write."""
    return [p for p in outcome.problems() if not p.startswith("left behind")]


def _dir(tmp_path: Path) -> str:
    (tmp_path / "a-dir").mkdir()
    return str(tmp_path / "a-dir")


STEP_FILES: dict[str, Callable[[Path], str]] = {
    "dev-full": lambda d: "/dev/full",
    "directory": _dir,
    "missing-path": lambda d: str(d / "no" / "such" / "file"),
}


@pytest.mark.parametrize("kind", list(STEP_FILES))
@pytest.mark.parametrize("command", ["push", "action-outputs", "action-outputs-stopped"])
def test_an_unusable_step_file_is_a_warning(command: str, kind: str, tmp_path: Path) -> None:
    """writer-github-files: GITHUB_OUTPUT or GITHUB_STEP_SUMMARY that cannot be written is
    a warning on stderr; the command keeps its own exit code (0 here: a push that succeeded
    is not turned into exit 3)."""
    run = make_run(tmp_path)
    bad = STEP_FILES[kind](tmp_path)
    env = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": bad, "GITHUB_STEP_SUMMARY": bad}
    argv = {
        "push": ["push", str(run), "--dry-run"],
        "action-outputs": ["action-outputs", f"--results-dir={run}", "--prefix=p", "--job=j"],
        "action-outputs-stopped": ["action-outputs", f"--results-dir={tmp_path / 'stopped'}",
                                   "--prefix=p", "--job=j", "--exit-code=3"],
    }[command]
    outcome = run_servelab(argv, cwd=tmp_path, env=env)
    assert _promise(outcome) == [], outcome.explain()  # the stop report is written: its job
    assert outcome.code == 0, outcome.explain()
    assert "warning:" in outcome.stderr and bad in outcome.stderr, outcome.explain()


def test_set_outputs_and_write_summary_warn_and_go_on(tmp_path: Path) -> None:
    warned = io.StringIO()
    assert github.set_outputs({"verdict": "passed"}, path=Path("/dev/full"), warn=warned) is False
    assert github.write_summary("# x\n", path=tmp_path, warn=warned) is False
    text = warned.getvalue()
    assert "GITHUB_OUTPUT" in text and "No space left on device" in text
    assert "GITHUB_STEP_SUMMARY" in text and str(tmp_path) in text
    ok = tmp_path / "out"
    assert github.set_outputs({"verdict": "passed"}, path=ok, warn=warned) is True
    github.set_outputs({"digest": DIGEST}, path=ok, warn=warned)
    assert ok.read_text().count("<<ghadelimiter_") == 2  # appended, never replaced
