"""servelab.github: delimiter-safe outputs, the 1 MiB summary cap, annotation ranking, plans."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from action_testlib import ROOT, parse_output_file, summary_json, write_standin

from servelab import github
from servelab.errors import InputError, UsageError
from servelab.github import outputs as github_outputs
from servelab.run import summary

# ------------------------------------------------------------------------------------------
# outputs
# ------------------------------------------------------------------------------------------

HOSTILE = [
    "plain",
    "",
    "two\nlines",
    "forged=1\nverdict=improved",
    "x<<EOF\nEOF\nverdict=improved",
    "ghadelimiter_0123\nverdict=improved\nghadelimiter_0123",
    "trailing newline\n",
    "\n\nleading newlines",
    "crlf\r\nverdict=improved\r\n",
    "$(touch /tmp/pwned) `id` ; rm -rf / 'quoted' \"dq\"",
    "ünïcødé ✓ 中文",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_output_value_cannot_break_its_delimiter(tmp_path: Path, value: str) -> None:
    out = tmp_path / "out"
    github.set_outputs({"verdict": "trade-off", "digest": value, "size": 42}, path=out)
    parsed = parse_output_file(out.read_text())
    assert parsed == {"verdict": "trade-off", "digest": value.replace("\r\n", "\n"), "size": "42"}


def test_delimiter_is_redrawn_when_the_value_contains_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    draws = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(github_outputs.secrets, "token_hex", lambda n: next(draws))
    value = "x\nghadelimiter_aaaa\nverdict=improved"
    text = github.format_output("digest", value)
    assert text == f"digest<<ghadelimiter_bbbb\n{value}\nghadelimiter_bbbb\n"
    assert parse_output_file(text) == {"digest": value}


@pytest.mark.parametrize("name", ["", "a b", "a\nb", "x=y", "x<<y", "1abc", "a:b", "é"])
def test_output_name_is_checked(name: str) -> None:
    with pytest.raises(UsageError):
        github.format_output(name, "v")


def test_values_are_written_as_text(tmp_path: Path) -> None:
    out = tmp_path / "out"
    github.set_outputs(
        {"a": None, "b": True, "c": False, "d": 1.5, "e": {"k": [1]}, "f": 7}, path=out
    )
    assert parse_output_file(out.read_text()) == {
        "a": "", "b": "true", "c": "false", "d": "1.5", "e": '{"k": [1]}', "f": "7",
    }


def test_set_outputs_needs_github_output() -> None:
    with pytest.raises(UsageError, match="GITHUB_OUTPUT"):
        github.set_outputs({"a": "b"}, env={})


def test_in_github_actions() -> None:
    assert github.in_github_actions({"GITHUB_ACTIONS": "true"})
    assert not github.in_github_actions({"GITHUB_ACTIONS": "false"})
    assert not github.in_github_actions({})


# ------------------------------------------------------------------------------------------
# step summary
# ------------------------------------------------------------------------------------------


def test_summary_under_the_limit_is_written_whole(tmp_path: Path) -> None:
    target = tmp_path / "summary"
    md = "# verdict\n\n| a | b |\n"
    assert github.write_summary(md, env={"GITHUB_STEP_SUMMARY": str(target)}) is False
    assert target.read_text() == md


def test_summary_is_capped_at_one_mib_with_a_note(tmp_path: Path) -> None:
    target = tmp_path / "summary"
    row = "| repeat | ✓ 中文 | 1.234 s |\n"  # multi-byte characters near the cut
    md = "# verdict: trade-off\n\n" + row * 100_000
    assert len(md.encode()) > github.SUMMARY_LIMIT
    truncated = github.write_summary(md, path=target, note="see summary.md")
    data = target.read_bytes()
    assert truncated is True
    assert len(data) <= github.SUMMARY_LIMIT
    assert len(data) > github.SUMMARY_LIMIT - 1024  # nearly all the room is used
    text = data.decode("utf-8")  # never cut inside a character
    assert text.startswith("# verdict: trade-off")
    assert text.rstrip().endswith("see summary.md")
    assert "Summary truncated" in text
    body = text.split("\n\n> **Summary truncated**")[0]
    assert body.endswith(row)  # cut at a line end


def test_summary_limit_counts_what_the_step_already_wrote(tmp_path: Path) -> None:
    target = tmp_path / "summary"
    target.write_text("x" * 900)
    github.write_summary("y\n" * 200, path=target, limit=1000, note="n")
    assert len(target.read_bytes()) <= 1000
    assert target.read_text().startswith("x" * 900)


def test_truncation_drops_a_half_mermaid_chart_and_closes_details() -> None:
    md = (
        "# v\n<details><summary>findings</summary>\n\n"
        + "| f |\n" * 50
        + "```mermaid\ngantt\n"
        + "  start :a, 0, 1s\n" * 500
        + "```\n</details>\n"
    )
    out = summary.truncate_markdown(md, 2000, "see summary.md")
    assert len(out.encode()) <= 2000
    assert "```mermaid" not in out
    assert out.count("<details>") == out.count("</details>") == 1
    assert "| f |" in out


def test_truncation_keeps_a_whole_chart_before_the_cut() -> None:
    chart = "```mermaid\ngantt\n  a :a, 0, 1s\n```\n"
    md = chart + "| row |\n" * 1000
    out = summary.truncate_markdown(md, 1000, "n")
    assert out.startswith(chart)
    assert len(out.encode()) <= 1000


# ------------------------------------------------------------------------------------------
# annotations
# ------------------------------------------------------------------------------------------


def _ann(level: str, i: int, file: str | None = "Dockerfile") -> dict[str, object]:
    return {"level": level, "file": file, "line": i, "title": f"{level} {i}", "message": f"m{i}"}


def test_annotations_rank_errors_first_and_point_to_the_rest() -> None:
    items = (
        [_ann("notice", i) for i in range(1, 4)]
        + [_ann("warning", i) for i in range(1, 16)]
        + [_ann("error", i) for i in range(1, 13)]
    )
    ranked = github.rank_annotations(items, rest_hint="see lint.sarif")
    levels = [a.level for a in ranked]
    assert levels == ["error"] * 10 + ["warning"] * 10 + ["notice"] * 3
    assert [a.line for a in ranked[:9]] == list(range(1, 10))
    assert ranked[9].title == "servelab: 3 more errors"
    assert "see lint.sarif" in ranked[9].message and ranked[9].file is None
    assert ranked[19].title == "servelab: 6 more warnings"


def test_annotations_with_a_place_come_before_those_without() -> None:
    ranked = github.rank_annotations([_ann("error", 1, file=None), _ann("error", 2)])
    assert [(a.file, a.line) for a in ranked] == [("Dockerfile", 2), (None, 1)]


def test_exactly_ten_per_level_need_no_pointer() -> None:
    ranked = github.rank_annotations([_ann("warning", i) for i in range(1, 11)])
    assert len(ranked) == 10 and all("more" not in (a.title or "") for a in ranked)


def test_annotation_commands_are_escaped() -> None:
    stream = io.StringIO()
    n = github.annotate(
        [
            {
                "level": "error",
                "file": "dir,x/Dockerfile",
                "line": 3,
                "title": "rule: a, b",
                "message": "line1\n::warning::forged\r\n100%",
            }
        ],
        stream=stream,
    )
    assert n == 1
    lines = stream.getvalue().splitlines()
    assert lines == [
        "::error title=rule%3A a%2C b,file=dir%2Cx/Dockerfile,line=3::"
        "line1%0A::warning::forged%0D%0A100%25"
    ]


def test_unknown_levels_and_bad_lines_are_tamed() -> None:
    a = github.Annotation.from_mapping({"level": "fatal", "message": "x", "line": "7"})
    b = github.Annotation.from_mapping({"level": "info", "message": "x", "line": True})
    assert (a.level, a.line) == ("error", None)
    assert (b.level, b.line) == ("notice", None)
    assert github.Annotation(level="warning", message="m", line=3).command() == "::warning::m"


def test_stop_commands_wraps_untrusted_text() -> None:
    stream = io.StringIO()
    with github.stop_commands(stream):
        stream.write("::error::from a container log\n")
    first, middle, last = stream.getvalue().splitlines()
    token = first.removeprefix("::stop-commands::")
    assert len(token) == 32 and last == f"::{token}::"
    assert middle == "::error::from a container log"


# ------------------------------------------------------------------------------------------
# outputs from summary.json
# ------------------------------------------------------------------------------------------


def test_outputs_from_a_full_summary(tmp_path: Path) -> None:
    summary = {
        "verdict": "trade-off",
        "reproducible": True,
        "digest": "sha256:" + "a" * 64,
        "size_bytes": 1234,
        "startup_p50_s": 2.34567,
        "findings": {"CRITICAL": 1, "HIGH": 2, "MEDIUM": 3, "LOW": 4, "UNKNOWN": 5},
    }
    out = github.outputs_from_summary(summary, results_dir=tmp_path)
    assert out == {
        "verdict": "trade-off",
        "reproducible": "true",
        "digest": "sha256:" + "a" * 64,
        "size": "1234",
        "startup-p50": "2.346",
        "findings-critical": "1",
        "findings-high": "2",
        "findings-medium": "3",
        "findings-low": "4",
        "pulled-bytes-cold": "",
        "pulled-bytes-warm-base": "",
        "node-ready-cold": "",
        "node-ready-warm-base": "",
        "model-bytes-read": "",
        "summary-path": str(tmp_path / "summary.md"),
        "results-dir": str(tmp_path),
    }


def test_outputs_from_a_summary_with_nulls() -> None:
    summary = {
        "verdict": "invalid", "reproducible": None, "digest": None, "size_bytes": None,
        "startup_p50_s": None, "findings": {},
    }
    out = github.outputs_from_summary(summary)
    assert out["reproducible"] == out["digest"] == out["size"] == out["startup-p50"] == ""
    assert out["findings-critical"] == "0"
    assert "results-dir" not in out
    assert github.outputs_from_summary({"reproducible": False})["reproducible"] == "false"


def test_load_summary_errors_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="did not finish"):
        github.load_summary(tmp_path)
    (tmp_path / "summary.json").write_text("[1]")
    with pytest.raises(InputError, match="not a servelab summary"):
        github.load_summary(tmp_path)


# ------------------------------------------------------------------------------------------
# artifact plan
# ------------------------------------------------------------------------------------------


def _tree(root: Path, arms: list[str], repeats: int) -> None:
    for arm in arms:
        for n in range(1, repeats + 1):
            (root / arm / f"repeat-{n}").mkdir(parents=True)
            (root / arm / f"repeat-{n}" / "result.json").write_text("{}")
    (root / "summary.md").write_text("#")
    (root / "summary.json").write_text(summary_json())
    (root / "lint-treatment.sarif").write_text("{}")  # a file, not an arm
    (root / arms[0] / "repeat-x").mkdir()


def test_plan_interleaves_arms_and_names_each_repeat(tmp_path: Path) -> None:
    _tree(tmp_path, ["control", "treatment"], 11)  # repeat-10 sorts after repeat-9
    plan = github.artifact_plan(
        tmp_path, prefix="servelab-ubuntu-24.04", job="experiment", arms=["control", "treatment"]
    )
    names = [n for n, _ in plan.repeats]
    assert len(names) == github.MAX_ARTIFACT_SLOTS == len(set(names))
    assert names[:3] == [
        "servelab-ubuntu-24.04-experiment-control-repeat-1",
        "servelab-ubuntu-24.04-experiment-treatment-repeat-1",
        "servelab-ubuntu-24.04-experiment-control-repeat-2",
    ]
    assert names[-1] == "servelab-ubuntu-24.04-experiment-treatment-repeat-10"
    assert plan.overflow == [tmp_path / "control/repeat-11", tmp_path / "treatment/repeat-11"]
    assert plan.overflow_name == "servelab-ubuntu-24.04-experiment-overflow"
    assert plan.summary_paths == [
        tmp_path / "lint-treatment.sarif", tmp_path / "summary.json", tmp_path / "summary.md",
    ]


def test_plan_names_are_sanitised_and_unique(tmp_path: Path) -> None:
    _tree(tmp_path, ["a:b", "a-b"], 1)
    plan = github.artifact_plan(tmp_path, prefix='x"$(id)/\\*?<>|', job="j\nk", attempt=2)
    names = [n for n, _ in plan.repeats]
    assert len(set(names)) == 2
    for name in [*names, plan.summary_name]:
        assert all(c.isalnum() or c in "._-" for c in name), name
        assert "-attempt-2" in name


def test_plan_outputs(tmp_path: Path) -> None:
    _tree(tmp_path, ["control", "treatment"], 1)
    plan = github.artifact_plan(tmp_path, prefix="p", job="j", arms=["control", "treatment"])
    out = github.plan_outputs(plan)
    assert out["artifact-count"] == "2"
    assert out["artifact-path-2"] == str(tmp_path / "treatment/repeat-1")
    assert out["summary-artifact-name"] == "p-j-summary"
    assert out["summary-artifact-paths"].splitlines() == [
        str(tmp_path / f) for f in ("lint-treatment.sarif", "summary.json", "summary.md")
    ]
    assert out["overflow-artifact-name"] == "" and out["overflow-count"] == "0"
    assert out["artifact-names"].splitlines() == [
        "p-j-control-repeat-1", "p-j-treatment-repeat-1", "p-j-summary",
    ]


def test_action_outputs_with_overflow_warns(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    _tree(results, ["control", "treatment"], 2)
    (results / "summary.json").write_text(summary_json(verdict="improved"))
    out_file = tmp_path / "out"
    stream = io.StringIO()
    outputs = github.action_outputs(
        results, prefix="p", job="j", slots=3, stream=stream,
        env={"GITHUB_OUTPUT": str(out_file)},
    )
    parsed = parse_output_file(out_file.read_text())
    assert parsed == outputs
    assert parsed["verdict"] == "improved" and parsed["artifact-count"] == "3"
    assert parsed["overflow-artifact-paths"] == str(results / "treatment/repeat-2")
    assert stream.getvalue().startswith("::warning title=servelab%3A more repeats")


def test_action_outputs_without_upload_plan_nothing(tmp_path: Path) -> None:
    _tree(tmp_path, ["control", "treatment"], 1)
    out_file = tmp_path / "out"
    outputs = github.action_outputs(
        tmp_path, prefix="p", job="j", upload=False, env={"GITHUB_OUTPUT": str(out_file)}
    )
    assert outputs["artifact-count"] == "0"
    assert outputs["artifact-names"] == outputs["summary-artifact-name"] == ""
    assert "artifact-path-1" not in outputs


# ------------------------------------------------------------------------------------------
# entry points
# ------------------------------------------------------------------------------------------


def test_publish_run_writes_outputs_summary_and_annotations(tmp_path: Path) -> None:
    """The stand-in writes a results tree as `servelab run` does; publish it."""
    results = tmp_path / "results"
    exe = write_standin(tmp_path / "bin")
    subprocess.run([str(exe), "run", "--out", str(results), "x.yaml"], check=True, timeout=60)
    env = {"GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": str(tmp_path / "sum")}
    stream = io.StringIO()
    github.publish_run(results, stream=stream, env=env)
    outputs = parse_output_file((tmp_path / "out").read_text())
    assert outputs["verdict"] == "trade-off" and outputs["results-dir"] == str(results)
    assert (tmp_path / "sum").read_text() == (results / "summary.md").read_text()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("::error ")
    assert sum(line.startswith("::warning ") for line in lines) == 10
    assert "servelab%3A 3 more warnings" in lines[-1]


def test_hidden_command_writes_outputs(tmp_path: Path) -> None:
    _tree(tmp_path / "r", ["control", "treatment"], 1)
    (tmp_path / "r" / "summary.json").write_text(summary_json(verdict="regressed"))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "action-outputs",
         f"--results-dir={tmp_path / 'r'}", "--prefix=p", "--job=j", "--attempt=1",
         "--upload=TRUE"],
        env={"GITHUB_OUTPUT": str(out), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    parsed = parse_output_file(out.read_text())
    assert parsed["verdict"] == "regressed" and parsed["artifact-name-1"] == "p-j-control-repeat-1"


def test_hidden_command_reports_errors_as_annotations(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "action-outputs",
         f"--results-dir={tmp_path}"],
        env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout.startswith("::error title=servelab::GITHUB_OUTPUT is not set")


# ------------------------------------------------------------------------------------------
# a run that stopped before its summary: exit 2 and 3, reported in the action's terms
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("hint", "expected"), [
    ("pass a reachable mirror with --db-repository (tried in order), or restore a cached DB "
     "and use --offline",
     "pass a reachable mirror with the `trivy-db-repositories` input (tried in order), or "
     'restore a cached DB and use `offline: "true"`'),
    ("keep the Trivy cache directory between runs (actions/cache on --cache-dir), run once "
     "without --offline to download the DB, or pass --db-repository MIRROR",
     "keep the Trivy cache directory between runs (actions/cache on the `trivy-cache-dir` "
     'input), run once without `offline: "true"` to download the DB, or pass a mirror in the '
     "`trivy-db-repositories` input"),
    ("run on a machine with an NVIDIA GPU and driver, or --no-gpu to skip the GPU checks",
     'run on a machine with an NVIDIA GPU and driver, or `gpu: "false"` to skip the GPU checks'),
    ("raise --max-db-age / scan.maxDbAgeHours", "raise scan.maxDbAgeHours"),
    ("--repeats must be between 1 and 50; --gpu-probe stays", "the `repeats` input must be "
     "between 1 and 50; --gpu-probe stays"),
])
def test_hints_name_the_actions_inputs(hint: str, expected: str) -> None:
    assert github.action_hint(hint) == expected


def test_matrix_leg() -> None:
    assert github.matrix_leg('{"runner": "ubuntu-24.04", "shard": 1}', "0", "4") == \
        "ubuntu-24.04-1"
    assert github.matrix_leg('{"os": ["a", "b"]}', "1", "2") == "a-b"
    assert github.matrix_leg("null", "0", "1") == ""  # not a matrix
    assert github.matrix_leg("{}", "2", "3") == "leg-2"
    assert github.matrix_leg("not json", "2", "3") == "leg-2"
    assert github.matrix_leg('{"x": "' + "y" * 60 + '"}', "7", "9") == "leg-7"
    act = {github.matrix_leg("null", "", "") for _ in range(5)}
    assert len(act) == 5 and all(x.startswith("run-") and len(x) == 10 for x in act)


def _servelab_run(tmp: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The real `servelab run`, its output captured as the action's run step keeps it."""
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "run", *args], capture_output=False,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, check=False,
        env={**os.environ, **(env or {})}, cwd=ROOT)
    return proc.returncode, proc.stdout


@pytest.mark.trivy
@pytest.mark.registry
def test_a_real_exit_3_is_reported_where_github_shows_it(
        tmp_path: Path, base_image: str) -> None:
    """The Trivy DB cannot be downloaded (the only mirror is a closed loopback port): exit 3,
    no summary.json; the action's step reports it with the fix in its inputs' words."""
    exp = tmp_path / "scan-only.yaml"
    exp.write_text(
        "apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: scan-only}\n"
        "spec:\n  change: scan a prebuilt image\n  fixed: [input]\n  metrics: [findings]\n"
        f"  repeats: 1\n  treatment: {{image: \"{base_image}\"}}\n")
    results = tmp_path / "results"
    code, log = _servelab_run(tmp_path, str(exp), f"--out={results}", "--stages=scan",
                              f"--trivy-cache-dir={tmp_path / 'empty-cache'}",
                              "--db-repository=127.0.0.1:9/servelab/trivy-db:2")
    assert code == 3, log
    assert not (results / "summary.json").exists()
    env = {"GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": str(tmp_path / "sum")}
    stream = io.StringIO()
    github.action_outputs(results, prefix="servelab", job="experiment", exit_code=code,
                          log_text=log, stream=stream, env=env)
    (line,) = stream.getvalue().splitlines()
    assert line.startswith("::error title=servelab stopped (exit 3) in the scan stage of "
                           "treatment repeat 1::the Trivy DB could not be downloaded")
    assert "the `trivy-db-repositories` input" in line and "--db-repository" not in line
    job_summary = (tmp_path / "sum").read_text()
    assert job_summary == (results / "summary.md").read_text()
    assert "connection refused" in job_summary
    assert "**Where:** in the scan stage of treatment repeat 1." in job_summary
    outputs = parse_output_file((tmp_path / "out").read_text())
    assert outputs["summary-path"] == str(results / "summary.md")
    assert outputs["verdict"] == "" and outputs["summary-artifact-name"] == \
        "servelab-experiment-summary"


def test_a_real_invalid_experiment_is_annotated_once_per_problem(tmp_path: Path) -> None:
    """exit 2: servelab run itself annotates each problem (file, line); the report adds the
    job summary but no second annotation."""
    bad = "tests/data/spec/invalid/native-port.yaml"
    results = tmp_path / "results"
    code, log = _servelab_run(tmp_path, bad, f"--out={results}",
                              env={"GITHUB_ACTIONS": "true"})
    assert code == 2
    assert f"::error file={bad},line=6" in log
    env = {"GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": str(tmp_path / "sum")}
    stream = io.StringIO()
    github.action_outputs(results, prefix="p", job="j", exit_code=code, log_text=log,
                          roots=[ROOT], stream=stream, env=env)
    assert stream.getvalue() == ""
    job_summary = (tmp_path / "sum").read_text()
    assert job_summary.startswith("# servelab: ⛔ stopped (exit 2: bad input")
    assert "- nothing yet: it stopped before the first stage" in job_summary


def test_an_input_error_names_its_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "exp.yaml").write_text("x: 1\n")
    log = ("servelab run: exp.yaml:3: treatment.buildArgsFile 'b.env' does not exist\n"
           "  fix: run scripts/bootstrap.sh (it writes examples/build-args.env) or fix the path\n")
    report = github.stop_report(2, log, roots=[tmp_path])
    assert (report.file, report.line) == (str(tmp_path / "exp.yaml"), 3)
    ann = report.annotation().in_workspace(tmp_path)
    assert (ann.file, ann.line) == ("exp.yaml", 3)
    # a message that only looks like a place is not one
    report = github.stop_report(3, "servelab run: command failed with exit code 1: trivy\n",
                                roots=[tmp_path])
    assert report.file is None


def test_a_stop_without_an_error_message_shows_the_log_tail(tmp_path: Path) -> None:
    log = "servelab: [control 1/1] start\nservelab:   build ...\nSegmentation fault\n"
    report = github.stop_report(139, log)
    md = report.markdown()
    assert "servelab run exited with 139 and printed no error" in md
    assert "**Where:** in the build stage of control repeat 1." in md
    assert "Segmentation fault" in md and "<details><summary>The log's last lines" in md
    assert report.annotation().title == \
        "servelab stopped (exit 139) in the build stage of control repeat 1"


def test_a_log_cannot_close_the_summary_code_block() -> None:
    md = github.stop_report(3, "servelab run: bad ```\n```\n# injected heading\n").markdown()
    body = md.split("**What stopped it:**", 1)[1].split("**Fix:**", 1)[0]
    # a fence longer than any backtick run of the log (servelab.escape.md_fence): CommonMark
    # reads one code block holding the log, and no heading
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(body)
    assert [t.type for t in tokens if t.type in ("fence", "heading_open")] == ["fence"]
    assert "# injected heading" in next(t.content for t in tokens if t.type == "fence")
