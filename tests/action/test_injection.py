"""Hostile inputs reach the CLI as plain strings and execute nothing.

Each shell step of action.yml is run as GitHub runs it (``bash --noprofile --norc -eo pipefail``)
with its ``env:`` filled with strings holding ``$(...)``, backticks, ``;``, quotes, globs and
newlines. A stand-in ``servelab`` records the argv it gets; a canary file must never appear.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from action_testlib import ROOT, load_action, parse_output_file, step_by_id, write_standin


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
        "GITHUB_STEP_SUMMARY": str(tmp / "step-summary"),
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
        "SERVELAB_RETENTION_DAYS": "",
        "SERVELAB_PYTHON": sys.executable,
        "SERVELAB_MATRIX": "null",
        "SERVELAB_JOB_INDEX": "0",
        "SERVELAB_JOB_TOTAL": "1",
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
    assert proc.returncode == 2, proc.stderr  # the stand-in's argparse refuses such a --repeats
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
    assert out["exit-code"] == "2"  # the step fails with servelab's code, and records it
    log = Path(out["log"]).read_text()
    assert log.startswith("servelab-action: command: servelab 'run' ")  # one line, quoted
    assert "error: argument --repeats: invalid int value" in log  # the run's own output
    assert Path(out["log"]).parent == Path(out["results-dir"])


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
    message = f"servelab run: the {which.lower()} input must be true, false or empty\n  fix: "
    assert message in proc.stdout
    out = outputs(tmp_path)
    assert out["exit-code"] == "2" and message in Path(out["log"]).read_text()
    assert not record.exists() and not (tmp_path / "canary").exists()


@pytest.mark.parametrize(("value", "code"), [("", 0), ("7", 0), ("90", 0), ("0", 2),
                                             ("x", 2), ("$(touch CANARY)", 2), ("1\n2", 2)])
def test_run_step_checks_retention_days(tmp_path: Path, standin: Path, value: str,
                                        code: int) -> None:
    env = _run_env(standin, "", tmp_path, tmp_path / "argv.json")
    env.update({"SERVELAB_EXPERIMENT": "e.yaml", "SERVELAB_TRIVY_DB_REPOSITORIES": "",
                "SERVELAB_RETENTION_DAYS": value.replace("CANARY", str(tmp_path / "canary"))})
    proc = run_step("run", env, tmp_path)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert (tmp_path / "argv.json").exists() == (code == 0)
    assert not (tmp_path / "canary").exists()
    if code:
        assert "the retention-days input is not a number of days" in proc.stdout


def test_run_step_without_servelab_is_exit_3(tmp_path: Path, standin: Path) -> None:
    env = _run_env(standin, "e.yaml", tmp_path, tmp_path / "argv.json")
    env["SERVELAB_BIN"] = ""
    proc = run_step("run", env, tmp_path)
    assert proc.returncode == 3
    assert "servelab run: servelab is not installed" in proc.stdout
    assert outputs(tmp_path)["exit-code"] == "3"


def test_run_step_records_a_failing_exit_code(tmp_path: Path, standin: Path) -> None:
    env = _run_env(standin, "", tmp_path, tmp_path / "argv.json")
    env.update({"SERVELAB_EXPERIMENT": "e.yaml", "SERVELAB_STANDIN_EXIT": "1",
                "SERVELAB_TRIVY_DB_REPOSITORIES": ""})
    assert run_step("run", env, tmp_path).returncode == 1  # the step fails with the run
    assert outputs(tmp_path)["exit-code"] == "1"


# ------------------------------------------------------------------------------------------
# install
# ------------------------------------------------------------------------------------------

FAKE_PYTHON = """\
#!{python}
# Records its argv. `-m venv DIR` makes DIR/bin/python (this script), DIR/bin/servelab (the
# stand-in) and DIR/bin/trivy (the real, pinned Trivy of the tests' venv); `-m pip` does
# nothing; anything else (the version checks of the plan) runs in the real Python.
import json, os, shutil, sys
with open(os.environ["FAKE_PYTHON_RECORD"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["-m", "venv"]:
    bin_dir = os.path.join(sys.argv[3], "bin")
    os.makedirs(bin_dir)
    shutil.copy(__file__, os.path.join(bin_dir, "python"))
    shutil.copy({standin!r}, os.path.join(bin_dir, "servelab"))
    shutil.copy({trivy!r}, os.path.join(bin_dir, "trivy"))
elif sys.argv[1:3] != ["-m", "pip"]:
    os.execv({python!r}, [{python!r}, *sys.argv[1:]])
"""


def _hostile_action(tmp: Path) -> Path:
    """The files the install reads, in a directory whose name is a shell injection."""
    action = tmp / "action $(touch canary) `touch canary`;'\"; touch canary"
    shutil.copytree(ROOT / "requirements", action / "requirements")
    (action / "src" / "servelab").mkdir(parents=True)
    (action / "src" / "servelab" / "__init__.py").write_text("")
    (action / "pyproject.toml").write_text("[project]\nname = 'servelab'\n")
    (action / "README.md").write_text("servelab\n")
    return action


def test_install_step_passes_the_action_path_as_one_argument(
    tmp_path: Path, standin: Path
) -> None:
    canary = tmp_path / "workspace" / "canary"  # the steps run in the workspace
    action_path = _hostile_action(tmp_path)
    fake = tmp_path / "fake-python"
    trivy = shutil.which("trivy") or str(Path(sys.executable).parent / "trivy")
    fake.write_text(FAKE_PYTHON.format(python=sys.executable, standin=str(standin), trivy=trivy))
    fake.chmod(0o755)
    record = tmp_path / "python.jsonl"
    env = {"SERVELAB_SETUP_PYTHON": str(fake), "GITHUB_ACTION_PATH": str(action_path),
           "FAKE_PYTHON_RECORD": str(record)}
    plan = run_step("plan", env, tmp_path)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    planned = outputs(tmp_path)
    (tmp_path / "github-output").write_text("")
    proc = run_step(
        "install",
        {**env, "SERVELAB_INSTALL": "TRUE", "SERVELAB_PY": planned["python"],
         "SERVELAB_VENV": planned["venv"], "SERVELAB_LOCK": planned["lock"],
         "SERVELAB_SOURCE": planned["source"]},
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not canary.exists()
    venv = tmp_path / "runner-temp" / "servelab-venv"
    calls = [json.loads(line) for line in record.read_text().splitlines()
             if json.loads(line)[:2] in (["-m", "venv"], ["-m", "pip"])]
    req = action_path / "requirements"
    assert calls[0] == ["-m", "venv", str(venv)]
    assert calls[1][-2:] == ["-r", str(req / "action-build.lock")]
    assert calls[2][-2:] == ["-r", str(req / "action.lock")]
    assert "--require-hashes" in calls[1] and "--require-hashes" in calls[2]
    assert calls[3][:3] == ["-m", "pip", "install"] and "--no-deps" in calls[3]
    assert len(calls) == 4
    got = outputs(tmp_path)
    assert got["servelab"] == str(venv / "bin" / "servelab")
    assert got["python"] == str(venv / "bin" / "python")


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


def _publish_env(results: Path, **extra: str) -> dict[str, str]:
    env = {"SERVELAB_PYTHON": sys.executable, "SERVELAB_RESULTS_DIR": str(results),
           "SERVELAB_LOG": str(results / "servelab-run.log"), "SERVELAB_EXIT_CODE": "0",
           "SERVELAB_WORKING_DIRECTORY": ".", "SERVELAB_ARTIFACT_PREFIX": "servelab",
           "SERVELAB_UPLOAD_ARTIFACTS": "true", "SERVELAB_PR_COMMENT": "false",
           "SERVELAB_LEG": "", "GITHUB_TOKEN": "", "GITHUB_JOB": "experiment",
           "GITHUB_RUN_ATTEMPT": "1"}
    env.update(extra)
    return env


@pytest.mark.parametrize("index", range(7))
def test_publish_step_sanitises_artifact_names(tmp_path: Path, standin: Path, index: int) -> None:
    canary = tmp_path / "canary"
    value = hostile(canary)[index]
    results = tmp_path / "results"
    subprocess.run([str(standin), "run", f"--out={results}", "e.yaml"], check=True, timeout=60)
    proc = run_step(
        "publish",
        _publish_env(results, SERVELAB_ARTIFACT_PREFIX=value, SERVELAB_UPLOAD_ARTIFACTS=value,
                     GITHUB_JOB=value, SERVELAB_LEG=value, SERVELAB_WORKING_DIRECTORY=value,
                     SERVELAB_LOG=value, SERVELAB_PR_COMMENT=value),
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
        _publish_env(results, SERVELAB_ARTIFACT_PREFIX="servelab-$(id)", GITHUB_RUN_ATTEMPT="2"),
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = outputs(tmp_path)
    assert out["artifact-count"] == "6"
    assert out["artifact-name-6"] == "servelab-id-experiment-treatment-repeat-3-attempt-2"
    assert out["artifact-path-6"] == str(results / "treatment" / "repeat-3")


@pytest.mark.parametrize("case", [
    ('{"runner": "ubuntu-24.04", "shard": 2}', "3", "4", "ubuntu-24.04-2"),
    ('{"gpu": {"model": "h100", "count": 8}}', "1", "2", "h100-8"),
    ('{"x": "' + "a" * 80 + '"}', "5", "6", "leg-5"),
    ('{"x": "$(touch CANARY)"}', "0", "2", "leg-0"),  # a long leg: its index
    ("null", "0", "1", ""),
])
def test_each_matrix_leg_gets_its_own_names(tmp_path: Path, standin: Path,
                                            case: tuple[str, str, str, str]) -> None:
    """Matrix legs share a job id: the run step names the leg from its matrix values, and the
    run name and every artifact name carry it."""
    matrix, index, total, leg = case
    canary = tmp_path / "canary"
    env = _run_env(standin, "", tmp_path, tmp_path / "argv.json")
    env.update({"SERVELAB_EXPERIMENT": "e.yaml", "SERVELAB_TRIVY_DB_REPOSITORIES": "",
                "SERVELAB_ARTIFACT_PREFIX": "servelab", "GITHUB_JOB": "experiment",
                "SERVELAB_MATRIX": matrix.replace("CANARY", str(canary)),
                "SERVELAB_JOB_INDEX": index, "SERVELAB_JOB_TOTAL": total})
    assert run_step("run", env, tmp_path).returncode == 0
    assert not canary.exists()
    out = outputs(tmp_path)
    assert out["leg"] == leg
    stem = "-".join(x for x in ("servelab-experiment", leg) if x)
    argv = json.loads((tmp_path / "argv.json").read_text())["argv"]
    assert f"--run-name={stem}" in argv
    (tmp_path / "github-output").write_text("")
    results = Path(out["results-dir"])
    assert run_step("publish", _publish_env(results, SERVELAB_LEG=out["leg"]),
                    tmp_path).returncode == 0
    names = outputs(tmp_path)
    assert names["artifact-name-1"] == f"{stem}-control-repeat-1"
    assert names["summary-artifact-name"] == f"{stem}-summary"


def test_without_the_strategy_context_runs_are_kept_apart(tmp_path: Path,
                                                         standin: Path) -> None:
    """act gives composite actions no strategy context: a random part stands in for the leg."""
    legs = set()
    for n in (1, 2):
        (tmp_path / "github-output").write_text("")
        env = _run_env(standin, "", tmp_path, tmp_path / f"argv-{n}.json")
        env.update({"SERVELAB_EXPERIMENT": "e.yaml", "SERVELAB_TRIVY_DB_REPOSITORIES": "",
                    "SERVELAB_MATRIX": "", "SERVELAB_JOB_INDEX": "", "SERVELAB_JOB_TOTAL": ""})
        assert run_step("run", env, tmp_path).returncode == 0
        legs.add(outputs(tmp_path)["leg"])
    assert len(legs) == 2 and all(re.fullmatch(r"run-[0-9a-f]{6}", x) for x in legs)


def test_publish_step_reports_a_run_that_stopped(tmp_path: Path) -> None:
    """No summary.json, exit 3 and the run's log: an ::error with the cause, a job summary
    (also summary.md) with what ran and the fix in terms of the action's inputs."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "servelab-run.log").write_text(
        "servelab-action: command: servelab run --out=/r -- e.yaml\n"
        "servelab: lint treatment: 0 error, 0 warning, 0 info\n"
        "servelab: [treatment 1/2] start\n"
        "servelab:   build ...\n"
        "servelab:   build: ok (sha256:0123456789ab… in 3.0s)\n"
        "servelab:   scan ...\n"
        "servelab run: the Trivy DB could not be downloaded from any repository:\n"
        "  Trivy default: dial tcp: lookup mirror.gcr.io: no such host\n"
        "  fix: pass a reachable mirror with --db-repository (tried in order), or restore a "
        "cached DB and use --offline\n")
    proc = run_step("publish", _publish_env(results, SERVELAB_EXIT_CODE="3"), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    errors = [x for x in proc.stdout.splitlines() if x.startswith("::error")]
    assert len(errors) == 1
    assert errors[0].startswith(
        "::error title=servelab stopped (exit 3) in the scan stage of treatment repeat 1::"
        "the Trivy DB could not be downloaded")
    assert "the `trivy-db-repositories` input" in errors[0] and "--db-repository" not in errors[0]
    summary = (tmp_path / "step-summary").read_text()
    assert summary == (results / "summary.md").read_text()
    assert summary.startswith("# servelab: ⛔ stopped (exit 3: a missing tool")
    assert "treatment repeat 1 of 2: build ok (sha256:0123456789ab… in 3.0s)" in summary
    assert "with the `trivy-db-repositories` input (tried in order)" in summary
    assert 'use `offline: "true"`' in summary and "--offline" not in summary
    out = outputs(tmp_path)
    assert out["verdict"] == "" and out["summary-path"] == str(results / "summary.md")
    assert out["summary-artifact-name"] == "servelab-experiment-summary"
    assert out["summary-artifact-paths"].splitlines() == [
        str(results / "servelab-run.log"), str(results / "summary.md")]


def test_run_step_with_a_missing_working_directory(tmp_path: Path, standin: Path) -> None:
    env = _run_env(standin, "e.yaml", tmp_path / "nowhere $(id)", tmp_path / "argv.json")
    proc = run_step("run", env, tmp_path)
    assert proc.returncode == 2
    assert "servelab run: the working-directory input is not a directory here" in proc.stdout
    assert outputs(tmp_path)["exit-code"] == "2"
    assert not (tmp_path / "argv.json").exists()


def test_cache_key_step(tmp_path: Path) -> None:
    proc = run_step("trivy-db", {"SERVELAB_TRIVY_CACHE_DIR": "", "SERVELAB_CACHE_TRIVY_DB": "true"},
                    tmp_path)
    assert proc.returncode == 0
    key = outputs(tmp_path)["key"]
    assert key.startswith("servelab-trivy-db-Linux-") and len(key) == len(
        "servelab-trivy-db-Linux-2026-01-01"
    )


def _verdict_step(tmp: Path) -> str:
    steps = load_action()["runs"]["steps"]
    verdict = next(s for s in steps if s.get("name") == "Verdict")
    return str(verdict["run"])


def _verdict(tmp: Path, code: str, experiment: str = "e.yaml",
             servelab: str = "/venv/bin/servelab") -> subprocess.CompletedProcess[str]:
    script = tmp / "verdict.sh"
    script.write_text(_verdict_step(tmp))
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        env={"PATH": os.environ["PATH"], "SERVELAB_EXIT_CODE": code,
             "SERVELAB_EXPERIMENT": experiment, "SERVELAB_BIN": servelab,
             "GITHUB_STEP_SUMMARY": str(tmp / "step-summary")},
        capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.mark.parametrize(
    ("code", "expected"),
    [("0", 0), ("1", 1), ("3", 3), ("1; touch CANARY", 2), ("$(touch CANARY)", 2), ("-1", 2)],
)
def test_verdict_step_exit_code_follows_servelab(tmp_path: Path, code: str, expected: int) -> None:
    canary = tmp_path / "canary"
    proc = _verdict(tmp_path, code.replace("CANARY", str(canary)))
    assert proc.returncode == expected
    assert not canary.exists()


def test_verdict_step_when_servelab_never_ran(tmp_path: Path) -> None:
    """The install failed: an ::error and a job summary, not a silent skip."""
    proc = _verdict(tmp_path, "", servelab="")
    assert proc.returncode == 3
    assert proc.stdout.startswith("::error title=servelab did not run::servelab was not installed")
    assert (tmp_path / "step-summary").read_text().startswith("# servelab: ⛔ did not run")


def test_verdict_step_passes_an_install_only_use(tmp_path: Path) -> None:
    """No experiment: the action only installed servelab (e.g. for servelab report)."""
    proc = _verdict(tmp_path, "", experiment="")
    assert proc.returncode == 0, proc.stdout
    assert "servelab installed at /venv/bin/servelab" in proc.stdout
    assert not (tmp_path / "step-summary").exists()
