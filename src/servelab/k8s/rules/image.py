"""image-not-digest, image-digest-mismatch: run exactly the image the experiment tested."""

from __future__ import annotations

import re
from collections.abc import Iterator

from servelab.findings import Finding, Severity
from servelab.image.ref import ImageRef, pinned_digest
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import Container, Workload
from servelab.k8s.provenance import SOURCE_KEYS

#: Tags that name whatever was pushed last, not one build.
MOVING_TAGS = re.compile(
    r"^(latest|main|master|nightly|dev|develop|edge|head|stable|canary|unstable|rolling|fast|"
    r"beta|alpha|next|current|snapshot|testing|experimental|preview)$"
    r"|^(latest|nightly)[-_.]|[-_.](latest|nightly|snapshot)$", re.IGNORECASE)


def digest_of(image: str) -> str | None:
    return pinned_digest(image)


def moving_tag(image: str) -> str | None:
    """Why the tag of an image without a digest moves ("no tag", "the tag 'nightly'"), or None."""
    if "@" in image:
        return None
    _, tag, _ = ImageRef.split(image)
    if tag is None:
        return "no tag (it pulls latest)"
    if MOVING_TAGS.search(tag):
        return f"the moving tag {tag!r}"
    if not re.search(r"\d", tag):  # alpine, distroless, bookworm, server-cuda: no version
        return f"the version-less tag {tag!r} (it moves with every release)"
    return None


def _sidecar(w: Workload, c: Container) -> Iterator[Finding]:
    image = c.data.get("image")
    if not isinstance(image, str) or c.inherits("image"):
        return
    why = moving_tag(image)
    if why is None:
        return
    role = "init container" if c.init else "sidecar"
    yield hit("image-not-digest", w, f"{role} {c.name!r} image {image!r} has {why}: every pull "
              "may bring another image than the one tested", (*c.path, "image"), container=c,
              severity=Severity.WARNING, fix="pin it by digest (name:tag@sha256:<digest>), or "
              "at least a fixed version tag")


@rule(
    "image-not-digest",
    Severity.ERROR,
    "the serving container's image is not pinned by digest; a sidecar's image has no tag, a "
    "moving one or one without a version",
    rationale="A tag can be moved or overwritten: nodes may pull an image that was never "
    "tested, and two nodes may run different images under the same tag. A sidecar or init "
    "container on latest, main or nightly, or on a tag without a version number (alpine, "
    "distroless), changes with every pull.",
    fix="pin the image by digest: image: registry/name:tag@sha256:<digest>",
)
def image_not_digest(w: Workload, ctx: Context) -> Iterator[Finding]:
    for c in (*w.init_containers, *w.containers):
        if c is not w.serving:
            yield from _sidecar(w, c)
    c = w.serving
    if c.inherits("image"):
        return
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
    why = moving_tag(image)
    what = "has a malformed digest" if "@" in image else "is not pinned by digest" + (
        f" and has {why}" if why else "")
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
    if not m or not m.digests or not isinstance(image, str) or w.serving.inherits("image"):
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


PROVENANCE_FIX = ("rebuild the image from its Dockerfile in CI (no docker commit) and label it "
                  "with org.opencontainers.image.source and org.opencontainers.image.revision "
                  "(docker/metadata-action, or --label / --annotation at build)")


def _history(w: Workload, c: Container) -> Iterator[Finding]:
    h = c.image_history
    if h is None:
        return
    at = (*c.path, "image")
    for layer in h.hand_layers:
        yield hit("image-provenance", w, f"the image {h.name} is not rebuildable: "
                  f"{layer.describe()} was made by no build instruction (docker commit of a "
                  "container): its changes exist only in this image", at, container=c,
                  severity=Severity.ERROR)
    missing = [k for k in SOURCE_KEYS if k not in h.sources]
    if missing:
        said = ("carries neither " + " nor ".join(missing) if len(missing) == 2
                else f"carries no {missing[0]}")
        yield hit("image-provenance", w, f"the image {h.name} {said} (annotation or label): it "
                  "cannot be traced to the commit it was built from", at, container=c,
                  severity=Severity.INFO)


@rule(
    "image-provenance",
    Severity.WARNING,
    "with --image: a layer made by no build instruction (docker commit, an empty or "
    "shell-session created_by), or no source annotations",
    rationale="An experiment answers whether the image can be rebuilt, not whether one "
    "container that someone once changed by hand still runs. The image config's history has "
    "one entry per layer: an empty created_by (docker commit) or a bare shell (the commit of "
    "an interactive session) means the layer's changes were made inside a running container "
    "and nothing rebuilds them (an error, naming the layer and its size). Without "
    "org.opencontainers.image.source and revision (annotations or labels) the image cannot be "
    "traced to the commit it was built from (an info).",
    fix=PROVENANCE_FIX,
)
def image_provenance(w: Workload, ctx: Context) -> Iterator[Finding]:
    for c in (*w.init_containers, *w.containers):
        yield from _history(w, c)
