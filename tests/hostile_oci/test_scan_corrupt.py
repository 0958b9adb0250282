"""scan gives 2 for a corrupt input image, as diff does (issue 24).

Trivy read a layout whose layer blob was cut short, or replaced, and reported "no findings"
(exit 0, a false pass), and a layer that was not a tar made Trivy fail (exit 3, as for a
missing tool). scan now reads the image through the verified reader first (digests, declared
sizes, the config's diff_ids, decompression, the tar itself): a corrupt input is exit 2 with
the blob named, before Trivy runs. Real Trivy, a fixture DB written at test time, no network.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hostile_images import (
    DockerArchive,
    Image,
    Layer,
    base_files,
    blob_path,
    compress,
    sha,
    tar_of,
)

import trivydb

pytestmark = pytest.mark.trivy


def _scan(target: Path | str, cache: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run([sys.executable, "-m", "servelab", "scan", str(target), "--offline",
                           "--cache-dir", str(cache)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def _cut_short(root: Path) -> str:
    raw = tar_of(base_files())
    return Image([Layer(compress(raw, "gzip")[:-12], "gzip", raw=raw)]).write(root)["layers"][0]


def _replaced(root: Path) -> str:
    digest = Image([Layer.of(base_files())]).write(root)["layers"][0]
    blob_path(root, digest).write_bytes(b"x" * 100)
    return digest


def _not_a_tar(root: Path) -> str:
    junk = os.urandom(3000)
    return Image([Layer(junk, "gzip", raw=junk)]).write(root)["layers"][0]


def _wrong_diff_id(root: Path) -> str:
    layer = Layer(compress(tar_of(base_files()), "gzip"), "gzip", diff_id=sha(b"another tar"))
    return Image([layer]).write(root)["layers"][0]


@pytest.mark.parametrize(("make", "said"), [
    (_cut_short, "truncated"), (_replaced, "is truncated"), (_not_a_tar, "not a readable tar"),
    (_wrong_diff_id, "diff_id"),
], ids=["gzip-cut-short", "blob-replaced", "not-a-tar", "wrong-diff-id"])
def test_a_corrupt_image_is_exit_2(tmp_path: Path, trivy_bin: str, make: object,
                                   said: str) -> None:
    """trust-options-scan-corrupt"""
    cache = tmp_path / "cache"
    trivydb.write_db(cache)
    digest = make(tmp_path / "img")  # type: ignore[operator]
    res = _scan(tmp_path / "img", cache, tmp_path)
    assert res.returncode == 2, res.stderr
    assert said in res.stderr and digest.split(":")[1][:12] in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr


def test_a_sound_image_is_still_scanned(tmp_path: Path, trivy_bin: str) -> None:
    cache = tmp_path / "cache"
    trivydb.write_db(cache)
    Image([Layer.of(base_files())]).write(tmp_path / "img")
    res = _scan(tmp_path / "img", cache, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "gate passed" in res.stdout


# ------------------------------------------------------------ docker archives (docker save)


def _docker_cut_short(path: Path) -> str:
    raw = tar_of(base_files())
    return DockerArchive([base_files()], stored={0: raw[:-1536]}).write(path)["layers"][0]


def _docker_replaced(path: Path) -> str:
    other = tar_of({"etc/os-release": b"ID=alpine\n"})
    return DockerArchive([base_files()], stored={0: other}).write(path)["layers"][0]


def _docker_not_a_tar(path: Path) -> str:
    junk = os.urandom(3000)
    return DockerArchive([base_files()], stored={0: junk},
                         diff_ids=[sha(junk)]).write(path)["layers"][0]


def _docker_config_edited(path: Path) -> str:
    arch = DockerArchive([base_files()], config_edit=b'{"architecture": "amd64", "os": '
                         b'"linux", "rootfs": {"type": "layers", "diff_ids": []}}')
    return arch.write(path)["config"].removesuffix(".json")


def _docker_layer_missing(path: Path) -> str:
    arch = DockerArchive([base_files(), {"app/extra.txt": b"x\n"}], linked={1: "../gone/layer.tar"})
    return arch.write(path)["layers"][1]


@pytest.mark.parametrize(("make", "said"), [
    (_docker_cut_short, "diff_id"), (_docker_replaced, "diff_id"),
    (_docker_not_a_tar, "not a readable tar"), (_docker_config_edited, "does not match"),
    (_docker_layer_missing, "missing from the archive"),
], ids=["layer-cut-short", "layer-replaced", "not-a-tar", "config-edited", "layer-missing"])
def test_a_corrupt_docker_archive_is_exit_2(tmp_path: Path, trivy_bin: str, make: object,
                                            said: str) -> None:
    """trust-options-scan-corrupt-docker-archive: a ``docker save`` tar (no index.json) is
    verified like an OCI layout before Trivy reads it."""
    cache = tmp_path / "cache"
    trivydb.write_db(cache)
    archive = tmp_path / "image.tar"
    named = make(archive)  # type: ignore[operator]
    res = _scan(archive, cache, tmp_path)
    assert res.returncode == 2, res.stderr
    assert said in res.stderr and named.removeprefix("sha256:")[:12] in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr


def test_a_sound_docker_archive_is_still_scanned(tmp_path: Path, trivy_bin: str) -> None:
    """A shared layer stored as a symbolic link (as docker save writes it) is followed."""
    cache = tmp_path / "cache"
    trivydb.write_db(cache)
    archive = tmp_path / "image.tar"
    DockerArchive([base_files(), base_files()], linked={1: 0}).write(archive)
    res = _scan(archive, cache, tmp_path)
    assert res.returncode == 0, res.stderr
    assert "gate passed" in res.stdout


# ------------------------------------------------------------ an image in the engine


def _content_blob(client: Any, digest: str) -> Path:
    """Where the engine's containerd image store keeps blob *digest*."""
    root = Path(client.info()["DockerRootDir"])
    return (root / "containerd" / "daemon" / "io.containerd.content.v1.content" / "blobs"
            / "sha256" / digest.split(":")[1])


@pytest.mark.docker
def test_a_corrupt_engine_image_is_exit_2(tmp_path: Path, trivy_bin: str,
                                          docker_client: Any) -> None:
    """trust-options-scan-corrupt-engine: scan saves an engine image once, verifies it and
    has Trivy read that copy; a layer damaged in the engine's store is exit 2 naming the
    image (docker save ends its archive at the bad blob, exit 0)."""
    import ocitest

    files = {**base_files(), "app/unique.txt": os.urandom(16).hex().encode()}  # its own blob
    layout = tmp_path / "img"
    digests = Image([Layer.of(files)]).write(layout)
    loaded = docker_client.images.load(ocitest.archive(layout, tmp_path / "img.tar")
                                       .read_bytes())
    ident = loaded[0].id
    try:
        blob = _content_blob(docker_client, digests["layers"][0])
        if not blob.is_file():
            pytest.skip("the engine does not use the containerd image store")
        sound = _scan_ref(ident, tmp_path / "sound")
        assert sound.returncode == 0, sound.stderr
        data = blob.read_bytes()
        blob.write_bytes(data[:-16] + bytes(16))  # same size, other bytes
        res = _scan_ref(ident, tmp_path / "bad")
        assert res.returncode == 2, res.stderr
        # docker save stops its archive at the bad blob and exits 0: the archive is refused
        assert "is corrupt" in res.stderr and ident in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    finally:
        docker_client.images.remove(ident, force=True)


def _scan_ref(ref: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    tmp.mkdir()
    cache = tmp / "cache"
    trivydb.write_db(cache)
    return _scan(ref, cache, tmp)
