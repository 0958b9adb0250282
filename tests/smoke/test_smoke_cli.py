"""servelab smoke on the command line: options, exit codes, output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab.cli import main

BAD_INPUT = [
    ["--model-sha256", "xyz", "--model", "."],
    ["--expect-json", "{nope", "--request-path", "/p"],
    ["--request-count", "3"],
    ["--model-sha256", "a" * 64],
    ["--env", "NOEQUALS"],
    ["--writable", "relative/path"],
    ["--starts", "0"],
    ["--timeout", "0"],
]


@pytest.mark.parametrize("extra", BAD_INPUT, ids=lambda x: x[0])
def test_bad_options_exit_2(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["smoke", "some-image", *extra]) == 2
    err = capsys.readouterr().err
    assert "servelab smoke" in err and "Traceback" not in err


def test_help_explains_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["smoke", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Exit codes" in out and "--network" in out and "read-only" in out


@pytest.mark.docker
@pytest.mark.registry
def test_cli_json_two_starts(fixture_images: Callable[[str], str], model_dir: Path,
                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", fixture_images("good"), "--model", str(model_dir),
                 "--request-path", "/predict", "--request-body", '{"inputs": [1, 2, 3]}',
                 "--expect-json", '{"prediction": 3.1}', "--request-count", "2",
                 "--starts", "2", "--no-weights-scan", "--out", str(tmp_path / "o"),
                 "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["exit_code"] == 0
    assert [s["verdict"] for s in doc["starts"]] == ["pass", "pass"]
    assert [s["first_start"] for s in doc["starts"]] == [True, False]
    assert doc["summary"]["first_start_ready_s"] > 0
    assert len(doc["summary"]["later_starts_ready_s"]) == 1
    for n in (1, 2):
        d = tmp_path / "o" / f"start-{n}"
        assert {p.name for p in d.iterdir()} == {"smoke.json", "container.log",
                                                 "probe-events.jsonl"}


@pytest.mark.docker
@pytest.mark.registry
def test_cli_text_failure_and_missing_model(fixture_images: Callable[[str], str],
                                            model_dir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", fixture_images("crash"), "--model", str(model_dir),
                 "--no-weights-scan"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL [crashed]" in out and "exit code 3" in out and "crashes on purpose" in out
    assert main(["smoke", fixture_images("good"), "--model", "/no/such/model"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.docker
@pytest.mark.registry
def test_cli_gpu_unavailable_exits_3(fixture_images: Callable[[str], str], model_dir: Path,
                                     docker_client: Any,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["smoke", fixture_images("good"), "--model", str(model_dir), "--gpu",
                 "--no-weights-scan", "--run-id", "test-gpu-cli"])
    out = capsys.readouterr().out
    assert code == 3
    assert "FAIL [gpu-unavailable]" in out and "GPU unavailable" in out
    assert docker_client.api.containers(
        all=True, filters={"label": "servelab.run-id=test-gpu-cli"}) == []


@pytest.mark.docker
@pytest.mark.registry
def test_two_runs_at_once_do_not_collide(fixture_images: Callable[[str], str], model_dir: Path,
                                         tmp_path: Path, docker_client: Any) -> None:
    """Two servelab processes smoke one image at the same moment: each sweeps at start, yet
    neither removes the other's containers, both pass, and nothing is left."""
    import subprocess
    import sys

    def start(n: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "servelab", "smoke", fixture_images("good"), "--model",
             str(model_dir), "--starts", "2", "--no-weights-scan", "--format", "json",
             "--out", str(tmp_path / f"run-{n}")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    procs = [start(1), start(2)]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        docs.append(json.loads(out))
    assert docs[0]["run_id"] != docs[1]["run_id"]
    assert all(s["verdict"] == "pass" for d in docs for s in d["starts"])
    names = {s["container"]["name"] for d in docs for s in d["starts"]}
    assert len(names) == 4  # every start had a container of its own
    for d in docs:
        left = docker_client.api.containers(
            all=True, filters={"label": f"servelab.run-id={d['run_id']}"})
        assert left == []
