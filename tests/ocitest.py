"""Reading an OCI archive's platforms with tarfile and json only, independently of
servelab.oci, so that tests can check servelab's reading against it."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any


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
