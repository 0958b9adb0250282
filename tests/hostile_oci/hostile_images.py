"""Hostile OCI inputs, made at test time: layouts whose blobs lie about their digest or size,
decompression bombs, wrong-typed JSON, pipes where files should be. Plus a runner for
``servelab diff`` as a child process that measures time and what it left behind.

Layouts are written by hand here (not through servelab) so a test can break any link of the
chain index.json -> manifest -> config/layers and keep the rest consistent."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
         "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
         "none": "application/vnd.oci.image.layer.v1.tar"}
RUN = ("import sys\nfrom servelab.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode = len(data), 1_700_000_000, 0o644
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def compress(raw: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(raw, 6, mtime=0)
    if how == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(raw)
    return raw


def bomb(how: str, total: int) -> bytes:
    """A layer blob whose tar holds one file of *total* zero bytes: many copies of one small
    gzip member (or zstd frame) of 16 MiB of zeros behind the tar header. 4 GiB of tar from
    about 4 MB of gzip or 130 KB of zstd, made in well under a second."""
    header = tarfile.TarInfo("zeros.bin")
    header.size = total
    head = header.tobuf(format=tarfile.PAX_FORMAT)
    piece = 16 << 20
    return compress(head, how) + compress(bytes(piece), how) * (total // piece)


@dataclass
class Layer:
    blob: bytes
    how: str = "gzip"
    #: the diff_id the config claims (default: the true one of *raw*)
    diff_id: str | None = None
    raw: bytes | None = None
    #: the size the manifest declares (default: the true one)
    size: int | None = None

    @classmethod
    def of(cls, files: dict[str, bytes], how: str = "gzip") -> Layer:
        raw = tar_of(files)
        return cls(compress(raw, how), how, raw=raw)

    def claimed_diff_id(self) -> str:
        if self.diff_id is not None:
            return self.diff_id
        return sha(self.raw if self.raw is not None else self.blob)


@dataclass
class Image:
    """A one-platform OCI layout; every JSON document can be replaced before writing."""

    layers: list[Layer]
    config_extra: dict[str, Any] = field(default_factory=dict)
    created: str = "2023-11-14T22:13:20Z"

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "architecture": "amd64", "os": "linux", "created": self.created,
            "config": {"Env": ["PATH=/usr/bin"]},
            "rootfs": {"type": "layers", "diff_ids": [x.claimed_diff_id() for x in self.layers]},
            "history": [{"created_by": f"RUN step {i}"} for i in range(len(self.layers))]}
        cfg.update(self.config_extra)
        return cfg

    def write(self, root: Path, *, config_bytes: bytes | None = None,
              manifest: dict[str, Any] | None = None, index: dict[str, Any] | None = None
              ) -> dict[str, Any]:
        """Write the layout; returns the digests and names of what was written."""
        blobs = root / "blobs" / "sha256"
        blobs.mkdir(parents=True, exist_ok=True)

        def put(data: bytes) -> str:
            d = sha(data)
            (blobs / d.split(":")[1]).write_bytes(data)
            return d

        cfg = config_bytes if config_bytes is not None else json.dumps(self.config()).encode()
        descs = [{"mediaType": LAYER[x.how], "digest": put(x.blob),
                  "size": len(x.blob) if x.size is None else x.size} for x in self.layers]
        man = manifest or {"schemaVersion": 2, "mediaType": MANIFEST,
                           "config": {"mediaType": CONFIG, "digest": put(cfg), "size": len(cfg)},
                           "layers": descs}
        mbytes = json.dumps(man).encode()
        idx = index or {"schemaVersion": 2, "manifests": [
            {"mediaType": MANIFEST, "digest": put(mbytes), "size": len(mbytes),
             "platform": {"architecture": "amd64", "os": "linux"}}]}
        (root / "index.json").write_text(json.dumps(idx))
        (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
        return {"manifest": sha(mbytes), "config": sha(cfg), "layers": [d["digest"] for d in descs]}


def blob_path(root: Path, digest: str) -> Path:
    return root / "blobs" / "sha256" / digest.split(":")[1]


def base_files() -> dict[str, bytes]:
    return {"etc/os-release": b"ID=debian\n", "app/main.py": b"print('hi')\n"}


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str
    seconds: float
    left: list[str]

    def summary(self) -> str:
        return f"rc={self.rc} after {self.seconds:.1f}s\nstderr: {self.stderr[-2000:]}"


def run_diff(*args: str, tmp: Path, env: dict[str, str] | None = None,
             timeout: float = 60) -> Outcome:
    """``servelab diff ARGS`` in a child process with TMPDIR=*tmp* (empty before); what is
    in *tmp* afterwards is in ``left``."""
    tmp.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in tmp.iterdir()}
    full_env = {**os.environ, "TMPDIR": str(tmp), **(env or {})}
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-c", RUN, "diff", *args], capture_output=True,
                         text=True, errors="replace", env=full_env, timeout=timeout, check=False)
    seconds = time.monotonic() - start
    left = sorted({p.name for p in tmp.iterdir()} - before)
    return Outcome(res.returncode, res.stdout, res.stderr, seconds, left)


def check_sane(out: Outcome, *, max_s: float = 10.0) -> None:
    """What every hostile input must give: exit 0, 1 or 2, no internal error, within
    *max_s*, nothing left behind."""
    assert out.rc in (0, 1, 2), out.summary()
    assert "internal error" not in out.stderr, out.summary()
    assert "Traceback" not in out.stderr, out.summary()
    assert out.seconds <= max_s, out.summary()
    assert out.left == [], f"left behind: {out.left}"


@dataclass
class DockerArchive:
    """A ``docker save`` archive of the kind Docker wrote before 25 (no index.json):
    manifest.json, the config as ``<sha256 of it>.json``, and ``<id>/layer.tar`` per layer,
    plain tars; a layer two images share is a symbolic link to the first copy, as docker save
    writes it. Any part can be spoiled before writing (the test names what it breaks)."""

    layers: list[dict[str, bytes]]
    #: layer index -> the bytes stored in place of that layer's tar
    stored: dict[int, bytes] = field(default_factory=dict)
    #: the diff_ids the config claims (default: the true ones)
    diff_ids: list[str] | None = None
    #: the config's bytes are changed after its name was taken from its digest
    config_edit: bytes | None = None
    #: layer index -> the index of an earlier layer it is a symbolic link to (or the link's
    #: target as text)
    linked: dict[int, int | str] = field(default_factory=dict)

    def write(self, path: Path) -> dict[str, Any]:
        tars = [tar_of(files) for files in self.layers]
        cfg = json.dumps({"architecture": "amd64", "os": "linux",
                          "config": {"Env": ["PATH=/usr/bin"]},
                          "rootfs": {"type": "layers",
                                     "diff_ids": self.diff_ids or [sha(t) for t in tars]},
                          }).encode()
        cfg_name = sha(cfg).split(":")[1] + ".json"
        ids = [hashlib.sha256(f"layer {i}".encode()).hexdigest() for i in range(len(tars))]
        manifest = [{"Config": cfg_name, "RepoTags": ["servelab-test/legacy:1"],
                     "Layers": [f"{i}/layer.tar" for i in ids]}]
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
            _add(tf, cfg_name, self.config_edit or cfg)
            for n, layer_id in enumerate(ids):
                _add(tf, f"{layer_id}/VERSION", b"1.0")
                if n in self.linked:
                    link = tarfile.TarInfo(f"{layer_id}/layer.tar")
                    to = self.linked[n]
                    link.type = tarfile.SYMTYPE
                    link.linkname = f"../{ids[to]}/layer.tar" if isinstance(to, int) else to
                    tf.addfile(link)
                else:
                    _add(tf, f"{layer_id}/layer.tar", self.stored.get(n, tars[n]))
            _add(tf, "manifest.json", json.dumps(manifest).encode())
        return {"config": cfg_name, "layers": manifest[0]["Layers"]}


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    ti = tarfile.TarInfo(name)
    ti.size, ti.mtime, ti.mode = len(data), 1_700_000_000, 0o644
    tf.addfile(ti, io.BytesIO(data))
