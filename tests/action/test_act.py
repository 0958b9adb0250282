"""The composite action run by nektos/act on the host, as a workflow step `uses: ./`.

act runs with ``-P self-hosted=-self-hosted --pull=false --no-cache-server`` and
``ACT_DISABLE_VERSION_CHECK=1``. Still, act asks the kernel for a route to 8.8.8.8 (a UDP
connect, no packet) to pick a default bind address; so where ``unshare --net`` works (root),
the plumbing test runs act in a network namespace that has no interface but a loopback.

act cannot fetch third-party actions here; ``--local-repository`` replaces each pinned one with
a local stand-in that records its inputs (setup-python and cache are switched off by their
inputs and must not run; upload-artifact stores the artifact under the record directory).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

import pytest
from action_testlib import BIN, act_workflow, can_isolate_network, run_act, write_standin

pytestmark = [pytest.mark.act]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("exit_code", "outcome"), [(0, "success"), (1, "failure")])
def test_action_plumbing_under_act(tmp_path: Path, exit_code: int, outcome: str) -> None:
    """A stand-in `servelab run` (documented interface): inputs, outputs, one artifact/repeat."""
    canary = tmp_path / "canary"
    experiment = f"examples/x $(touch {canary}) `touch {canary}`; touch {canary}.yaml"
    bin_dir = tmp_path / "bin"
    write_standin(bin_dir)
    workflow = act_workflow(
        {
            "experiment": experiment,
            "install": "false",
            "python-version": "",
            "repeats": "3",
            "trivy-cache-dir": str(tmp_path / "trivy"),
            "cache-trivy-db": "false",
            "trivy-db-repositories": "mirror.example/a,\nmirror.example/b",
            "artifact-prefix": "servelab-matrix-key",
        }
    )
    run = run_act(
        tmp_path,
        workflow,
        env={
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "SERVELAB_STANDIN_RECORD": str(tmp_path / "record" / "argv.json"),
            "SERVELAB_STANDIN_EXIT": str(exit_code),
        },
        isolate=can_isolate_network(),
        timeout=300,
    )
    assert run.returncode == 0, run.log[-4000:]  # continue-on-error: the job itself passes
    assert not canary.exists()
    argv = run.json("argv.json")["argv"]
    assert argv[-2:] == ["--", experiment]
    assert "--db-repository=mirror.example/a" in argv and "--repeats=3" in argv
    assert (run.record / "outcome.txt").read_text() == outcome  # the exit code follows
    outputs = run.json("outputs.json")
    assert outputs["exit-code"] == str(exit_code)
    assert outputs["verdict"] == "trade-off" and outputs["reproducible"] == "true"
    assert outputs["findings-critical"] == "1" and outputs["startup-p50"] == "1.500"
    # act gives composite actions no strategy context: a random part stands in for the leg
    m = re.fullmatch(r"(servelab-matrix-key-experiment-run-[0-9a-f]{6})-summary",
                     outputs["summary-artifact"])
    assert m, outputs["summary-artifact"]
    stem = m.group(1)
    names = outputs["artifacts"].splitlines()
    uploads = run.jsonl("upload-artifact")
    assert [u["name"] for u in uploads] == names
    assert len(names) == 7 == len(set(names))  # 3 repeats x 2 arms + the summary
    assert names[0] == f"{stem}-control-repeat-1"
    for arm in ("control", "treatment"):
        for n in (1, 2, 3):
            stored = run.record / "artifacts" / f"{stem}-{arm}-repeat-{n}"
            stored_result = json.loads((stored / "result.json").read_text())
            assert (stored_result["arm"], stored_result["repeat"]) == (arm, n)
    # the run's log goes into the summary artifact, beside summary.md
    assert (run.record / "artifacts" / outputs["summary-artifact"] / "servelab-run.log").is_file()
    # the step that ran servelab fails with its code (not a later step)
    assert ("Failure - Main Run the experiment" in run.log) == (exit_code != 0)
    assert run.jsonl("setup-python") == [] and run.jsonl("cache") == []
    # annotations from servelab's glue, ranked and capped: 1 error, 9 warnings + a pointer
    assert run.log.count("::error title=e,file=Dockerfile,line=1::bad") == 1
    assert "servelab%3A 3 more warnings" in run.log
    assert run.seconds < 60


def test_a_run_that_stops_explains_itself_under_act(tmp_path: Path) -> None:
    """servelab run stops with exit 3 before its summary (the stand-in, as the real one does
    when the Trivy DB cannot be downloaded): the step that ran it fails with 3, one ::error
    names the cause and the fix in the action's inputs, the job summary says what ran and what
    stopped it, and summary-path points at that report in the summary artifact."""
    bin_dir = tmp_path / "bin"
    write_standin(bin_dir)
    workflow = act_workflow({"experiment": "e.yaml", "install": "false", "python-version": "",
                             "cache-trivy-db": "false"})
    run = run_act(
        tmp_path, workflow,
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "SERVELAB_STANDIN_STOP": "1"},
        isolate=can_isolate_network(), timeout=300,
    )
    assert run.returncode == 0, run.log[-4000:]  # continue-on-error: the job itself passes
    assert (run.record / "outcome.txt").read_text() == "failure"
    assert "Failure - Main Run the experiment" in run.log
    outputs = run.json("outputs.json")
    assert outputs["exit-code"] == "3" and outputs["verdict"] == ""
    errors = [x for x in run.log.splitlines() if "::error title=servelab stopped" in x]
    assert len(errors) == 1, run.log[-4000:]
    assert ("::error title=servelab stopped (exit 3) in the scan stage of control repeat 1::"
            "the Trivy DB could not be downloaded") in errors[0]
    assert "the `trivy-db-repositories` input" in errors[0]
    stored = run.record / "artifacts" / outputs["summary-artifact"]
    report = (stored / "summary.md").read_text()
    assert report.startswith("# servelab: ⛔ stopped (exit 3")
    assert "**Where:** in the scan stage of control repeat 1." in report
    # act prints each step's job summary into its log: the report is the job summary
    assert "# servelab: ⛔ stopped (exit 3: a missing tool" in run.log
    assert "servelab run: the Trivy DB" in (stored / "servelab-run.log").read_text()
    assert outputs["summary-path"].endswith("/summary.md")


@pytest.mark.docker
@pytest.mark.trivy
@pytest.mark.registry
@pytest.mark.slow
def test_action_on_the_bundled_example_under_act(
    tmp_path: Path, docker_client: object, base_image: str, fixture_trivy_cache: Path
) -> None:
    """The real `servelab run` on examples/experiment.yaml (2 repeats), through the action."""
    start = time.monotonic()
    workflow = act_workflow(
        {
            "experiment": "examples/experiment.yaml",
            "repeats": "2",
            "install": "false",
            "python-version": "",
            "trivy-cache-dir": str(fixture_trivy_cache),
            "cache-trivy-db": "false",
            "offline": "true",
        },
        # set-up writes it (the base image's digest); it is not in the repository
        setup='cp "$BUILD_ARGS" examples/build-args.env',
    )
    run = run_act(
        tmp_path,
        workflow,
        env={"PATH": f"{BIN}:{os.environ['PATH']}",
             "BUILD_ARGS": str(ROOT / "examples" / "build-args.env")},
        isolate=False,  # servelab talks to the local registry on the host's loopback
        timeout=1500,
    )
    assert run.returncode == 0, run.log[-6000:]
    outputs = run.json("outputs.json")
    assert outputs["exit-code"] in ("0", "1"), run.log[-6000:]
    assert (run.record / "outcome.txt").read_text() == (
        "success" if outputs["exit-code"] == "0" else "failure"
    )
    assert outputs["verdict"] in ("improved", "trade-off", "no detectable change", "regressed")
    assert outputs["reproducible"] == "true"
    assert outputs["digest"].startswith("sha256:") and len(outputs["digest"]) == 71
    assert int(outputs["size"]) > 1_000_000
    assert float(outputs["startup-p50"]) > 0
    for level in ("critical", "high", "medium", "low"):
        assert int(outputs[f"findings-{level}"]) >= 0
    summary_artifact = run.record / "artifacts" / outputs["summary-artifact"]
    summary_md = (summary_artifact / "summary.md").read_text()
    assert summary_md.startswith("# servelab:") and "```mermaid" in summary_md
    summary = json.loads((summary_artifact / "summary.json").read_text())
    assert summary["digest"] == outputs["digest"]
    names = outputs["artifacts"].splitlines()
    assert len(names) == 5 == len(set(names))  # 2 repeats x 2 arms + the summary
    stem = outputs["summary-artifact"].removesuffix("-summary")
    for arm in ("control", "treatment"):
        for n in (1, 2):
            stored = run.record / "artifacts" / f"{stem}-{arm}-repeat-{n}"
            result = json.loads((stored / "result.json").read_text())
            assert (result["arm"], result["repeat"]) == (arm, n)
            for name in ("trivy.json", "scan.sarif", "sbom.cdx.json", "container.log"):
                assert (stored / name).is_file(), f"{stored.name} lacks {name}"
    treatment = json.loads(
        (run.record / "artifacts" / f"{stem}-treatment-repeat-1" / "result.json")
        .read_text()
    )
    assert treatment["image"]["digest"] == outputs["digest"]
    assert run.jsonl("setup-python") == [] and run.jsonl("cache") == []
    _progress_within_bound(run.log, run.record / "artifacts", stem)
    (tmp_path / "seconds.txt").write_text(f"{time.monotonic() - start:.1f}\n")


def _progress_within_bound(log: str, artifacts: Path, stem: str) -> None:
    """Under act (GITHUB_ACTIONS=true, output piped) each build logs plain lines of progress:
    at most its steps (build.log's vertices) + ceil(its seconds / 10 s) + 5 (issue 27), and,
    since issue 34, a step only once it has run logs.QUIET_S seconds (never one a layer or
    an instruction that is quick), each line at most logs.LINE_MAX characters, ending in the
    build's own "done" line."""
    from servelab.logs import LINE_MAX

    shown = [x.split("| ", 1)[1] for x in log.splitlines() if "| servelab: build " in x]
    assert shown, log[-3000:]
    assert all("\r" not in x and "\x1b" not in x for x in shown)
    for arm in ("control", "treatment"):
        for n in (1, 2):
            stored = artifacts / f"{stem}-{arm}-repeat-{n}"
            lines = [x for x in shown if x.startswith(f"servelab: build {arm} #{n}")]
            build_log = (stored / "build.log").read_text()
            vertices = {m.group(1) for m in re.finditer(r"^#(\d+) ", build_log, re.M)}
            result = json.loads((stored / "result.json").read_text())
            seconds = result["metrics"]["build_seconds"]
            assert all(len(x) <= LINE_MAX for x in lines), lines
            assert lines[-1].startswith(f"servelab: build {arm} #{n}: done in "), lines
            assert len(lines) <= len(vertices) + math.ceil(seconds / 10) + 5, lines


@pytest.mark.slow
def test_install_true_builds_a_venv_from_the_action_checkout(tmp_path: Path) -> None:
    """The default install path: a venv in RUNNER_TEMP, pip install of the action's own
    checkout with [tools], then the run. pip reads only set-up's wheelhouse
    (PIP_NO_INDEX, PIP_FIND_LINKS): no registry is reached. The experiment is invalid, so the
    run that follows is short: exit 2 with the file named."""
    wheels = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup")) / "wheelhouse"
    if not (wheels / ".servelab-wheelhouse").is_file():
        pytest.skip(f"no wheelhouse at {wheels}: scripts/bootstrap.sh makes it")
    bad = "tests/data/spec/invalid/native-port.yaml"
    workflow = act_workflow({"experiment": bad, "install": "true", "python-version": "",
                             "cache-trivy-db": "false", "upload-artifacts": "false"})
    run = run_act(
        tmp_path, workflow,
        env={"PATH": os.environ["PATH"], "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)},
        isolate=can_isolate_network(), timeout=600,
    )
    assert run.returncode == 0, run.log[-6000:]
    outputs = run.json("outputs.json")
    assert outputs["servelab"].endswith("/servelab-venv/bin/servelab"), outputs
    assert outputs["exit-code"] == "2", run.log[-6000:]
    assert (run.record / "outcome.txt").read_text() == "failure"
    assert f"::error file={bad},line=6" in run.log  # the annotation names file and line
    assert "Success - Main Install servelab" in run.log
