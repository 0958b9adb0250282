"""k8s-check --image: the scripts a container runs, read from a real image's layers.

The image is built here with buildx, FROM scratch (tests/data/k8s/image/context), into an OCI
archive; the same archive is then read as a servelab run directory's tested image and from
the local engine. The manifests beside it are fixtures like the others: ``# expect:`` lines
for the positives, nothing for the negatives, ``# only:`` the rules compared.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab import proc
from servelab.errors import InputError
from servelab.image import push as push_mod
from servelab.k8s import check_manifests
from servelab.k8s.imagefiles import _Keep
from servelab.k8s.layerfs import Layers

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s" / "image"
GOOD_RESULT = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good" / "result.json"
POSITIVE = sorted((DATA / "positive").glob("*.yaml"))
NEGATIVE = sorted((DATA / "negative").glob("*.yaml"))
NAME = "registry.example.internal/llm/serve:1.0"
Reader = Callable[[Path], Any]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Path:
    """The serving image of tests/data/k8s/image/context as an OCI archive (buildx)."""
    dest = tmp_path_factory.mktemp("k8s-image") / "serve.oci.tar"
    proc.run(["docker", "buildx", "build", "--network", "none", "--provenance=false",
              "--output", f"type=oci,dest={dest},name={NAME}", str(DATA / "context")],
             env={"SOURCE_DATE_EPOCH": "1700000000", "BUILDX_NO_DEFAULT_ATTESTATIONS": "1"},
             timeout=300)
    return dest


def _manifest_digest(archive: Path) -> str:
    with tarfile.open(archive) as tf:
        f = tf.extractfile("index.json")
        assert f is not None
        index = json.loads(f.read())
    return str(index["manifests"][0]["digest"])


def _findings(path: Path, image: str | None, only: set[str]) -> Counter[tuple[str, int]]:
    report = check_manifests([path], image=image)
    return Counter((f.rule_id, f.line or 0) for f in report.findings if f.rule_id in only)


@pytest.mark.docker
@pytest.mark.parametrize("path", POSITIVE, ids=lambda p: p.stem)
def test_positive_with_the_image(path: Path, archive: Path, k8s_fixture: Reader) -> None:
    fx = k8s_fixture(path)
    assert fx.expect and fx.only
    assert _findings(path, str(archive), fx.only) == fx.expect
    assert not fx.expect & _findings(path, None, fx.only), "only the image shows them"


@pytest.mark.docker
@pytest.mark.parametrize("path", NEGATIVE, ids=lambda p: p.stem)
def test_negative_with_the_image(path: Path, archive: Path, k8s_fixture: Reader) -> None:
    fx = k8s_fixture(path)
    assert not fx.expect
    assert not _findings(path, str(archive), fx.only)


@pytest.mark.docker
def test_messages_name_the_script_and_line(archive: Path) -> None:
    report = check_manifests([DATA / "positive" / "entrypoint-in-image.yaml"],
                             image=str(archive))
    by_rule = {f.rule_id: f.message for f in report.findings
               if f.rule_id in ("start-install", "model-mount")}
    assert "pip install flash-attn accelerate (not pinned)" in by_rule["start-install"]
    assert "(in the image's /opt/serve/start.sh, line 4)" in by_rule["start-install"]
    assert "huggingface-cli download meta-llama/Llama-3.1-8B-Instruct" in by_rule["model-mount"]
    assert "(in the image's /opt/serve/install_model.sh, line 5)" in by_rule["model-mount"]
    assert "into /models/llama-3.1-8b-instruct, on no persistent volume" in by_rule["model-mount"]
    assert any("read 4 shell script(s)" in n and "container(s) server" in n
               for n in report.notes), report.notes


@pytest.mark.docker
def test_the_image_by_digest_only_applies_to_that_digest(archive: Path, tmp_path: Path) -> None:
    text = (DATA / "positive" / "entrypoint-in-image.yaml").read_text()
    other = "sha256:" + "0" * 64
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(text.replace(NAME, f"{NAME}@{_manifest_digest(archive)}"))
    assert _findings(pinned, str(archive), {"start-install"})
    wrong = tmp_path / "other.yaml"
    wrong.write_text(text.replace(NAME, f"{NAME}@{other}") + _SECOND)
    report = check_manifests([wrong], image=str(archive))
    # the other digest is not this image: only the deployment that names no image reads it
    assert {f.context["object"] for f in report.findings if f.rule_id == "start-install"} == {
        "Deployment/second"}


_SECOND = """---
apiVersion: apps/v1
kind: Deployment
metadata: {name: second}
spec:
  selector: {matchLabels: {app: second}}
  template:
    metadata: {labels: {app: second}}
    spec:
      containers:
        - name: server
          image: registry.example.internal/llm/serve:1.0
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def _run_dir(archive: Path, tmp_path: Path) -> Path:
    """A servelab run directory whose treatment arm built and kept *archive*."""
    digest = _manifest_digest(archive)
    run = tmp_path / "run"
    (run / "images").mkdir(parents=True)
    (run / "images" / f"{digest.split(':')[1]}.oci.tar").write_bytes(archive.read_bytes())
    # a result.json as servelab writes it (servelab reads it back through its schema), with
    # this image's digest for the treatment's first repeat
    result = json.loads(GOOD_RESULT.read_text(encoding="utf-8"))
    result.update(repeat=1, arm="treatment")
    result["stages"]["build"].update(status="ok", reason="built")
    result["image"] = {**result.get("image", {}), "digest": digest}
    # a summary.json as servelab reads it back: through its schema (at least one result)
    (run / "summary.json").write_text(json.dumps({"verdict": "improved", "results": [result]}))
    repeat = run / "treatment" / "repeat-1"
    repeat.mkdir(parents=True)
    (repeat / "result.json").write_text(json.dumps(result))
    return run


@pytest.mark.docker
def test_a_run_directory_gives_its_tested_image(archive: Path, tmp_path: Path,
                                               k8s_fixture: Reader) -> None:
    fx = k8s_fixture(DATA / "positive" / "entrypoint-in-image.yaml")
    assert _findings(fx.path, str(_run_dir(archive, tmp_path)), fx.only) == fx.expect


@pytest.mark.docker
@pytest.mark.registry
def test_an_image_in_the_local_registry(archive: Path, tmp_path: Path, registry: str,
                                        k8s_fixture: Reader) -> None:
    ref = f"{registry}/servelab-test/k8s-image-{uuid.uuid4().hex[:10]}:1.0"
    push_mod.push_tested(push_mod.tested_image(_run_dir(archive, tmp_path)), ref)
    fx = k8s_fixture(DATA / "positive" / "entrypoint-in-image.yaml")
    path = tmp_path / "registry.yaml"
    path.write_text(fx.path.read_text().replace(NAME, ref))
    assert _findings(path, ref, fx.only) == fx.expect


@pytest.fixture
def engine_image(archive: Path) -> Iterator[str]:
    """The archive loaded into the local engine under a name of its own; removed after."""
    name = f"servelab-test-k8s-image:{uuid.uuid4().hex[:12]}"
    proc.run(["docker", "load", "-i", str(archive)], timeout=300)
    proc.run(["docker", "tag", NAME, name], timeout=60)
    try:
        yield name
    finally:
        for ref in (name, NAME):
            subprocess.run(["docker", "image", "rm", ref], capture_output=True, check=False,
                           timeout=120)


@pytest.mark.docker
def test_an_engine_image(engine_image: str, tmp_path: Path, k8s_fixture: Reader) -> None:
    fx = k8s_fixture(DATA / "positive" / "entrypoint-in-image.yaml")
    path = tmp_path / "engine.yaml"
    path.write_text(fx.path.read_text().replace(NAME, engine_image))
    assert _findings(path, engine_image, fx.only) == fx.expect


def test_a_missing_image_is_bad_input(tmp_path: Path) -> None:
    path = DATA / "positive" / "entrypoint-in-image.yaml"
    with pytest.raises(InputError, match="no such file"):
        check_manifests([path], image=str(tmp_path / "absent.oci.tar"))


@pytest.mark.docker
def test_an_image_the_engine_lacks_is_bad_input_and_nothing_is_pulled(
        docker_client: Any) -> None:
    path = DATA / "positive" / "entrypoint-in-image.yaml"
    absent = f"docker.io/servelab-test/absent-{uuid.uuid4().hex[:10]}:1.0"
    with pytest.raises(InputError, match="the local engine has no such image"):
        check_manifests([path], image=absent)


def _layer(*entries: tuple[str, bytes | None, int]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
                continue
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return tarfile.open(fileobj=buf, mode="r")


def _apply_layer(tf: tarfile.TarFile, root: Layers) -> None:
    for m in tf.getmembers():
        root.apply(tf, m, "test")
    root.layer += 1


def _scripts(root: Layers) -> set[str]:
    return {p for p, n in root.files() if n.text is not None}


def test_layers_apply_in_order_with_whiteouts() -> None:
    root = Layers(_Keep(set()))
    _apply_layer(_layer(("opt/a.sh", b"pip install x\n", 0o644),
                        ("opt/run", b"#!/usr/bin/env bash\nexec serve\n", 0o755),
                        ("opt/tool", b"\x7fELF\0\0", 0o755),
                        ("opt/notes", b"#!/bin/sh\n", 0o644),
                        ("opt/data.txt", b"plain text\n", 0o644),
                        ("etc/d/b.sh", b"echo b\n", 0o644)), root)
    # `sh /opt/notes` runs a script without an exec bit: kept; an ELF or plain data is not
    assert _scripts(root) == {"/opt/a.sh", "/opt/run", "/opt/notes", "/etc/d/b.sh"}
    _apply_layer(_layer(("opt/.wh.a.sh", b"", 0o644), ("etc/d/.wh..wh..opq", b"", 0o644),
                        ("opt/run", b"binary now", 0o755), ("opt/.wh.notes", b"", 0o644)),
                 root)
    assert _scripts(root) == {"/opt/run"}  # an exec text without #! is run by sh
    _apply_layer(_layer(("opt/run", b"\x7fELF\0\0", 0o755)), root)
    assert _scripts(root) == set()


@pytest.mark.docker
def test_a_tampered_layer_is_refused(archive: Path, tmp_path: Path) -> None:
    """Every blob is verified: a layer whose bytes no longer match its digest is bad input."""
    bad = tmp_path / "tampered.oci.tar"
    with tarfile.open(archive) as src, tarfile.open(bad, "w") as dst:
        members = [(m, src.extractfile(m)) for m in src.getmembers()]
        blobs = [m for m, _ in members if m.name.startswith("blobs/") and m.isfile()]
        layer = max(blobs, key=lambda m: m.size)  # the rootfs layer, the largest blob
        for m, f in members:
            data = f.read() if f is not None else None
            if m is layer and data is not None:
                data = data[:-1] + bytes([data[-1] ^ 0xFF])
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    path = DATA / "positive" / "entrypoint-in-image.yaml"
    with pytest.raises(InputError, match="sha256"):
        check_manifests([path], image=str(bad))
