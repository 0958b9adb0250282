"""Small real OCI images for the tests: write layout dirs and archives (E, tar_bytes,
write_layout, archive), and read an archive's platforms with tarfile and json only,
independently of servelab.image.oci, so that tests can check servelab's reading against it."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class E:
    """One tar entry."""

    name: str
    data: bytes = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    mtime: int = 1_700_000_000
    kind: bytes = tarfile.REGTYPE
    linkname: str = ""
    pax: dict[str, str] = field(default_factory=dict)


def tar_bytes(entries: list[E]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            ti = tarfile.TarInfo(e.name)
            ti.type = e.kind
            ti.mode, ti.uid, ti.gid, ti.mtime = e.mode, e.uid, e.gid, e.mtime
            ti.linkname = e.linkname
            ti.pax_headers = dict(e.pax)
            if e.kind == tarfile.REGTYPE:
                ti.size = len(e.data)
                tf.addfile(ti, io.BytesIO(e.data))
            else:
                tf.addfile(ti)
    return buf.getvalue()


def compress(raw: bytes, how: str, level: int = 6) -> bytes:
    if how == "gzip":
        return gzip.compress(raw, compresslevel=level, mtime=0)
    if how == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(raw)
    return raw


MEDIA = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
         "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
         "none": "application/vnd.oci.image.layer.v1.tar"}


def _blob(root: Path, data: bytes) -> str:
    hexd = hashlib.sha256(data).hexdigest()
    d = root / "blobs" / "sha256"
    d.mkdir(parents=True, exist_ok=True)
    (d / hexd).write_bytes(data)
    return "sha256:" + hexd


def write_layout(root: Path, layers: list[bytes | tuple[bytes, str]], *,
                 config: dict[str, Any] | None = None, created: str = "2023-11-14T22:13:20Z",
                 history: list[str] | None = None, level: int = 6) -> str:
    """An OCI layout at *root* with *layers* (tar bytes, gzip unless (bytes, how) is given).
    Returns the manifest digest."""
    descs, diff_ids = [], []
    for layer in layers:
        raw, how = layer if isinstance(layer, tuple) else (layer, "gzip")
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        blob = compress(raw, how, level)
        descs.append({"mediaType": MEDIA[how], "digest": _blob(root, blob), "size": len(blob)})
    hist = [{"created": created, "created_by": h} for h in
            (history or [f"RUN step {i}" for i in range(len(layers))])]
    cfg = {"architecture": "amd64", "os": "linux", "created": created,
           "config": {"Env": ["PATH=/usr/bin"], "User": "10001"},
           "rootfs": {"type": "layers", "diff_ids": diff_ids}, "history": hist}
    cfg.update(config or {})
    cfg_bytes = json.dumps(cfg, sort_keys=True).encode()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": _blob(root, cfg_bytes), "size": len(cfg_bytes)},
                "layers": descs}
    mbytes = json.dumps(manifest, sort_keys=True).encode()
    mdigest = _blob(root, mbytes)
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": mdigest, "size": len(mbytes),
                            "platform": {"architecture": "amd64", "os": "linux"}}]}
    (root / "index.json").write_text(json.dumps(index))
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    return mdigest


def archive(layout: Path, dest: Path) -> Path:
    """A tar of an OCI layout directory (what docker buildx --output type=oci writes)."""
    with tarfile.open(dest, "w") as tf:
        for p in sorted(layout.rglob("*")):
            tf.add(p, arcname=str(p.relative_to(layout)), recursive=False)
    return dest

def archive_platforms(archive: Path) -> dict[str, tuple[str, str]]:
    """platform ("os/arch[/variant]") -> (manifest digest, config digest) of an OCI archive."""
    with tarfile.open(archive) as tf:

        def read(name: str) -> dict[str, Any]:
            fh = tf.extractfile(name)
            assert fh is not None, name
            return dict(json.load(fh))

        todo = list(read("index.json")["manifests"])
        out: dict[str, tuple[str, str]] = {}
        while todo:
            d = todo.pop(0)
            doc = read("blobs/sha256/" + d["digest"].split(":")[1])
            if "manifests" in doc:
                todo += doc["manifests"]
            elif d.get("platform") and d["platform"].get("os") != "unknown":
                p = d["platform"]
                name = f"{p['os']}/{p['architecture']}" + (
                    f"/{p['variant']}" if p.get("variant") else "")
                out[name] = (d["digest"], doc["config"]["digest"])
        return out
