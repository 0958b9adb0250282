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
from action_policy import pin_problems, workflow_problems
from action_testlib import ACTION, EXAMPLES, PINNED, ROOT, load_action

from servelab.run.github import MAX_ARTIFACT_SLOTS

BIN = Path(sys.executable).parent
NEGATIVE = ROOT / "tests" / "data" / "action" / "negative"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yml"))
NEGATIVE_FILES = sorted([*NEGATIVE.glob("*.yml"), *NEGATIVE.glob("*/action.yml")])
EXPECTED_EXAMPLES = {"pr-check.yml", "scheduled-rebuild.yml", "gpu-smoke.yml", "matrix-fanout.yml"}


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
    used = set(re.findall(r"uses:\s*([\w-]+/[\w-]+)@([0-9a-f]{40})", text))
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
