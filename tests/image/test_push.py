"""servelab push: the tested image of a real run into the real local registry, byte for byte.

Each run here is a real `servelab run --stages build` of the bundled example's treatment (two
repeats, so reproducibility is measured); the registry is the one set-up starts on
127.0.0.1:5000. Negative cases: a treatment that writes the build time (not reproducible), an
archive whose layer was changed after the run, a target with a digest, a run without its
archive, a directory that is no run.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from servelab.errors import ExitCode, InputError
from servelab.image import push as push_mod
from servelab.image.push import TestedImage, push_tested

ROOT = Path(__file__).resolve().parents[2]
SERVELAB = [sys.executable, "-m", "servelab"]

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.slow]


def _servelab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SERVELAB, *args], capture_output=True, text=True, timeout=900,
                          check=False)


def _treatment_only(tmp: Path, base_image: str, *, stamp: bool) -> Path:
    """The example's treatment alone (two repeats, fixed epoch); *stamp* writes the build
    time into the image, so that no two builds are alike."""
    ctx = tmp / "ctx"
    shutil.copytree(ROOT / "examples", ctx, ignore=shutil.ignore_patterns("build-args.env"))
    (ctx / "build-args.env").write_text(f"BASE_IMAGE={base_image}\n")
    if stamp:
        df = (ctx / "Dockerfile").read_text().replace(
            "USER 10001:10001", "RUN date +%s%N > /app/built-at\nUSER 10001:10001")
        (ctx / "Dockerfile").write_text(df)
    spec = (ctx / "experiment.yaml").read_text()
    spec = spec.split("\n  control:")[0] + "\n  treatment:" + spec.split("\n  treatment:")[1]
    spec += "  build:\n    sourceDateEpoch: 1700000000\n"
    (ctx / "experiment.yaml").write_text(spec)
    return ctx / "experiment.yaml"


def _run(tmp: Path, base_image: str, *, stamp: bool = False) -> Path:
    out = tmp / "out"
    proc = _servelab("run", str(_treatment_only(tmp, base_image, stamp=stamp)),
                     "--out", str(out), "--repeats", "2", "--stages", "build")
    assert proc.returncode == (1 if stamp else 0), proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, docker_client: object,
            base_image: str) -> Path:
    return _run(tmp_path_factory.mktemp("push-run"), base_image)


def _repo(registry: str) -> str:
    return f"{registry}/servelab-test/push-{uuid.uuid4().hex[:10]}"


def _get(url: str, accept: str = "") -> tuple[bytes, dict[str, str]]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read(), {k.lower(): v for k, v in r.headers.items()}


def _archive_blob(archive: Path, digest: str) -> bytes:
    with tarfile.open(archive) as tf:
        fh = tf.extractfile("blobs/sha256/" + digest.partition(":")[2])
        assert fh is not None
        return fh.read()


def _manifest(archive: Path, digest: str) -> dict[str, Any]:
    return dict(json.loads(_archive_blob(archive, digest)))


def test_push_puts_the_tested_digest_in_the_registry_byte_for_byte(
        run_dir: Path, registry: str) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    repo = _repo(registry)
    proc = _servelab("push", str(run_dir), "--to", f"{repo}:pr-1", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    tested, pushed = doc["tested"], doc["pushed"]
    assert tested["digest"] == summary["digest"] and tested["repeats"] == 2
    assert pushed["digest"] == summary["digest"]
    assert pushed["ref"] == f"{repo}@{summary['digest']}"
    archive = Path(tested["archive"])
    assert archive == run_dir / "images" / f"{summary['digest'][7:]}.oci.tar"
    # The registry's own digest for the tag and for the digest: the tested one.
    name = repo.split("/", 1)[1]
    accept = "application/vnd.oci.image.manifest.v1+json"
    body, headers = _get(f"http://{registry}/v2/{name}/manifests/pr-1", accept)
    assert headers["docker-content-digest"] == summary["digest"]
    assert "sha256:" + hashlib.sha256(body).hexdigest() == summary["digest"]
    assert body == _archive_blob(archive, summary["digest"])  # the manifest, byte for byte
    manifest = _manifest(archive, summary["digest"])
    for blob in [manifest["config"], *manifest["layers"]]:  # and every blob as it was
        data, _ = _get(f"http://{registry}/v2/{name}/blobs/{blob['digest']}")
        assert data == _archive_blob(archive, blob["digest"])
    assert pushed["blobs_uploaded"] == len(manifest["layers"]) + 1
    assert pushed["bytes_uploaded"] == sum(b["size"] for b in
                                           [manifest["config"], *manifest["layers"]])


def test_a_second_push_uploads_nothing_and_answers_the_same_digest(
        run_dir: Path, registry: str) -> None:
    repo = _repo(registry)
    tested = push_mod.tested_image(run_dir)
    first = push_tested(tested, repo)
    again = push_tested(tested, f"{repo}:again")
    assert first.digest == again.digest == tested.digest
    assert first.tag is None and again.tag == "again"
    assert again.blobs_uploaded == 0 and again.blobs_present == first.blobs_uploaded > 0


def test_dry_run_finds_the_image_and_pushes_nothing(run_dir: Path) -> None:
    proc = _servelab("push", str(run_dir), "--dry-run", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["pushed"] is None
    assert Path(doc["tested"]["archive"]).is_file()


def test_not_reproducible_arm_is_refused(tmp_path: Path, docker_client: object,
                                         base_image: str, registry: str) -> None:
    out = _run(tmp_path, base_image, stamp=True)
    proc = _servelab("push", str(out), "--to", f"{_repo(registry)}:x")
    assert proc.returncode == ExitCode.FINDINGS, proc.stderr
    assert "not reproducible" in proc.stderr and "2 digests" in proc.stderr


def test_a_changed_layer_is_refused_and_the_tested_digest_never_lands(
        run_dir: Path, tmp_path: Path, registry: str) -> None:
    tested = push_mod.tested_image(run_dir)
    layer = _manifest(tested.archive, tested.digest)["layers"][-1]["digest"]
    bad = tmp_path / "bad.oci.tar"
    shutil.copy(tested.archive, bad)
    with tarfile.open(bad) as tf:
        member = tf.getmember("blobs/sha256/" + layer.partition(":")[2])
    with bad.open("r+b") as f:  # flip one byte of the layer, same size
        f.seek(member.offset_data + member.size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    repo = _repo(registry)
    with pytest.raises(InputError, match=layer[:19]):
        push_tested(TestedImage("treatment", tested.digest, bad, 2), repo)
    name = repo.split("/", 1)[1]
    req = urllib.request.Request(f"http://{registry}/v2/{name}/manifests/{tested.digest}",
                                 method="HEAD")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 404


@pytest.mark.parametrize(("args", "message"), [
    (["--to", "127.0.0.1:5000/x/y@sha256:" + "0" * 64], "carries a digest"),
    (["--to", "127.0.0.1:5000/x/y", "--arm", "control"], "has no such arm"),
    (["--dry-run", "--arm", "../x"], "is not an arm name"),
])
def test_bad_targets_and_arms_are_usage_errors(run_dir: Path, args: list[str],
                                               message: str) -> None:
    proc = _servelab("push", str(run_dir), *args)
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr
    assert message in proc.stderr


def test_a_copy_without_its_archive_is_refused(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("images"))
    for result in copy.glob("treatment/repeat-*/result.json"):  # the recorded paths are gone
        doc = json.loads(result.read_text())
        doc["stages"]["build"]["record"]["archive"] = str(tmp_path / "gone.oci.tar")
        result.write_text(json.dumps(doc))
    proc = _servelab("push", str(copy), "--dry-run")
    assert proc.returncode == ExitCode.BAD_INPUT
    assert "is not in" in proc.stderr and "images" in proc.stderr


def test_a_directory_that_is_no_run_is_refused(tmp_path: Path) -> None:
    proc = _servelab("push", str(tmp_path), "--dry-run")
    assert proc.returncode == ExitCode.BAD_INPUT
    assert "not a servelab run directory" in proc.stderr


def test_multi_platform_archive_pushes_the_index_and_every_platform(
        tmp_path: Path, docker_client: object, registry: str) -> None:
    """A nested index (buildx multi-platform): both manifests by digest, the index by tag."""
    sys.path.insert(0, str(ROOT / "tests" / "scan"))
    from scanfixtures import build_multiplatform_oci

    from servelab.image.oci import OciArchive

    archive = build_multiplatform_oci(tmp_path, f"push-{uuid.uuid4().hex[:8]}")
    with OciArchive(archive) as img:
        amd64 = next(p for p in img.platform_manifests() if p.platform == "linux/amd64")
        top = img.top()[1]["manifests"][0]["digest"]
    repo = _repo(registry)
    result = push_tested(TestedImage("treatment", amd64.digest, archive, 1), f"{repo}:multi")
    assert result.digest == amd64.digest and result.top_digest == top != amd64.digest
    assert len(result.manifests) == 3 and result.manifests[-1] == top
    name = repo.split("/", 1)[1]
    _, headers = _get(f"http://{registry}/v2/{name}/manifests/multi",
                      "application/vnd.oci.image.index.v1+json")
    assert headers["docker-content-digest"] == top
