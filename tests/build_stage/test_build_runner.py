"""`servelab build` is the runner with only the build stage: the same arms (a prebuilt one
skipped, a gitRef one built from a worktree), the same loop, a failed build that ends it.
Real engine; the images are two-line `FROM scratch` builds (no base image, no network)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from servelab import cli

pytestmark = pytest.mark.docker

PREBUILT = "127.0.0.1:5000/servelab-test/prebuilt@sha256:" + "0" * 64
DATA = Path(__file__).resolve().parent.parent / "data" / "build"


def _context(root: Path, content: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Dockerfile").write_text("FROM scratch\nCOPY a.txt /a.txt\n")
    (root / "a.txt").write_text(content)
    return root


def _spec(path: Path, control: str, treatment: str, repeats: int = 2) -> Path:
    path.write_text("apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: runner}\n"
                    f"spec:\n  change: the runner builds\n  repeats: {repeats}\n"
                    f"  control: {control}\n  treatment: {treatment}\n"
                    "  build: {sourceDateEpoch: 1700000000, network: none}\n")
    return path


def test_prebuilt_arm_is_skipped_and_the_other_built_in_the_loop(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _context(tmp_path / "ctx", "runner\n")
    spec = _spec(tmp_path / "exp.yaml", f"{{image: '{PREBUILT}'}}",
                 "{context: ctx, dockerfile: Dockerfile}")
    out = tmp_path / "out"
    rc = cli.main(["build", str(spec), "--out", str(out), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    assert doc["skipped"] == [f"control: prebuilt image {PREBUILT}, nothing to build"]
    (arm,) = doc["arms"]
    assert arm["arm"] == "treatment"
    assert [r["repeat"] for r in arm["records"]] == [1, 2]
    assert arm["reproducibility"]["reproducible"] is True
    assert doc["exit_code"] == 0 and doc["gate_reproducible"] is True
    # what servelab build always wrote, and nothing of servelab run's
    summary = json.loads((out / "build-summary.json").read_text())
    assert summary["arms"][0]["records"][1]["manifest_digest"] == \
        arm["records"][1]["manifest_digest"]
    assert not (out / "control").exists()
    assert (out / "treatment" / "repeat-2" / "build.json").is_file()
    assert not list(out.rglob("result.json")) and not (out / "summary.json").exists()
    rc = cli.main(["build", str(spec), "--out", str(tmp_path / "text"), "--repeats", "1"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "treatment: not judged: fewer than two builds" in text
    assert f"skipped control: prebuilt image {PREBUILT}, nothing to build" in text


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def test_git_ref_arm_is_built_from_a_worktree(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    repo = _context(tmp_path / "repo", "committed\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("changed in the working tree\n")  # reaches the treatment only
    spec = _spec(repo / "exp.yaml", f"{{context: ., dockerfile: Dockerfile, gitRef: {base}}}",
                 "{context: ., dockerfile: Dockerfile}", repeats=1)
    rc = cli.main(["build", str(spec), "--out", str(tmp_path / "out"), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    recs = {a["arm"]: a["records"][0] for a in doc["arms"]}
    assert recs["control"]["manifest_digest"] != recs["treatment"]["manifest_digest"]
    assert recs["control"]["context"] != str(repo)  # the temporary worktree
    assert recs["treatment"]["context"] == str(repo)
    assert len(_git(repo, "worktree", "list").splitlines()) == 1, "worktree left behind"


def test_unpinned_base_ends_servelab_build(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    ctx = tmp_path / "unpinned"  # inside the experiment's folder: the path rule confines it
    shutil.copytree(DATA / "unpinned", ctx)
    spec = _spec(tmp_path / "exp.yaml", f"{{image: '{PREBUILT}'}}",
                 f"{{context: {ctx}, dockerfile: Dockerfile}}")
    out = tmp_path / "out"
    rc = cli.main(["build", str(spec), "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 1
    assert "[base-unpinned]" in captured.err and "servelab pin" in captured.err
    assert captured.out == "" and not (out / "build-summary.json").exists()
