"""servelab.image.layout: how a path or reference is classified, prepared for a tool that reads
OCI layouts, and named by its digest (moved out of scan/trivy.py; the real Trivy use is in
tests/scan)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from ocitest import E, archive, tar_bytes, write_layout
from servelab.errors import InputError
from servelab.image import layout


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_archive_kinds_and_digests(tmp_path: Path) -> None:
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + "1" * 64, "size": 1},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + "2" * 64, "size": 1,
         "annotations": {"vnd.docker.reference.type": "attestation-manifest"}},
    ]}
    oci = _tar(tmp_path / "oci.tar", {"oci-layout": b"{}",
                                      "index.json": json.dumps(index).encode()})
    assert layout.classify(str(oci)).kind == "oci-archive"
    assert layout.target_digest(oci) == "sha256:" + "1" * 64  # attestation skipped
    docker = _tar(tmp_path / "docker.tar", {"manifest.json": b"[]"})
    assert layout.classify(str(docker)).kind == "docker-archive"
    assert layout.target_digest(docker).startswith("sha256:")
    other = _tar(tmp_path / "other.tar", {"hello.txt": b"hi"})
    with pytest.raises(InputError, match="neither an OCI archive"):
        layout.classify(str(other))
    with pytest.raises(InputError, match="does not exist"):
        layout.classify(str(tmp_path / "missing.tar"))


def test_unsafe_archive_is_refused(tmp_path: Path) -> None:
    bad = _tar(tmp_path / "bad.tar", {"oci-layout": b"{}", "index.json": b"{}",
                                      "../escape.txt": b"x"})
    with pytest.raises(InputError), layout.prepared_input(bad):
        pass
    assert not (tmp_path.parent / "escape.txt").exists()


def test_a_reference_stays_a_reference_and_a_path_a_path(tmp_path: Path) -> None:
    assert layout.classify("127.0.0.1:5000/team/app:1").kind == "image"
    assert layout.classify("python:3.12-slim").kind == "image"
    (tmp_path / "out").mkdir()
    with pytest.raises(InputError, match="does not exist"):  # its directory exists: a path
        layout.classify(str(tmp_path / "out" / "image"))


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "image.tar"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a pipe"):
        layout.classify(str(fifo))


def test_prepared_archive_is_unpacked_and_removed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    digest = write_layout(src, [tar_bytes([E("app.py", b"print(1)")])])
    tar = archive(src, tmp_path / "image.tar")
    with layout.prepared_input(tar, "t") as inp:
        assert inp.kind == "oci-dir" and inp.path is not None
        unpacked = inp.path
        assert json.loads((unpacked / "index.json").read_text())["manifests"][0]["digest"] \
            == digest
    assert not unpacked.exists()
    assert layout.target_digest(tar) == layout.target_digest(src) == digest


def test_target_digest_refuses_a_malformed_manifest_digest(tmp_path: Path) -> None:
    root = tmp_path / "l"
    root.mkdir()
    (root / "index.json").write_text(json.dumps(
        {"schemaVersion": 2, "manifests": [{"digest": "sha256:nothex", "size": 1}]}))
    with pytest.raises(InputError, match="malformed digest"):
        layout.target_digest(root)
