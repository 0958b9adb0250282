"""Paths a pull request names stay in its repository (issue 24, the confinement rule).

A pull request writes the experiment file, the Dockerfiles, the build context and the lint
settings. Each case builds a small repository (a ``.git`` folder marks its top level) next to
"host" files outside it, and checks that servelab neither opens nor quotes those host files
unless the command line (``--allow-path``) says so. Every case runs servelab in its own process
through the harness: exit 0, 1 or 2 within its limits, no traceback, nothing left behind.
"""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab import spec
from servelab.errors import InputError
from servelab.textio import PathPolicy, parse_allow_path, repository_root

from .harness import run_servelab

HOST_LINE = "host-secret-line-7f3a: root:x:0:0"
DOCKERFILE = ("FROM 127.0.0.1:5000/base@sha256:" + "0" * 64 + "\nUSER 10001\n"
              'HEALTHCHECK CMD ["true"]\nCMD ["python3", "-m", "server"]\n')


def _repo(tmp_path: Path) -> tuple[Path, Path]:
    """(repository, host directory beside it holding a secret file and a model folder)."""
    repo, host = tmp_path / "repo", tmp_path / "host"
    (repo / ".git").mkdir(parents=True)
    (repo / "Dockerfile").write_text(DOCKERFILE)
    host.mkdir()
    (host / "passwd").write_text(HOST_LINE + "\n")
    (host / "models").mkdir()
    (host / "models" / "config.json").write_text('{"hidden_size": 8}\n')
    return repo, host


def _experiment(repo: Path, body: str, name: str = "experiment.yaml") -> Path:
    path = repo / name
    path.write_text("apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: t}\n"
                    "spec:\n  change: c\n" + body)
    return path


# ---------------------------------------------------------------- every field, every shape

FIELDS = {
    "dockerfile": "  treatment:\n    dockerfile: {v}\n",
    "context": "  treatment:\n    context: {v}\n",
    "buildArgsFile": "  treatment:\n    buildArgsFile: {v}\n",
    "model": "  model:\n    path: {v}\n",
    "bodyFile": "  request:\n    path: /p\n    bodyFile: {v}\n",
    "ignoreFile": "  scan:\n    ignoreFile: {v}\n",
    "vex": "  scan:\n    vex: {v}\n",
}


def _shapes(host: Path, repo: Path) -> dict[str, str]:
    """Ways to name the host's file: absolute, climbing, and through links in the repo."""
    (repo / "link-file").symlink_to(host / "passwd")
    (repo / "link-dir").symlink_to(host)
    (repo / "sub").mkdir()
    (repo / "sub" / "up").symlink_to("../../host")
    return {
        "absolute": str(host / "passwd"),
        "climbing": "../host/passwd",
        "deep-climb": "sub/../../host/passwd",
        "link-to-file": "link-file",
        "link-to-dir": "link-dir/passwd",
        "relative-link": "sub/up/passwd",
        "root": "/",
    }


@given(field=st.sampled_from(sorted(FIELDS)),
       shape=st.sampled_from(["absolute", "climbing", "deep-climb", "link-to-file",
                              "link-to-dir", "relative-link", "root"]))
def test_paths_outside_the_repository_are_refused(tmp_path_factory: pytest.TempPathFactory,
                                                  field: str, shape: str) -> None:
    """trust-paths-outside: whatever the field and however the path gets out (absolute,
    ``../``, a link to a file or a folder), validate and load refuse it with the file, the
    line, the kind to allow, and never the host file's content."""
    repo, host = _repo(tmp_path_factory.mktemp("case"))
    value = _shapes(host, repo)[shape]
    exp = _experiment(repo, FIELDS[field].format(v=value))
    report = spec.validate_files([exp])
    outside = [f for f in report.findings if "leads outside the repository" in f.message]
    assert outside, [f.message for f in report.findings]
    assert outside[0].line is not None and outside[0].line >= 6
    assert f"--allow-path {field}=DIR" in (outside[0].fix or "")
    with pytest.raises(InputError) as err:
        spec.load_experiment(exp)
    assert HOST_LINE not in str(err.value)


def test_validate_and_lint_spec_never_quote_a_host_file(tmp_path: Path) -> None:
    """trust-paths-no-echo: ``lint --spec`` once parsed a host file named as the Dockerfile
    and echoed its first line in the error; a Dockerfile in the repository that is a link to
    that file is the same case."""
    repo, host = _repo(tmp_path)
    (repo / "Dockerfile").unlink()
    (repo / "Dockerfile").symlink_to(host / "passwd")
    exp = _experiment(repo, "  treatment:\n    context: .\n")
    for argv in (["lint", "--spec", str(exp), "--no-hadolint"], ["validate", str(exp)]):
        out = run_servelab(argv, cwd=repo)
        assert out.problems() == [], out.explain()
        assert out.code == 2, out.explain()
        assert HOST_LINE not in out.stdout + out.stderr
        assert "leads outside the repository" in out.stdout + out.stderr


def test_only_the_command_line_allows_a_path(tmp_path: Path) -> None:
    """trust-paths-opt-in: ``--allow-path model=DIR`` lets model.path lead there (and only
    model.path); an experiment cannot set it (no schema field), nor can the lint settings."""
    repo, host = _repo(tmp_path)
    exp = _experiment(repo, f"  model:\n    path: {host / 'models'}\n")
    assert run_servelab(["validate", str(exp)], cwd=repo).code == 2
    ok = run_servelab(["validate", str(exp), f"--allow-path=model={host}"], cwd=repo)
    assert ok.code == 0, ok.explain()
    other = run_servelab(["validate", str(exp), f"--allow-path=vex={host}"], cwd=repo)
    assert other.code == 2, other.explain()
    loaded = spec.load_experiment(exp, allowed=(parse_allow_path(f"model={host}"),))
    assert loaded.model is not None and loaded.model.path == (host / "models").resolve()
    sneaky = _experiment(repo, f"  allowPaths: {{model: {host}}}\n  model:\n"
                         f"    path: {host / 'models'}\n", "sneaky.yaml")
    report = spec.validate_files([sneaky])
    assert any("unknown key 'allowPaths'" in f.message for f in report.findings)
    (repo / ".servelab.yaml").write_text(f"lint:\n  allow-paths: [model={host}]\n")
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=repo)
    assert out.code == 2 and "unknown lint setting" in out.stderr, out.explain()


@pytest.mark.parametrize("text", ["model", "model=", "=/x", "weights=/x", "model=/a\nb"])
def test_a_bad_allow_path_is_a_usage_error(tmp_path: Path, text: str) -> None:
    out = run_servelab(["validate", "x.yaml", "--allow-path", text], cwd=tmp_path)
    assert out.code == 2, out.explain()
    assert "--allow-path" in out.stderr and "Traceback" not in out.stderr
    assert not out.killed and out.seconds < 10


def test_the_resolved_path_is_what_is_opened_and_mounted(tmp_path: Path) -> None:
    """trust-paths-resolved: a link inside the repository to a folder inside it is followed
    once, when the experiment is loaded: the model that smoke mounts is the real folder."""
    repo, _host = _repo(tmp_path)
    (repo / "weights" / "v1").mkdir(parents=True)
    (repo / "current").symlink_to("weights/v1")
    exp = spec.load_experiment(_experiment(repo, "  model:\n    path: current\n"))
    assert exp.model is not None and exp.model.path == repo / "weights" / "v1"
    assert not exp.model.path.is_symlink()
    assert exp.treatment.dockerfile == repo / "Dockerfile"


# ---------------------------------------------------------------- named files: kind, source


def test_named_files_must_exist_and_be_regular(tmp_path: Path) -> None:
    """trust-paths-kind: a FIFO or a link to a device in the repository is never a
    Dockerfile or a request body; a missing file is named, not found later."""
    repo, _host = _repo(tmp_path)
    os.mkfifo(repo / "body.fifo")
    (repo / "zero").symlink_to("/dev/zero")
    exp = _experiment(repo, "  treatment:\n    dockerfile: body.fifo\n"
                      "  request:\n    path: /p\n    bodyFile: gone.json\n"
                      "  scan:\n    vex: zero\n")
    out = run_servelab(["validate", str(exp)], cwd=repo)
    assert out.code == 2, out.explain()
    assert out.problems() == [], out.explain()
    assert "'body.fifo' is a named pipe, not a regular file" in out.stdout
    assert "'gone.json' does not exist" in out.stdout
    assert "scan.vex 'zero' leads outside the repository" in out.stdout


def test_an_arm_names_one_source(tmp_path: Path) -> None:
    """trust-paths-one-source: dockerfile with image and gitRef is contradictory."""
    repo, _host = _repo(tmp_path)
    exp = _experiment(repo, "  treatment:\n    image: 127.0.0.1:5000/a:1\n"
                      "    dockerfile: Dockerfile\n    gitRef: main\n")
    out = run_servelab(["validate", str(exp)], cwd=repo)
    assert out.code == 2, out.explain()
    assert "names two sources" in out.stdout and "gitRef" in out.stdout


# ---------------------------------------------------------------- the repository's root


@given(depth=st.integers(min_value=0, max_value=4),
       name=st.text(string.ascii_lowercase, min_size=1, max_size=6))
def test_the_root_is_the_git_top_level_or_the_experiment_folder(
        tmp_path_factory: pytest.TempPathFactory, depth: int, name: str) -> None:
    base = tmp_path_factory.mktemp("root")
    deep = base.joinpath(*[name] * depth)
    deep.mkdir(parents=True, exist_ok=True)
    assert repository_root(deep / "x.yaml") == deep.resolve()  # no git: its own folder
    (base / ".git").mkdir()
    assert repository_root(deep / "x.yaml") == base.resolve()
    policy = PathPolicy.for_file(deep / "x.yaml")
    assert policy.permits(deep.resolve(), "model")
    assert not policy.permits(base.resolve().parent, "model")


# ---------------------------------------------------------------- lint settings


def test_settings_above_the_repository_are_never_used(tmp_path: Path) -> None:
    """trust-paths-settings: a .servelab.yaml above the git top level (or, outside git, above
    the working directory) disabled rules silently; now only the repository's counts."""
    above = tmp_path / ".servelab.yaml"
    above.write_text("lint:\n  disable: [root-user, base-unpinned]\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "Dockerfile").write_text("FROM python:3.11\nCMD [\"python3\"]\n")
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=repo)
    assert out.code == 1 and "base-unpinned" in out.stdout, out.explain()
    assert "settings:" not in out.stdout
    nogit = tmp_path / "plain" / "sub"
    nogit.mkdir(parents=True)
    (nogit / "Dockerfile").write_text("FROM python:3.11\nCMD [\"python3\"]\n")
    (tmp_path / "plain" / ".servelab.yaml").write_text(above.read_text())
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=nogit)
    assert out.code == 1 and "base-unpinned" in out.stdout, out.explain()


def test_a_settings_link_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    repo, host = _repo(tmp_path)
    (host / "lint.yaml").write_text("lint:\n  disable: [base-unpinned]\n")
    (repo / ".servelab.yaml").symlink_to(host / "lint.yaml")
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=repo)
    assert out.code == 2 and "leads outside the repository" in out.stderr, out.explain()
    assert "--allow-path settings=DIR" in out.stderr


def test_the_output_names_the_settings_and_what_they_disabled(tmp_path: Path) -> None:
    import json

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "svc").mkdir()
    (repo / ".servelab.yaml").write_text("lint:\n  disable: [root-user, no-health]\n")
    (repo / "svc" / "Dockerfile").write_text("FROM python:3.11\nCMD [\"python3\"]\n")
    text = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=repo / "svc")
    want = f"settings: {repo.resolve() / '.servelab.yaml'} (disables: no-health, root-user)"
    assert want in text.stdout, text.explain()
    js = run_servelab(["lint", "--no-hadolint", "-f", "json", "Dockerfile"], cwd=repo / "svc")
    doc = json.loads(js.stdout)
    assert doc["settings"]["file"] == str(repo.resolve() / ".servelab.yaml")
    assert doc["settings"]["disabled"] == ["no-health", "root-user"]


def test_a_model_folder_holding_a_link_out_is_refused(tmp_path: Path) -> None:
    """trust-paths-model-links: the model folder is hashed file by file before it is
    mounted; a link in it to a host file was hashed (opened) too. A link that stays in the
    repository (a Hugging Face cache's snapshots/ -> ../../blobs/) is fine."""
    repo, host = _repo(tmp_path)
    blobs, snap = repo / "hub" / "blobs", repo / "hub" / "snapshots" / "abc"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (blobs / "f00d").write_text('{"hidden_size": 8}\n')
    (snap / "config.json").symlink_to("../../blobs/f00d")
    exp = _experiment(repo, "  model:\n    path: hub/snapshots/abc\n")
    assert spec.validate_files([exp]).findings == []
    (snap / "extra.json").symlink_to(host / "passwd")
    found = spec.validate_files([exp]).findings
    assert [f.line for f in found] == [7], found
    assert "holds extra.json, a symbolic link that leads outside" in found[0].message
    with pytest.raises(InputError):
        spec.load_experiment(exp)
    loaded = spec.load_experiment(exp, allowed=(parse_allow_path(f"model={host}"),))
    assert loaded.model is not None and loaded.model.path == snap


def test_lint_of_a_folder_never_reads_a_dockerfile_linked_out(tmp_path: Path) -> None:
    """trust-paths-lint-dir: ``servelab lint DIR`` on a pull request's checkout found a
    ``Dockerfile`` linked to a host file and parsed it, quoting its line in the error."""
    repo, host = _repo(tmp_path)
    (repo / "svc").mkdir()
    (repo / "svc" / "Dockerfile").symlink_to(host / "passwd")
    out = run_servelab(["lint", "--no-hadolint", "."], cwd=repo)
    assert out.problems() == [], out.explain()
    assert out.code == 2 and "leads outside the repository" in out.stderr, out.explain()
    assert HOST_LINE not in out.stdout + out.stderr
