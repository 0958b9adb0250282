"""A directory given to k8s-check is walked without following symbolic links out of it."""

from __future__ import annotations

import shutil
from pathlib import Path

from servelab.k8s import check_manifests
from servelab.k8s.load import expand_paths

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
CLEAN = DATA / "negative" / "vllm-deployment.yaml"
FLAWED = DATA / "positive" / "gpu-limit-missing.yaml"


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    repo, outside = tmp_path / "repo" / "deploy", tmp_path / "outside"
    repo.mkdir(parents=True)
    outside.mkdir()
    shutil.copy(CLEAN, repo / "a.yaml")
    shutil.copy(FLAWED, outside / "elsewhere.yaml")
    return repo, outside


def test_links_out_of_the_directory_are_not_read_and_are_named(tmp_path: Path) -> None:
    repo, outside = _tree(tmp_path)
    (repo / "b.yaml").symlink_to(outside / "elsewhere.yaml")
    (repo / "linked").symlink_to(outside, target_is_directory=True)
    (repo / "loop.yaml").symlink_to(repo / "loop.yaml")
    skipped: list[str] = []
    assert expand_paths([repo], skipped) == [str(repo / "a.yaml")]
    assert len(skipped) == 3 and all(str(repo) in s for s in skipped)
    report = check_manifests([repo])
    assert report.files == [str(repo / "a.yaml")]
    assert not report.findings
    note = next(n for n in report.notes if n.startswith("not read (symbolic links"))
    assert "b.yaml" in note and "linked" in note and "loop.yaml" in note


def test_links_inside_the_directory_and_given_files_are_read(tmp_path: Path) -> None:
    repo, outside = _tree(tmp_path)
    (repo / "sub").mkdir()
    (repo / "sub" / "same.yaml").symlink_to(repo / "a.yaml")
    skipped: list[str] = []
    found = expand_paths([repo], skipped)
    assert found == [str(repo / "a.yaml"), str(repo / "sub" / "same.yaml")]
    assert skipped == []
    # a file named on the command line is the user's choice, wherever it is
    assert expand_paths([outside / "elsewhere.yaml"]) == [str(outside / "elsewhere.yaml")]
    report = check_manifests([repo])
    assert not any(n.startswith("not read (symbolic links") for n in report.notes)
