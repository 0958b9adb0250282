"""``--resolve-base``: root-user and no-health read the base image's config from the real
local registry (images pushed here through the distribution API) and the real engine."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import urllib.request
import uuid
from pathlib import Path

import pytest

from servelab.findings import Severity
from servelab.lint import LintConfig, lint_paths

from .conftest import NEUTRAL_CWD

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _put_blob(registry: str, repo: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = urllib.request.Request(f"http://{registry}/v2/{repo}/blobs/uploads/", method="POST")
    with urllib.request.urlopen(start, timeout=30) as r:
        location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    sep = "&" if "?" in location else "?"
    put = urllib.request.Request(f"{location}{sep}digest={digest}", data=data, method="PUT",
                                 headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(put, timeout=30):
        pass
    return digest


def _empty_layer() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w"):
        pass
    return gzip.compress(raw.getvalue(), mtime=0)


def push_image(registry: str, config: dict[str, object]) -> str:
    """Push a one-layer image whose config is *config*; its name@digest."""
    repo = f"servelab-test/lint-base-{uuid.uuid4().hex[:8]}"
    layer = _empty_layer()
    diff_id = "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": config,
                      "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": _put_blob(registry, repo, cfg), "size": len(cfg)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": _put_blob(registry, repo, layer), "size": len(layer)}],
    }).encode()
    req = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/1", data=manifest,
                                 method="PUT", headers={"Content-Type": OCI_MANIFEST})
    with urllib.request.urlopen(req, timeout=30):
        pass
    return f"{registry}/{repo}:1@sha256:{hashlib.sha256(manifest).hexdigest()}"


def _lint(path: Path, resolve: bool) -> tuple[dict[str, tuple[Severity, str]], list[str]]:
    report = lint_paths([path], config=LintConfig(), hadolint=False, resolve_base=resolve)
    return {f.rule_id: (f.severity, f.message) for f in report.findings}, report.notes


@pytest.mark.registry
def test_a_base_that_sets_a_non_root_user_and_a_healthcheck(
    registry: str, write_dockerfile  # type: ignore[no-untyped-def]
) -> None:
    ref = push_image(registry, {
        "User": "10001",
        "ExposedPorts": {"8000/tcp": {}},
        "Healthcheck": {"Test": ["CMD", "/bin/true"]},
        "Cmd": ["python", "-m", "server"],
    })
    path = write_dockerfile(f"FROM {ref}\nCOPY app.py /app/\n", {"app.py": "x = 1\n"})
    without, _notes = _lint(path, resolve=False)
    assert without["root-user"][0] == Severity.WARNING
    assert "unknown without --resolve-base" in without["root-user"][1]
    assert "no-health" not in without  # no start command or EXPOSE of its own: not judged
    found, notes = _lint(path, resolve=True)
    assert "root-user" not in found and "no-health" not in found
    assert notes == []


@pytest.mark.registry
def test_a_base_with_no_user_runs_as_root_and_a_server_base_needs_a_healthcheck(
    registry: str, write_dockerfile  # type: ignore[no-untyped-def]
) -> None:
    ref = push_image(registry, {"ExposedPorts": {"8080/tcp": {}}, "Cmd": ["llama-server"]})
    path = write_dockerfile(f"FROM {ref}\nCOPY app.py /app/\n", {"app.py": "x = 1\n"})
    found, _notes = _lint(path, resolve=True)
    assert found["root-user"][0] == Severity.ERROR
    assert "the registry" in found["root-user"][1]
    assert found["no-health"][0] == Severity.WARNING
    assert "its base exposes 8080/tcp" in found["no-health"][1]


@pytest.mark.registry
def test_an_unreadable_base_stays_unknown_with_a_note(
    registry: str, write_dockerfile  # type: ignore[no-untyped-def]
) -> None:
    path = write_dockerfile(f"FROM {registry}/servelab-test/no-such-image-{uuid.uuid4().hex}:1\n"
                            "CMD [\"uvicorn\", \"app:app\"]\n")
    found, notes = _lint(path, resolve=True)
    assert found["root-user"][0] == Severity.WARNING
    assert "could not be read" in found["root-user"][1]
    assert len(notes) == 1 and "--resolve-base: could not read the config" in notes[0]


@pytest.mark.docker
def test_the_local_engine_is_asked_first(base_image: str, write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    inspect = subprocess.run(["docker", "image", "inspect", base_image], capture_output=True,
                             check=False, timeout=60)
    if inspect.returncode != 0:
        pytest.skip(f"{base_image} is not in the local engine (scripts/bootstrap.sh loads it)")
    path = write_dockerfile(f"FROM {base_image}\nCMD [\"python3\", \"-m\", \"http.server\"]\n")
    found, _notes = _lint(path, resolve=True)
    # the example base is a debootstrap import: no USER, so root
    assert found["root-user"][0] == Severity.ERROR
    assert "the local engine" in found["root-user"][1]


@pytest.mark.registry
def test_cli_flag(registry: str, write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    ref = push_image(registry, {"User": "app"})
    path = write_dockerfile(f"FROM {ref}\nCMD [\"python\", \"-m\", \"worker\"]\n")
    args = [sys.executable, "-m", "servelab", "lint", str(path), "--no-hadolint", "-f", "json"]
    plain = subprocess.run(args, capture_output=True, text=True, cwd=NEUTRAL_CWD, check=False)
    resolved = subprocess.run([*args, "--resolve-base"], capture_output=True, text=True,
                              cwd=NEUTRAL_CWD, check=False)
    assert plain.returncode == 0 and resolved.returncode == 0, resolved.stderr
    rules = lambda out: {f["rule"] for f in json.loads(out)["findings"]}  # noqa: E731
    assert "root-user" in rules(plain.stdout)
    assert "root-user" not in rules(resolved.stdout)
