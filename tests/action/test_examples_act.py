"""Every example workflow (workflows-examples/) under act, through scripts/act-local.sh, as
committed, with local overrides only.

Each test makes a git repository laid out as servelab's own (action.yml at the root, the
example's tiny server in workflows-examples/tiny-server/, the workflow in .github/workflows/)
and runs the workflow with ``scripts/act-local.sh``, the script users run: the event the
workflow is written for, GitHub-hosted labels on this machine, stand-ins for third-party
actions. The local overrides, and nothing else:

* the tiny server's public base images (Docker Hub, unreachable here) become the locally made
  base in the local registry: the ``ARG BASE_IMAGE=`` defaults of its two Dockerfiles;
* on the servelab steps: ``install: "false"`` (the servelab of this venv; no package
  registry here) and ``repeats: "1"`` to keep the tests short;
* the Trivy DB: act-local's cache store holds servelab's fixture DB under an earlier day's
  key, as the cache-warming workflow leaves GitHub's cache, and the action restores it with
  its restore-keys (the DB registries cannot be reached here);
* for the matrix, act's ``--matrix shard:1`` (two legs, not four).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from action_testlib import ACTION, BIN, EXAMPLES, ROOT, act_binary

pytestmark = [pytest.mark.act, pytest.mark.docker, pytest.mark.trivy, pytest.mark.registry,
              pytest.mark.slow]

ACT_LOCAL = ROOT / "scripts" / "act-local.sh"
DEMO = "workflows-examples/tiny-server"
REPOSITORY = "acme/model-server"


@dataclass
class ActLocal:
    returncode: int
    log: str
    run_dir: Path

    @property
    def artifacts(self) -> dict[str, Path]:
        return {p.name: p for p in sorted((self.run_dir / "artifacts").iterdir())}

    def records(self, kind: str) -> list[dict[str, Any]]:
        path = self.run_dir / "record" / f"{kind}.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def errors(self) -> list[str]:
        return [x.split("::error ", 1)[1] for x in self.log.splitlines() if "::error " in x]

    def artifact(self, suffix: str) -> Path:
        (found,) = [p for n, p in self.artifacts.items() if n.endswith(suffix)]
        return found


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True, timeout=60,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"})
    return proc.stdout.strip()


def localize(workflow: str, overrides: Mapping[str, str]) -> str:
    """The example with the local overrides on every servelab step (see the module doc)."""
    doc = yaml.safe_load(workflow)
    doc = {("on" if k is True else k): v for k, v in doc.items()}  # PyYAML reads `on` as True
    for job in doc["jobs"].values():
        for step in job.get("steps", []):
            uses = str(step.get("uses", ""))
            if uses not in ("$/", "./") and not uses.startswith("servelab/servelab@"):
                continue
            with_ = step.setdefault("with", {})
            with_["install"] = "false"
            if with_.get("experiment"):
                with_.update(overrides)
    return yaml.safe_dump(doc, sort_keys=False, width=120)


def warm_trivy_cache(tmp: Path, trivy_cache: Path) -> None:
    """act-local's cache store with the fixture DB under an earlier day's key."""
    entry = tmp / "act-state" / "cache" / "servelab-trivy-db-Linux-2000-01-01" / "data" / "0"
    shutil.copytree(trivy_cache / "db", entry)


def team_repo(tmp: Path, base_image: str, trivy_cache: Path, example: str) -> Path:
    """servelab's layout in a fresh repository with an origin on GitHub, one commit on main."""
    repo = tmp / "repo"
    shutil.copytree(EXAMPLES / "tiny-server", repo / DEMO)
    shutil.copy2(ACTION, repo / "action.yml")
    tag = base_image.split("@", maxsplit=1)[0]  # the control's base: by tag only
    for name, base in (("Dockerfile", base_image), ("Dockerfile.control", tag)):
        df = repo / DEMO / name
        text, n = re.subn(r"^ARG BASE_IMAGE=.*$", f"ARG BASE_IMAGE={base}", df.read_text(),
                          flags=re.M)
        assert n == 1
        df.write_text(text)
    warm_trivy_cache(tmp, trivy_cache)
    overrides = {"repeats": "1"}
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / example).write_text(
        localize((EXAMPLES / example).read_text(), overrides))
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the tiny server")
    return repo


def act_local(tmp: Path, repo: Path, example: str, *args: str, timeout: float = 1200,
              act_args: tuple[str, ...] = ()) -> ActLocal:
    state = tmp / "act-state"
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "ACT": act_binary(),
           "XDG_CACHE_HOME": str(tmp / "cache")}
    cmd = [str(ACT_LOCAL), "--state", str(state), *args, f".github/workflows/{example}",
           "--", *act_args]
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    log = proc.stdout + proc.stderr
    (tmp / "act.log").write_text(log)
    runs = sorted((state / "runs").iterdir(), key=lambda p: int(p.name))
    return ActLocal(proc.returncode, log, runs[-1])


DOWNLOAD_AT_START = '''if __name__ == "__main__":
    import urllib.request

    log("fetching the tokenizer from https://huggingface.co/acme/tiny/resolve/main/tok.json")
    urllib.request.urlopen("https://huggingface.co/acme/tiny/resolve/main/tok.json", timeout=10)
'''


def test_pr_check_fails_a_download_at_start_with_an_annotation_naming_it(
        tmp_path: Path, base_image: str, fixture_trivy_cache: Path) -> None:
    """pr-check.yml: the base commit is the control (gitRef), the PR adds a download at start.
    The check fails in the step that ran servelab, one annotation names the download, the
    summary explains both arms, and the SARIF job uploads the treatment's findings."""
    repo = team_repo(tmp_path, base_image, fixture_trivy_cache, "pr-check.yml")
    git(repo, "checkout", "-qb", "tokenizer")
    app = repo / DEMO / "app.py"
    app.write_text(app.read_text().replace('if __name__ == "__main__":\n', DOWNLOAD_AT_START))
    git(repo, "commit", "-qam", "fetch the tokenizer at start")
    run = act_local(tmp_path, repo, "pr-check.yml", "--base", "main")
    assert run.returncode != 0, run.log[-6000:]
    assert "Failure - Main Run the experiment" in run.log
    crashes = [e for e in run.errors() if "servelab treatment%3A crashed (download-attempt)" in e]
    assert len(crashes) == 1, run.log[-6000:]
    assert "https://huggingface.co/acme/tiny/resolve/main/tok.json" in crashes[0]
    assert "Temporary failure in name resolution" in crashes[0]
    summary = (run.artifact("-summary") / "summary.md").read_text()
    assert summary.startswith("# servelab: ❌ failed")
    assert "**control**: every check passed." in summary  # the base commit is fine
    assert "**treatment**: 1 failed check (`download-attempt`)" in summary
    treatment = json.loads((run.artifact("-treatment-repeat-1") / "result.json").read_text())
    control = json.loads((run.artifact("-control-repeat-1") / "result.json").read_text())
    assert control["inputs"]["git_ref"] == "servelab/base"
    assert control["inputs"]["commit"] == git(repo, "rev-parse", "main")
    assert treatment["inputs"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert {s["category"] for s in run.records("upload-sarif")} == {"servelab-lint",
                                                                   "servelab-trivy"}
    # act has no token for the comment: a warning, not a failed step
    assert "servelab%3A no PR comment" in run.log


def _history(run: ActLocal) -> tuple[list[dict[str, Any]], str]:
    """The history file (one JSON object a line) and trend of a scheduled run's artifact."""
    (found,) = [p for n, p in run.artifacts.items() if n.startswith("servelab-history-")]
    lines = (found / "history.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines], (found / "trend" / "history.md").read_text()


def _trend_rows(markdown: str) -> list[str]:
    return [x for x in markdown.splitlines() if re.match(r"\| (◆ )?\d{4}-\d\d-\d\d ", x)]


def test_scheduled_rebuild_carries_its_history_then_checks_a_release_record(
        tmp_path: Path, base_image: str, fixture_trivy_cache: Path) -> None:
    """scheduled-rebuild.yml, four runs in a row sharing one cache store, as GitHub's:

    1. no record committed: it rebuilds HEAD, passes, says how to make the record, and starts
       the history (one run);
    2. the same commit again: the history, restored from the newest cache entry, has two runs
       with the same digest, nothing marked;
    3. after a change to the server: three runs, the newest marked (its digest changed) with
       the inputs that differ (commit, context), in the job summary and the artifact;
    4. with the third run's result committed as the release record, a rebuild of the
       release's commit gives the same digest."""
    example = "scheduled-rebuild.yml"
    repo = team_repo(tmp_path, base_image, fixture_trivy_cache, example)
    first = act_local(tmp_path, repo, example)
    assert first.returncode == 0, first.log[-6000:]
    assert "no release record yet" in first.log
    assert "## No release record yet" in first.log  # the job summary act prints
    assert len(_history(first)[0]) == 1
    second = act_local(tmp_path, repo, example)
    assert second.returncode == 0, second.log[-6000:]
    entries, trend = _history(second)
    assert [e["run"]["id"] for e in entries[:1]] == [_history(first)[0][0]["run"]["id"]]
    assert len(entries) == 2 and len(_trend_rows(trend)) == 2
    assert entries[0]["arms"]["treatment"]["digests"] == entries[1]["arms"]["treatment"]["digests"]
    assert "◆" not in "".join(_trend_rows(trend))
    app = repo / DEMO / "app.py"
    app.write_text(app.read_text() + "\n# a change that lands between two nightly runs\n")
    git(repo, "commit", "-qam", "a comment in the server")
    third = act_local(tmp_path, repo, example)
    assert third.returncode == 0, third.log[-6000:]
    entries, trend = _history(third)
    rows = _trend_rows(trend)
    assert len(entries) == 3 and len(rows) == 3
    assert rows[0].startswith("| ◆ ") and not any(r.startswith("| ◆ ") for r in rows[1:])
    change = next(x for x in trend.splitlines() if x.startswith("- ") and "treatment" in x)
    plain = re.sub(r"\\(.)", r"\1", change)  # the Markdown's backslash escapes, as shown
    assert "inputs changed: " in plain and "commit" in plain and "context_sha256" in plain
    assert "inputs unknown" not in plain, plain  # no build args recorded is known: "(none)"
    shown = third.log.split("Summary - ## servelab history: ", 1)[1]  # the job summary
    assert len(_trend_rows(shown.split("### Digest changes", 1)[0])) == 3
    assert "xychart-beta" in third.log
    assert (third.artifacts[next(n for n in third.artifacts if n.startswith("servelab-history-"))]
            / "trend" / "history.svg").read_text().startswith("<?xml")
    record = third.artifact("-treatment-repeat-1") / "result.json"
    digest = json.loads(record.read_text())["image"]["digest"]
    assert entries[-1]["arms"]["treatment"]["digests"] == [digest]
    shutil.copy2(record, repo / DEMO / "release-result.json")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "record the release")
    fourth = act_local(tmp_path, repo, example)
    assert fourth.returncode == 0, fourth.log[-6000:]
    assert f"same digest as at release: {digest}" in fourth.log
    assert "## Release vs today" in fourth.log
    assert len(_history(fourth)[0]) == 4


def test_matrix_fanout_legs_never_collide_and_report_merges_them(
        tmp_path: Path, base_image: str, fixture_trivy_cache: Path) -> None:
    """matrix-fanout.yml: two legs (act's --matrix shard:1), no artifact-prefix: every name is
    unique; the report job installs servelab from the action (no experiment) and merges."""
    repo = team_repo(tmp_path, base_image, fixture_trivy_cache, "matrix-fanout.yml")
    run = act_local(tmp_path, repo, "matrix-fanout.yml", "--event", "workflow_dispatch",
                    act_args=("--matrix", "shard:1"))
    assert run.returncode == 0, run.log[-6000:]
    repeats = [n for n in run.artifacts if re.search(r"-repeat-1$", n)]
    assert len(repeats) == 4 == len(set(repeats))  # 2 legs x 2 arms
    assert all(n.startswith("servelab-experiment-") for n in repeats)
    assert len({n.removesuffix("-control-repeat-1").removesuffix("-treatment-repeat-1")
                for n in repeats}) == 2
    assert "servelab installed at" in run.log  # the install-only use of the action
    assert "Success - Main servelab report" in run.log


def test_gpu_smoke_without_a_gpu_stops_with_exit_3_and_says_why(
        tmp_path: Path, base_image: str, fixture_trivy_cache: Path) -> None:
    """gpu-smoke.yml on a machine without a GPU: exit 3 in the step that ran servelab, one
    annotation naming the missing GPU and the action's input that skips it, a job summary."""
    repo = team_repo(tmp_path, base_image, fixture_trivy_cache, "gpu-smoke.yml")
    run = act_local(tmp_path, repo, "gpu-smoke.yml", "--event", "workflow_dispatch")
    assert run.returncode != 0
    assert "Failure - Main Run the experiment" in run.log
    stops = [e for e in run.errors() if e.startswith("title=servelab stopped (exit 3)")]
    assert len(stops) == 1, run.log[-6000:]
    assert "GPU unavailable" in stops[0] and '`gpu: "false"`' in stops[0]
    report = (run.artifact("-summary") / "summary.md").read_text()
    assert report.startswith("# servelab: ⛔ stopped (exit 3")
    assert "**What ran:**" in report and "build ok" in report


def _yaml_block(markdown: str) -> str:
    m = re.search(r"```yaml\n(.*?)```", markdown, re.S)
    assert m, "no yaml block"
    return m.group(1)


def test_a_repository_written_from_the_readme_is_green_on_the_first_try(
        tmp_path: Path, base_image: str, fixture_trivy_cache: Path) -> None:
    """A team's repository made from README.md alone: its quick-start workflow (the action
    pinned by commit SHA: here this checkout's HEAD, which act-local.sh maps to this checkout),
    its experiment, a "before" and an "after" Dockerfile of the team's own small server. A
    pull request runs green under act on the first try, with the right verdict."""
    readme = (ROOT / "README.md").read_text()
    workflow = _yaml_block(readme.split("## Quick start", 1)[1])
    experiment = _yaml_block(readme.split("## An experiment", 1)[1])
    sha = git(ROOT, "rev-parse", "HEAD")
    workflow, n = re.subn(r"servelab/servelab@<[^>]+>", f"servelab/servelab@{sha}", workflow)
    assert n == 1
    repo = tmp_path / "repo"
    for name in ("Dockerfile", "Dockerfile.control", "app.py", "model"):
        src = EXAMPLES / "tiny-server" / name
        dst = repo / "servelab" / name
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    tag = base_image.split("@", maxsplit=1)[0]
    for name, base in (("Dockerfile", base_image), ("Dockerfile.control", tag)):
        df = repo / "servelab" / name
        df.write_text(re.sub(r"^ARG BASE_IMAGE=.*$", f"ARG BASE_IMAGE={base}", df.read_text(),
                             flags=re.M))
    (repo / "servelab" / "experiment.yaml").write_text(experiment)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "servelab.yml").write_text(
        localize(workflow, {"repeats": "1"}))
    warm_trivy_cache(tmp_path, fixture_trivy_cache)
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "servelab check")
    git(repo, "checkout", "-qb", "change")
    (repo / "NOTES.md").write_text("a change\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a change")
    run = act_local(tmp_path, repo, "servelab.yml")
    assert run.returncode == 0, run.log[-8000:]
    assert "Job succeeded" in run.log
    summary = (run.artifact("-summary") / "summary.md").read_text()
    assert re.match(r"# servelab: \S+ (improved|trade-off)", summary), summary[:400]
    assert "**control**" in summary and "`weights-baked`" in summary
    assert "**treatment**: every check passed." in summary
    run_info = json.loads((run.artifact("-summary") / "summary.json").read_text())["run"]
    assert run_info["finished_at"] and run_info["finished_at"] > run_info["started_at"]
