"""image-not-digest, image-digest-mismatch: run exactly the image the experiment tested."""

from __future__ import annotations

from collections.abc import Iterator

from servelab.findings import Finding, Severity
from servelab.image.ref import pinned_digest
from servelab.k8s.model import Workload
from servelab.k8s.registry import Context, hit, rule


def digest_of(image: str) -> str | None:
    return pinned_digest(image)


@rule(
    "image-not-digest",
    Severity.ERROR,
    "the serving container's image is not pinned by digest",
    rationale="A tag can be moved or overwritten: nodes may pull an image that was never "
    "tested, and two nodes may run different images under the same tag.",
    fix="pin the image by digest: image: registry/name:tag@sha256:<digest>",
)
def image_not_digest(w: Workload, ctx: Context) -> Iterator[Finding]:
    c = w.serving
    image = c.data.get("image")
    path = (*c.path, "image")
    if not isinstance(image, str) or not image.strip():
        yield hit("image-not-digest", w, "the serving container has no image", path, container=c)
        return
    if digest_of(image):
        return
    fix = None
    if ctx.measured and ctx.measured.digests:
        tested = sorted(ctx.measured.digests)[0]
        fix = f"pin the tested image: image: {image.split('@')[0]}@{tested}"
    what = "has a malformed digest" if "@" in image else "is not pinned by digest"
    yield hit(
        "image-not-digest", w,
        f"image {image!r} {what}: the pods may run an image that was never tested",
        path, container=c, fix=fix,
    )


@rule(
    "image-digest-mismatch",
    Severity.ERROR,
    "the serving image's digest is not the one the experiment built and tested",
    rationale="The measured startup, size and readiness hold for the tested image only; "
    "another digest is another image, however it is tagged.",
    fix="deploy the digest recorded in the experiment's result.json (image.digest), or rerun "
    "the experiment on the image you mean to deploy",
)
def image_digest_mismatch(w: Workload, ctx: Context) -> Iterator[Finding]:
    m = ctx.measured
    image = w.serving.data.get("image")
    if not m or not m.digests or not isinstance(image, str):
        return
    digest = digest_of(image)
    if digest is None or digest in m.digests:
        return
    tested = ", ".join(sorted(m.digests))
    yield hit(
        "image-digest-mismatch", w,
        f"image digest {digest} is not the digest the experiment tested ({tested})",
        (*w.serving.path, "image"), container=w.serving,
        fix=f"deploy {image.split('@')[0]}@{sorted(m.digests)[0]}, or rerun the experiment on "
        "this image",
    )
