"""Hostile inputs reach the CLI as plain strings and execute nothing.

Each shell step of action.yml is run as GitHub runs it (``bash --noprofile --norc -eo pipefail``)
with its ``env:`` filled with strings holding ``$(...)``, backticks, ``;``, quotes, globs and
newlines. A stand-in ``servelab`` records the argv it gets; a canary file must never appear.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from action_testlib import load_action, parse_output_file, step_by_id, write_standin


def hostile(canary: Path) -> list[str]:
    return [
        f"$(touch {canary})",
        f"`touch {canary}`",
        f"x; touch {canary}; #",
        f"x' \"; touch {canary}; echo \"'",
        f"a\ntouch {canary}\n--out=/evil",
        "${IFS}$HOME*?[a]",
        "-rf --gpu",
    ]


def run_step(step_id: str, env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    script = tmp / f"{step_id}.sh"
    script.write_text(step_by_id(load_action(), step_id)["run"])
    full = {
        "PATH": f"{tmp / 'bin'}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp / "runner-temp"),
        "GITHUB_WORKSPACE": str(tmp / "workspace"),
        "GITHUB_OUTPUT": str(tmp / "github-output"),
        "RUNNER_OS": "Linux",
    }
    for d in ("runner-temp", "workspace"):
        (tmp / d).mkdir(exist_ok=True)
    (tmp / "github-output").touch()
    full.update(env)
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=tmp / "workspace", env=full, capture_output=True, text=True, timeout=120,
        check=False,
    )


def outputs(tmp: Path) -> dict[str, str]:
    return parse_output_file((tmp / "github-output").read_text())


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    return write_standin(tmp_path / "bin")


def _run_env(standin: Path, value: str, workdir: Path, record: Path) -> dict[str, str]:
    return {
        "SERVELAB_BIN": str(standin),
        "SERVELAB_STANDIN_RECORD": str(record),
        "SERVELAB_EXPERIMENT": value,
        "SERVELAB_WORKING_DIRECTORY": str(workdir),
        "SERVELAB_REPEATS": value,
        "SERVELAB_STAGES": value,
        "SERVELAB_FAIL_ON": value,
        "SERVELAB_GPU": "",
        "SERVELAB_TRIVY_CACHE_DIR": value,
        "SERVELAB_TRIVY_DB_REPOSITORIES": f" mirror.example/db ,{value}\n\n",
        "SERVELAB_OFFLINE": "",
        "SERVELAB_ARTIFACT_PREFIX": value,
        "GITHUB_JOB": value,
    }


@pytest.mark.parametrize("index", range(7))
def test_run_step_passes_inputs_as_plain_arguments(
    tmp_path: Path, standin: Path, index: int
) -> None:
    canary = tmp_path / "canary"
    value = hostile(canary)[index]
    workdir = tmp_path / f"work {value.splitlines()[0]}".replace("/", "|")
    workdir.mkdir()
    record = tmp_path / "argv.json"
    proc = run_step("run", _run_env(standin, value, workdir, record), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not canary.exists()
    got = json.loads(record.read_text())
    out = outputs(tmp_path)
    db = [r.strip() for r in value.replace(",", "\n").splitlines() if r.strip()]
    cache = value if value.startswith("/") else f"{tmp_path / 'workspace'}/{value}"
    assert got["argv"] == [
        "run",
        f"--out={out['results-dir']}",
        f"--repeats={value}",
        f"--stages={value}",
        f"--fail-on={value}",
        f"--trivy-cache-dir={cache}",
        f"--run-name={value}-{value}",
        "--db-repository=mirror.example/db",
        *[f"--db-repository={r}" for r in db],
        "--",
        value,
    ]
    assert got["cwd"] == str(workdir)
    assert out["exit-code"] == "2"  # the stand-in's argparse refuses such a --repeats


def test_run_step_maps_gpu_and_skips_empty_inputs(tmp_path: Path, standin: Path) -> None:
    record = tmp_path / "argv.json"
    env = _run_env(standin, "", tmp_path, record)
    env.update({"SERVELAB_EXPERIMENT": "e.yaml", "SERVELAB_GPU": "False",
                "SERVELAB_TRIVY_DB_REPOSITORIES": "", "SERVELAB_OFFLINE": "True",
                "SERVELAB_ARTIFACT_PREFIX": "servelab", "GITHUB_JOB": "experiment"})
    assert run_step("run", env, tmp_path).returncode == 0
    argv = json.loads(record.read_text())["argv"]
    assert argv[0] == "run"
    assert argv[2:] == ["--no-gpu", "--offline", "--run-name=servelab-experiment", "--", "e.yaml"]
    assert outputs(tmp_path)["exit-code"] == "0"


@pytest.mark.parametrize("which", ["GPU", "OFFLINE"])
@pytest.mark.parametrize("value", ["yes", "$(touch CANARY)", "true\n--x"])
def test_run_step_refuses_a_bad_switch(
    tmp_path: Path, standin: Path, which: str, value: str
) -> None:
    record = tmp_path / "argv.json"
    env = _run_env(standin, "e.yaml", tmp_path, record)
    env[f"SERVELAB_{which}"] = value.replace("CANARY", str(tmp_path / "canary"))
    proc = run_step("run", env, tmp_path)
    assert proc.returncode == 2
    assert f"the {which.lower()} input must be true, false or empty" in proc.stdout
    assert not record.exists() and not (tmp_path / "canary").exists()


def test_run_step_records_a_failing_exit_code(tmp_path: Path, standin: Path) -> None:
    env = _run_env(standin, "", tmp_path, tmp_path / "argv.json")
    env.update({"SERVELAB_EXPERIMENT": "e.yaml", "SERVELAB_STANDIN_EXIT": "1",
                "SERVELAB_TRIVY_DB_REPOSITORIES": ""})
    assert run_step("run", env, tmp_path).returncode == 0
    assert outputs(tmp_path)["exit-code"] == "1"


# ------------------------------------------------------------------------------------------
# install
# ------------------------------------------------------------------------------------------

FAKE_PYTHON = """\
#!{python}
# Records its argv; `-m venv DIR` makes DIR/bin/python (this script) and DIR/bin/servelab.
import json, os, shutil, sys
with open(os.environ["FAKE_PYTHON_RECORD"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["-m", "venv"]:
    bin_dir = os.path.join(sys.argv[3], "bin")
    os.makedirs(bin_dir)
    shutil.copy(__file__, os.path.join(bin_dir, "python"))
    shutil.copy({standin!r}, os.path.join(bin_dir, "servelab"))
"""


def test_install_step_passes_the_action_path_as_one_argument(
    tmp_path: Path, standin: Path
) -> None:
    canary = tmp_path / "workspace" / "canary"  # the step runs in the workspace
    action_path = tmp_path / "action $(touch canary) `touch canary`;'\"; touch canary"
    action_path.mkdir()
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable, standin=str(standin)))
    fake.chmod(0o755)
    record = tmp_path / "python.jsonl"
    proc = run_step(
        "install",
        {"SERVELAB_INSTALL": "TRUE", "SERVELAB_SETUP_PYTHON": str(fake),
         "GITHUB_ACTION_PATH": str(action_path), "FAKE_PYTHON_RECORD": str(record)},
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert not canary.exists()
    venv = tmp_path / "runner-temp" / "servelab-venv"
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert calls == [
        ["-m", "venv", str(venv)],
        ["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet",
         f"{action_path}[tools]"],
    ]
    assert outputs(tmp_path) == {
        "servelab": str(venv / "bin" / "servelab"), "python": str(venv / "bin" / "python"),
    }


def test_install_false_uses_the_servelab_on_path(tmp_path: Path, standin: Path) -> None:
    proc = run_step("install", {"SERVELAB_INSTALL": "false", "SERVELAB_SETUP_PYTHON": ""},
                    tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "stand-in" in proc.stdout  # servelab --version ran
    assert outputs(tmp_path) == {"servelab": str(standin), "python": sys.executable}


def test_install_false_without_servelab_is_exit_3(tmp_path: Path) -> None:
    proc = run_step("install", {"SERVELAB_INSTALL": "false", "PATH": "/usr/bin:/bin"}, tmp_path)
    assert proc.returncode == 3
    assert "servelab is not on PATH" in proc.stdout


@pytest.mark.parametrize("value", ["yes", "$(touch CANARY)", "false; touch CANARY"])
def test_install_refuses_other_values(tmp_path: Path, value: str) -> None:
    canary = tmp_path / "canary"
    proc = run_step("install", {"SERVELAB_INSTALL": value.replace("CANARY", str(canary))},
                    tmp_path)
    assert proc.returncode == 2 and not canary.exists()
    assert outputs(tmp_path) == {}


# ------------------------------------------------------------------------------------------
# publish, cache key, verdict
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(7))
def test_publish_step_sanitises_artifact_names(tmp_path: Path, standin: Path, index: int) -> None:
    canary = tmp_path / "canary"
    value = hostile(canary)[index]
    results = tmp_path / "results"
    subprocess.run([str(standin), "run", f"--out={results}", "e.yaml"], check=True, timeout=60)
    proc = run_step(
        "publish",
        {"SERVELAB_PYTHON": sys.executable, "SERVELAB_RESULTS_DIR": str(results),
         "SERVELAB_ARTIFACT_PREFIX": value, "SERVELAB_UPLOAD_ARTIFACTS": value,
         "GITHUB_JOB": value, "GITHUB_RUN_ATTEMPT": "1"},
        tmp_path,
    )
    assert not canary.exists()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = outputs(tmp_path)
    assert out["verdict"] == "trade-off"
    assert out["artifact-count"] == "0"  # the upload input is not "true": nothing planned


def test_publish_step_plans_one_artifact_per_repeat(tmp_path: Path, standin: Path) -> None:
    results = tmp_path / "results"
    subprocess.run([str(standin), "run", f"--out={results}", "--repeats=3", "e.yaml"],
                   check=True, timeout=60)
    proc = run_step(
        "publish",
        {"SERVELAB_PYTHON": sys.executable, "SERVELAB_RESULTS_DIR": str(results),
         "SERVELAB_ARTIFACT_PREFIX": "servelab-$(id)", "SERVELAB_UPLOAD_ARTIFACTS": "true",
         "GITHUB_JOB": "experiment", "GITHUB_RUN_ATTEMPT": "2"},
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = outputs(tmp_path)
    assert out["artifact-count"] == "6"
    assert out["artifact-name-6"] == "servelab-id-experiment-treatment-repeat-3-attempt-2"
    assert out["artifact-path-6"] == str(results / "treatment" / "repeat-3")


def test_run_step_with_a_missing_working_directory(tmp_path: Path, standin: Path) -> None:
    env = _run_env(standin, "e.yaml", tmp_path / "nowhere $(id)", tmp_path / "argv.json")
    proc = run_step("run", env, tmp_path)
    assert proc.returncode == 0
    assert "the working-directory input is not a directory here" in proc.stdout
    assert outputs(tmp_path)["exit-code"] == "2"
    assert not (tmp_path / "argv.json").exists()


def test_cache_key_step(tmp_path: Path) -> None:
    proc = run_step("trivy-cache", {}, tmp_path)
    assert proc.returncode == 0
    key = outputs(tmp_path)["key"]
    assert key.startswith("servelab-trivy-db-Linux-") and len(key) == len(
        "servelab-trivy-db-Linux-2026-01-01"
    )


def _verdict_step(tmp: Path) -> str:
    steps = load_action()["runs"]["steps"]
    verdict = next(s for s in steps if s.get("name") == "Verdict")
    return str(verdict["run"])


@pytest.mark.parametrize(
    ("code", "expected"),
    [("0", 0), ("1", 1), ("3", 3), ("", 2), ("1; touch CANARY", 2), ("$(touch CANARY)", 2),
     ("-1", 2)],
)
def test_verdict_step_exit_code_follows_servelab(tmp_path: Path, code: str, expected: int) -> None:
    canary = tmp_path / "canary"
    script = tmp_path / "verdict.sh"
    script.write_text(_verdict_step(tmp_path))
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env={"PATH": os.environ["PATH"], "SERVELAB_EXIT_CODE": code.replace("CANARY", str(canary))},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == expected
    assert not canary.exists()
