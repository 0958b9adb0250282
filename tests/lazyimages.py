"""Images of the lazy-pull tests' own: the example's base copied into a repository of the
test's (so that the SOCI index and referrers tag pushed for it are that test's alone), and the
tags a repository lists."""

from __future__ import annotations

import json
import urllib.request

from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import ImageLayers


def copy_image(base: str, repo: str) -> str:
    """The base image in repository *repo* of the same registry (its blobs mounted across,
    its manifest put): name:tag@digest."""
    src = ImageRef.parse(base)
    reg = RegistryClient()
    manifest = reg.get_manifest(src)
    body = json.loads(manifest.body)
    for d in [body["config"]["digest"], *(x["digest"] for x in body["layers"])]:
        req = urllib.request.Request(
            f"http://{src.registry}/v2/{repo}/blobs/uploads/?mount={d}&from={src.repository}",
            method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 201, (d, r.status)
    dst = ImageRef(src.registry, repo, "t")
    reg.put_manifest(dst, "t", manifest.body, manifest.media_type)
    return str(dst.with_digest(manifest.digest))


def tags_of(img: ImageLayers) -> list[str]:
    ref = ImageRef.parse(img.ref)
    with urllib.request.urlopen(f"http://{ref.registry}/v2/{ref.repository}/tags/list",
                                timeout=10) as r:
        return sorted(json.loads(r.read())["tags"] or [])
