"""action.yml and workflows-examples/ against GitHub's schemas, zizmor and the project's rules.

check-jsonschema and zizmor run as real subprocesses, offline (both vendor what they need).
Negative fixtures (tests/data/action/negative) prove that each check can fail: every file
names what it must trigger with ``# expect: zizmor:<audit>``, ``policy:<rule>`` or ``schema``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from action_policy import pin_problems, workflow_problems
from action_testlib import ACTION, EXAMPLES, PINNED, ROOT, load_action

from servelab.github import MAX_ARTIFACT_SLOTS

BIN = Path(sys.executable).parent
NEGATIVE = ROOT / "tests" / "data" / "action" / "negative"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yml"))
NEGATIVE_FILES = sorted([*NEGATIVE.glob("*.yml"), *NEGATIVE.glob("*/action.yml")])
EXPECTED_EXAMPLES = {"pr-check.yml", "scheduled-rebuild.yml", "gpu-smoke.yml", "matrix-fanout.yml",
                     "trivy-db-cache.yml", "ship-and-attest.yml", "calibrate.yml",
                     "big-image-shards.yml"}


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is missing from the venv: pip install -e '.[dev]'")
    return str(path)


def check_schema(path: Path, schema: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", schema, str(path)],
        capture_output=True, text=True, timeout=120, check=False,
    )


def zizmor(*paths: Path) -> tuple[int, list[dict[str, object]], str]:
    proc = subprocess.run(
        [_tool("zizmor"), "--offline", "--no-progress", "--format", "json", *map(str, paths)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    findings = json.loads(proc.stdout) if proc.stdout.strip() else []
    return proc.returncode, findings, proc.stderr


def expectations(path: Path) -> set[str]:
    return set(re.findall(r"^# expect: (\S+)$", path.read_text(), flags=re.M))


def test_every_example_is_there() -> None:
    assert {p.name for p in EXAMPLE_FILES} == EXPECTED_EXAMPLES


def test_action_validates_against_github_actions_schema() -> None:
    proc = check_schema(ACTION, "vendor.github-actions")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_validates_against_github_workflows_schema(path: Path) -> None:
    proc = check_schema(path, "vendor.github-workflows")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_reports_nothing() -> None:
    rc, findings, err = zizmor(ACTION, *EXAMPLE_FILES)
    assert findings == [], json.dumps(findings, indent=1)[:4000]
    assert rc == 0, err


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_keeps_the_project_rules(path: Path) -> None:
    assert workflow_problems(path.read_text()) == set()


def test_action_pins_every_third_party_action() -> None:
    text = ACTION.read_text()
    assert pin_problems(text) == set()
    used = set(re.findall(r"uses:\s*([\w-]+/[\w-]+)(?:/[\w-]+)?@([0-9a-f]{40})", text))
    assert used == set(PINNED.items())


def test_examples_pin_the_same_releases_as_the_action() -> None:
    shas: dict[str, set[str]] = {}
    for path in [ACTION, *EXAMPLE_FILES]:
        for repo, sha in re.findall(r"uses:\s*([\w-]+/[\w-]+)(?:/[\w-]+)?@([0-9a-f]{40})",
                                    path.read_text()):
            shas.setdefault(repo, set()).add(sha)
    assert all(len(v) == 1 for v in shas.values()), shas


@pytest.mark.parametrize("path", NEGATIVE_FILES, ids=lambda p: str(p.relative_to(NEGATIVE)))
def test_negative_fixture_is_caught(path: Path) -> None:
    expected = expectations(path)
    assert expected, f"{path} names nothing it must trigger"
    if "schema" in expected:
        schema = "vendor.github-actions" if path.name == "action.yml" else "vendor.github-workflows"
        assert check_schema(path, schema).returncode != 0
        return
    _, findings, _ = zizmor(path)
    found = {f"zizmor:{f['ident']}" for f in findings}
    if path.name != "action.yml":
        found |= workflow_problems(path.read_text())
    else:
        found |= {p for p in pin_problems(path.read_text())}
    assert found == expected


def test_no_expression_inside_any_script() -> None:
    """Inputs reach scripts only through env: no ${{ }} in any run: of the action."""
    for step in load_action()["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), step.get("name")


def test_upload_slots_match_the_documented_maximum() -> None:
    steps = load_action()["runs"]["steps"]
    slots = [s for s in steps if str(s.get("name", "")).startswith("Upload repeat artifact ")]
    assert len(slots) == MAX_ARTIFACT_SLOTS
    for i, step in enumerate(slots, start=1):
        assert step["name"] == f"Upload repeat artifact {i}"
        assert f"steps.publish.outputs.artifact-path-{i} != ''" in step["if"]
        assert "inputs.upload-artifacts == 'true'" in step["if"]
        assert step["with"]["name"] == f"${{{{ steps.publish.outputs.artifact-name-{i} }}}}"
        assert step["with"]["path"] == f"${{{{ steps.publish.outputs.artifact-path-{i} }}}}"
        assert step["with"]["if-no-files-found"] == "error"
    doc = (ROOT / "docs" / "action.md").read_text()
    assert f"{MAX_ARTIFACT_SLOTS} repeat artifacts" in doc


def test_every_third_party_step_can_be_switched_off() -> None:
    for step in load_action()["runs"]["steps"]:
        if "uses" in step:
            assert "inputs." in step.get("if", ""), step["name"]


def test_every_input_and_output_is_documented() -> None:
    action = load_action()
    doc = (ROOT / "docs" / "action.md").read_text()
    for name in [*action["inputs"], *action["outputs"]]:
        assert f"`{name}`" in doc, name


# ------------------------------------------------------------------------------------------
# the examples run as committed; README's quick start; the act script users run
# ------------------------------------------------------------------------------------------

DEMO = EXAMPLES / "tiny-server"


def _servelab_steps(path: Path) -> list[dict[str, object]]:
    doc = yaml.safe_load(path.read_text())
    return [dict(s) for job in doc["jobs"].values() for s in job.get("steps", [])
            if str(s.get("uses", "")) in ("$/", "./") or "/servelab@" in str(s.get("uses", ""))]


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_runs_a_committed_experiment(path: Path) -> None:
    """Every experiment an example names is in the repository and valid as committed: no
    git-ignored build-args file, no base image only set-up makes."""
    experiments = {str(s["with"]["experiment"]) for s in _servelab_steps(path)
                   if isinstance(s.get("with"), dict) and s["with"].get("experiment")}
    env = (yaml.safe_load(path.read_text()).get("env") or {})
    experiments = {env.get("EXPERIMENT", e) if "env.EXPERIMENT" in e else e for e in experiments}
    if not experiments and env.get("EXPERIMENT"):  # servelab run in a step (shards)
        experiments = {str(env["EXPERIMENT"])}
    assert experiments, path.name
    for e in experiments:
        ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", e],
                                 check=False, timeout=60)
        assert ignored.returncode == 1, f"{e} is git-ignored: it would not be committed"
        text = (ROOT / e).read_text()
        assert "buildArgsFile" not in text, e
        proc = subprocess.run([str(BIN / "servelab"), "validate", str(ROOT / e)],
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_examples_base_is_public_and_pinned_by_digest() -> None:
    text = (DEMO / "Dockerfile").read_text()
    m = re.search(r"^ARG BASE_IMAGE=([\w./-]+):([\w.-]+)@sha256:([0-9a-f]{64})$", text, re.M)
    assert m and m.group(1) == "python" and "127.0.0.1" not in text
    control = (DEMO / "Dockerfile.control").read_text()
    assert re.search(r"^ARG BASE_IMAGE=python:[\w.-]+$", control, re.M)  # by tag, on purpose


def test_readme_opens_with_a_pinned_uses_quick_start() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # a release's commit, or until the first tag a placeholder that says which commit
    m = re.search(r"uses: servelab/servelab@([0-9a-f]{40}|<40-character commit SHA of the "
                  r"v[\d.]+ tag>) # (v\d+\.\d+\.\d+)", quick)
    assert m, "README's quick start has no uses: pinned by commit SHA with its tag"
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version and m.group(2) == f"v{version.group(1)}"
    assert quick.index("uses: servelab/servelab@") < quick.index("scripts/example.sh")
    commands = re.findall(r"^(scripts/\S+\.sh)\b", quick, re.M)
    assert commands == ["scripts/example.sh", "scripts/test.sh"]
    assert "Linux" in quick and "2.336.0" in readme


def test_act_local_script_is_there_and_explains_itself() -> None:
    script = ROOT / "scripts" / "act-local.sh"
    assert script.stat().st_mode & 0o111
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 0 and "pull_request" in proc.stdout and "--base" in proc.stdout
    doc = (ROOT / "docs" / "action.md").read_text()
    assert "scripts/act-local.sh" in doc
