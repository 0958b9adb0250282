"""The base images: base-unpinned, base-latest, arg-unresolved, devel-base."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from servelab.findings import Severity
from servelab.image.ref import ImageRef, pinned_digest
from servelab.lint.lazyre import LazyPattern
from servelab.lint.parse import Instruction, Stage, arg_items

from . import RULES, Context, Hit
from ._common import judged, shown, values
from ._start import Role, role
from .health import serving_evidence

#: tags that move to a new release by design
_FLOATING = LazyPattern(
    r"^(latest|rolling|nightly|edge|main|master|stable|dev)$|^(latest|nightly|stable)[-_.]|"
    r"[-_.](latest|nightly)$"
)

#: a date in a tag (``nightly_3.10_tpuvm_20241017``, ``nightly-2024.10.17``): the build of
#: that day, which does not move, unlike ``nightly``
_DATED = LazyPattern(r"(?<![0-9])20\d\d(?:[01]\d[0-3]\d|[-_.][01]?\d[-_.][0-3]?\d)(?![0-9])")
#: runtime images whose tags say devel all the same: Intel tags every oneAPI image
#: ``<version>-devel-<os>`` (``intel/oneapi-runtime:2025.2.2-0-devel-ubuntu24.04``)
_RUNTIME_IMAGE = LazyPattern(r"(^|/)intel/oneapi-runtime$")
#: vendors' development images, named so rather than tagged -devel: ROCm's ``rocm/dev-*``
#: (``rocm/dev-ubuntu-22.04:6.2``) and Intel's oneAPI base and HPC toolkits (their runtime
#: counterpart is ``intel/oneapi-runtime``)
_DEVEL_IMAGE = LazyPattern(r"(^|/)rocm/dev-[\w.-]+$|(^|/)intel/oneapi-(basekit|hpckit)$")
#: NVIDIA's NGC framework containers (``nvcr.io/nvidia/pytorch:24.05-py3``: the whole CUDA
#: toolkit, nvcc and headers included), mostly used to train: an SDK base only under a server
_NGC_FRAMEWORK = LazyPattern(r"^nvcr\.io/nvidia/(pytorch|tensorflow|jax)$")


def _serves(ctx: Context) -> bool:
    """Whether the final image is a server (see no-health), not a training job or a tool."""
    verdict = role(ctx)
    return verdict.role == Role.SERVER or (
        verdict.role == Role.UNKNOWN and serving_evidence(ctx) is not None)


class ImageUse(NamedTuple):
    """An image a build step reads: a FROM, or a COPY --from / RUN --mount from= that names
    an image rather than a stage."""

    ref: str
    shown: str
    line: int
    stage: str


def image_uses(ctx: Context) -> Iterator[ImageUse]:
    """Every image the Dockerfile reads, stage by stage (FROM first, then copies)."""
    for st in ctx.df.stages:
        if judged(st):
            yield ImageUse(st.base or "", f"FROM {shown(st)}", st.from_instr.line, st.label)
        for ins in st.instructions:
            for ref in _external_refs(ctx, st, ins):
                kind = "COPY --from" if ins.cmd in {"COPY", "ADD"} else "RUN --mount=...,from"
                yield ImageUse(ref, f"{kind}={ref}", ins.line, st.label)


def _external_refs(ctx: Context, st: Stage, ins: Instruction) -> list[str]:
    refs: list[str] = []
    if ins.cmd in {"COPY", "ADD"} and ins.flag("from"):
        refs.append(ins.flag("from") or "")
    elif ins.cmd == "RUN":
        refs += [m["from"] for m in ins.mounts() if "from" in m]
    out = []
    for raw in values(ctx, st, refs):
        if "$" in raw or ctx.df.stage_by_ref(raw) is not None:
            continue
        out.append(raw)
    return out


@RULES.rule(
    "base-unpinned",
    Severity.ERROR,
    "FROM image not pinned by digest",
    rationale="A tag is a moving pointer: the same Dockerfile builds on a different base "
    "tomorrow, so the image cannot be rebuilt bit for bit and a base update can change the "
    "serving runtime without a code change. Every stage counts, builders included, and so "
    "does an image read by COPY --from=image or RUN --mount=from=image.",
    fix="pin the base: FROM name:tag@sha256:<digest> (docker buildx imagetools inspect "
    "name:tag shows it); let a bot such as Renovate update the digest",
)
def check_base_unpinned(ctx: Context) -> Iterator[Hit]:
    for use in image_uses(ctx):
        if not pinned_digest(use.ref):
            yield Hit(
                "base-unpinned",
                use.line,
                f"{use.shown} is not pinned by @sha256 digest",
                context={"stage": use.stage},
            )


@RULES.rule(
    "base-latest",
    Severity.WARNING,
    "FROM image with tag latest, a floating tag, or no tag",
    rationale="`latest` (or no tag, which means latest) and other floating tags (`rolling`, "
    "`nightly`, `main`, `latest-*`) say nothing about the version: readers and update bots "
    "cannot tell which release the digest belongs to, and an unpinned build jumps major "
    "versions. Images read by COPY --from count too.",
    fix="name the release in the tag (python:3.11.9-slim-bookworm), then pin its digest",
)
def check_base_latest(ctx: Context) -> Iterator[Hit]:
    for use in image_uses(ctx):
        _name, tag, _digest = ImageRef.split(use.ref)
        if tag is None or (_FLOATING.search(tag) and not _DATED.search(tag)):
            what = f"the floating tag {tag}" if tag and tag != "latest" else (
                "tag latest" if tag else "no tag")
            yield Hit(
                "base-latest",
                use.line,
                f"{use.shown} has {what}",
                context={"stage": use.stage},
            )


@RULES.rule(
    "arg-unresolved",
    Severity.ERROR,
    "FROM uses an ARG that has no value",
    rationale="servelab substitutes ARG defaults and build arguments into FROM as BuildKit "
    "does. An ARG with no default and no --build-arg makes the base unknown (BuildKit "
    "substitutes an empty string), so the base rules cannot judge it; servelab does not guess. "
    "A substitution BuildKit refuses (`${BASE?message}` with BASE unset, a bad pattern or "
    "modifier) stops the build, and is reported here with BuildKit's message.",
    fix="give the ARG a pinned default (ARG BASE=name:tag@sha256:...), or pass the value with "
    "--build-arg NAME=VALUE or --build-args-file FILE",
)
def check_arg_unresolved(ctx: Context) -> Iterator[Hit]:
    declared = {n for i in ctx.df.global_args for n, _d, _r in arg_items(i, ctx.df.escape)}
    for st in ctx.df.stages:
        stops = f" (BuildKit stops the build: {st.error})" if st.error else ""
        for name in st.unresolved:
            why = (
                "has no default and no build argument"
                if name in declared
                else "is not declared by an ARG before the first FROM"
            )
            yield Hit(
                "arg-unresolved",
                st.from_instr.line,
                f"FROM {st.base_raw}: ARG {name} {why}{stops}",
                context={"stage": st.label},
            )
        if st.error and not st.unresolved:
            yield Hit("arg-unresolved", st.from_instr.line,
                      f"FROM {st.base_raw}: BuildKit refuses the substitution: {st.error}",
                      context={"stage": st.label})
        elif not st.error and not st.unresolved and st.base is not None and not st.base.strip():
            # ARG BASE= (an empty default) or ${BASE:-}: the name resolves to nothing
            yield Hit("arg-unresolved", st.from_instr.line,
                      f"FROM {st.base_raw} resolves to an empty image name (its ARG has an "
                      f"empty value): BuildKit stops the build (base name ({st.base_raw}) "
                      "should not be blank) and the base rules cannot judge it",
                      context={"stage": st.label})


@RULES.rule(
    "devel-base",
    Severity.WARNING,
    "final image built on a -devel (SDK) base",
    rationale="CUDA/PyTorch -devel images, NGC's framework containers (nvcr.io/nvidia/pytorch), "
    "ROCm's rocm/dev-* and Intel's oneAPI base and HPC toolkits carry compilers and headers, "
    "gigabytes that every node pulls before the server "
    "can start; serving needs only the runtime variant.",
    fix="compile in a -devel builder stage and COPY --from it into a -runtime (or -base) image",
)
def check_devel_base(ctx: Context) -> Iterator[Hit]:
    root = ctx.analysis.chain()[0]
    if judged(root):
        name, tag, _d = ImageRef.split(root.base or "")
        if tag and re.search(r"(^|[-_.])devel([-_.]|$)", tag) and not _RUNTIME_IMAGE.search(name):
            yield Hit(
                "devel-base",
                root.from_instr.line,
                f"the final image is built on {root.base}, a -devel image",
                context={"stage": root.label},
            )
        elif _DEVEL_IMAGE.search(name) or (_NGC_FRAMEWORK.search(name) and _serves(ctx)):
            yield Hit(
                "devel-base",
                root.from_instr.line,
                f"the final image is built on {root.base}, a vendor's development (SDK) "
                "image",
                context={"stage": root.label},
            )
