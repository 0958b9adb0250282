"""k8s-check --image: whether the deployed image was built, from its config's history.

Real images: the serving image of tests/data/k8s/image/context built with buildx (with and
without source labels), and the same image changed inside a container and saved with
``docker commit`` (an empty ``created_by``, and the commit of a shell session), read from the
local engine through the verified reader.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab import proc
from servelab.findings import Finding
from servelab.k8s import check_manifests
from servelab.k8s.provenance import SHELL_SESSION, hand_made

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s" / "image"
MANIFEST = DATA / "positive" / "image-without-source-annotations.yaml"
NAME = "registry.example.internal/llm/serve:1.0"
SOURCE = "https://github.com/example-org/llm-serve"
REVISION = "4f2c1e9a7b3d5c8e0f1a2b3c4d5e6f708192a3b4"
Reader = Callable[[Path], Any]


def _build(dest: Path, *labels: str) -> Path:
    args = [x for label in labels for x in ("--label", label)]
    proc.run(["docker", "buildx", "build", "--network", "none", "--provenance=false", *args,
              "--output", f"type=oci,dest={dest},name={NAME}", str(DATA / "context")],
             env={"SOURCE_DATE_EPOCH": "1700000000", "BUILDX_NO_DEFAULT_ATTESTATIONS": "1"},
             timeout=300)
    return dest


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> Path:
    return _build(tmp_path_factory.mktemp("prov") / "plain.oci.tar")


def _provenance(image: str) -> list[Finding]:
    report = check_manifests([MANIFEST], image=image)
    return [f for f in report.findings if f.rule_id == "image-provenance"]


@pytest.mark.docker
def test_a_built_image_without_source_labels_is_a_lower_finding(plain: Path,
                                                                 k8s_fixture: Reader) -> None:
    fx = k8s_fixture(MANIFEST)
    found = _provenance(str(plain))
    assert [(f.rule_id, f.line, f.severity.value) for f in found] == [
        ("image-provenance", 21, "info")]
    for rule, line, text in fx.says:
        assert any(f.rule_id == rule and f.line == line and text in f.message for f in found)
    assert "not rebuildable" not in found[0].message  # every layer has its instruction


@pytest.mark.docker
def test_a_labelled_build_is_traced_and_rebuildable(tmp_path: Path, docker_client: Any) -> None:
    labelled = _build(tmp_path / "labelled.oci.tar",
                      f"org.opencontainers.image.source={SOURCE}",
                      f"org.opencontainers.image.revision={REVISION}")
    assert _provenance(str(labelled)) == []


@pytest.fixture
def committed(plain: Path) -> Iterator[Callable[[list[str], list[str], list[str]], str]]:
    """Make images the way a person at a shell does: load the built image, create a container,
    copy a file into it, ``docker commit`` it. Everything made here is removed after."""
    made: list[str] = []
    base = f"servelab-test-prov:{uuid.uuid4().hex[:12]}"
    proc.run(["docker", "load", "-i", str(plain)], timeout=300)
    proc.run(["docker", "tag", NAME, base], timeout=60)
    made += [base, NAME]

    def commit(options: list[str], command: list[str], commit_args: list[str]) -> str:
        ref = f"servelab-test-prov:{uuid.uuid4().hex[:12]}"
        cid = proc.run(["docker", "create", *options, base, *command],
                       timeout=60).stdout.strip()
        try:
            proc.run(["docker", "cp", str(DATA / "context" / "Dockerfile"),
                      f"{cid}:/opt/serve/edited-by-hand"], timeout=60)
            proc.run(["docker", "commit", *commit_args, cid, ref], timeout=120)
        finally:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False,
                           timeout=60)
        made.append(ref)
        return ref

    try:
        yield commit
    finally:
        for ref in made:
            subprocess.run(["docker", "image", "rm", ref], capture_output=True, check=False,
                           timeout=120)


def _last_layer(ref: str, tmp_path: Path) -> tuple[str, int, int]:
    """The digest and size of the image's last layer, and the number of layers, read from
    ``docker save`` by hand."""
    out = tmp_path / "saved.tar"
    proc.run(["docker", "save", "-o", str(out), ref], timeout=300)
    with tarfile.open(out) as tf:
        def read(name: str) -> Any:
            f = tf.extractfile(name)
            assert f is not None
            return json.loads(f.read())
        index = read("index.json")
        digest = index["manifests"][0]["digest"]
        manifest = read("blobs/" + digest.replace(":", "/"))
        layer = manifest["layers"][-1]
    return str(layer["digest"]), int(layer["size"]), len(manifest["layers"])


@pytest.mark.docker
@pytest.mark.parametrize(
    ("case", "how"),
    [
        # (docker create options, its command, docker commit options): the commit has no command
        ((["--entrypoint", "/bin/bash"], [], []), "no created_by"),
        (([], ["/bin/bash"], ["-m", "fixed the config by hand"]),
         "created_by '/bin/bash', a shell session, comment 'fixed the config by hand'"),
    ],
    ids=["empty-created-by", "shell-session"],
)
def test_a_committed_layer_makes_the_image_not_rebuildable(
        committed: Callable[[list[str], list[str], list[str]], str], tmp_path: Path,
        case: tuple[list[str], list[str], list[str]], how: str) -> None:
    ref = committed(*case)
    digest, size, count = _last_layer(ref, tmp_path)
    found = _provenance(f"docker-daemon:{ref}")
    errors = [f for f in found if f.severity.value == "error"]
    assert len(errors) == 1, [f.message for f in found]
    message = errors[0].message
    assert "is not rebuildable" in message
    assert f"layer {count} of {count} ({digest[:19]}…" in message  # which layer ...
    shown = f"{size} B" if size < 1000 else f"{size / 1000:.1f} KB"
    assert shown in message  # ... and how big
    assert how in message
    assert errors[0].line == 21  # at the container's image


@pytest.mark.parametrize(
    ("created_by", "made_by_hand"),
    [
        ("", True), ("   ", True), ("/bin/bash", True), ("bash -l", True), ("sh", True),
        ("/bin/sh -c apt-get update", False), ("RUN /bin/sh -c pip install x # buildkit", False),
        ("COPY rootfs/ / # buildkit", False), ("|2 A=1 B=2 /bin/sh -c make", False),
        ("ADD file:6cc in / ", False), ("bazel build //serve:image", False),
    ],
)
def test_what_counts_as_no_build_instruction(created_by: str, made_by_hand: bool) -> None:
    assert hand_made({"created_by": created_by}) is made_by_hand
    assert bool(SHELL_SESSION.match("/usr/bin/zsh"))


def _pm(layers: int, annotations: dict[str, str] | None = None) -> Any:
    from servelab.image.oci import Descriptor, PlatformManifest

    blobs = [Descriptor("application/vnd.oci.image.layer.v1.tar+gzip", "sha256:" + f"{i}" * 64,
                        1500 * (i + 1)) for i in range(layers)]
    config = Descriptor("application/vnd.oci.image.config.v1+json", "sha256:" + "c" * 64, 100)
    manifest = Descriptor("application/vnd.oci.image.manifest.v1+json", "sha256:" + "d" * 64,
                          500, annotations or {})
    return PlatformManifest(manifest, "linux/amd64", {}, config, blobs)


def test_history_entries_match_layers_past_empty_ones() -> None:
    """Entries with empty_layer (ENV, CMD) make no layer: the second layer is the commit."""
    from servelab.k8s.provenance import judge

    cfg = {"history": [{"created_by": "COPY rootfs/ / # buildkit"},
                       {"created_by": "ENV A=1", "empty_layer": True},
                       {"created_by": "", "comment": "hot fix"}],
           "config": {"Labels": {"org.opencontainers.image.source": SOURCE}}}
    h = judge("img", _pm(2), cfg)
    assert [(x.index, x.size) for x in h.hand_layers] == [(1, 3000)]
    assert "layer 2 of 2" in h.hand_layers[0].describe()
    assert "3.0 KB" in h.hand_layers[0].describe() and "hot fix" in h.hand_layers[0].describe()
    assert h.sources == {"org.opencontainers.image.source": SOURCE}  # revision missing
    assert not h.mismatch and not h.no_history


def test_a_history_that_does_not_line_up_is_said_and_none_is_not_judged() -> None:
    from servelab.k8s.provenance import judge

    short = judge("img", _pm(3, {"org.opencontainers.image.revision": REVISION}),
                  {"history": [{"created_by": "COPY a /a # buildkit"}]})
    assert short.mismatch == "1 history entries make layers but the manifest has 3 layers"
    assert short.sources == {"org.opencontainers.image.revision": REVISION}
    assert judge("img", _pm(1), {}).no_history
