"""The build context: context-leak."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import NamedTuple

from servelab.findings import Severity
from servelab.lint import ignore, walk
from servelab.lint.parse import Instruction, Stage

from . import RULES, Context, Hit
from ._common import listing, values, whole_context

_SHOWN = 5


class _Copy(NamedTuple):
    ins: Instruction
    stage: Stage
    #: whether the stage is the final image or one it is built FROM
    final: bool


def _copies(ctx: Context) -> tuple[list[_Copy], list[_Copy]]:
    """COPY/ADD of the whole context, and COPY/ADD of .git by name (not --from)."""
    final = {s.index for s in ctx.analysis.chain()}
    whole: list[_Copy] = []
    git: list[_Copy] = []
    for st in ctx.df.stages:
        for ins in st.instructions:
            if ins.cmd not in {"COPY", "ADD"} or ins.flag("from") is not None:
                continue
            srcs = values(ctx, st, [a for a in ins.args[:-1] if not a.startswith("<<")])
            c = _Copy(ins, st, st.index in final)
            if any(whole_context(s) for s in srcs):
                whole.append(c)
            if any(posixpath.normpath(s).split("/")[0] == ".git" for s in srcs):
                git.append(c)
    return whole, git


def _git_mounted(ctx: Context) -> bool:
    """Whether a RUN bind-mounts .git from the context (setuptools-scm, version stamps)."""
    for ins in ctx.df.instructions:
        for opts in ins.mounts() if ins.cmd == "RUN" else []:
            src = opts.get("source") or opts.get("src") or ""
            if opts["type"] == "bind" and "from" not in opts and src.strip("./") == "git":
                return True
    return False


def _weights(ctx: Context, pats: list[ignore.Pattern],
             ins: Instruction | None = None) -> tuple[list[str], bool]:
    """The weight files the context sends (a few named, then a count), less what the COPY's
    own ``--exclude`` patterns leave out, and whether the walk stopped at its limit
    (docs/limits.md)."""
    own = ins.excluder() if ins is not None else None
    walked = walk.weight_files(ctx.context_dir, ".", lambda rel: (
        bool(pats) and ignore.excluded(rel, pats)) or (own is not None and own(rel)))
    found = walked.files
    shown = [p for p, _n in found[:_SHOWN]]
    more = [f"{len(found) - _SHOWN} more weight files"] if len(found) > _SHOWN else []
    return shown + more, walked.stopped


def _final_leaks(ctx: Context, pats: list[ignore.Pattern] | None,
                 ins: Instruction) -> tuple[list[str], bool]:
    """What a COPY . into the image really brings along: .git (unless a RUN bind-mounts it)
    and weight files, each only when present in the context and not excluded (by the
    .dockerignore or the COPY's ``--exclude``); and whether the walk stopped at its limit."""
    leaks: list[str] = []
    git = ctx.context_dir / ".git"
    own = ins.excluder()
    if git.exists() and not _git_mounted(ctx) and not (
            pats and ignore.excluded(".git", pats)) and not (own and own(".git")):
        leaks.append(".git")
    weights, stopped = _weights(ctx, pats or [], ins)
    return leaks + weights, stopped


def _stop_hit(c: _Copy) -> Hit:
    return Hit("context-leak", c.ins.line, walk.Found([], True).stop_note(
        f"{c.ins.cmd} of the whole build context"), context={"stage": c.stage.label},
        fix=walk.CONTEXT_ENTRIES.raise_hint())


@RULES.rule(
    "context-leak",
    Severity.WARNING,
    "COPY . (or COPY .git) with a build context that does not exclude weights or .git",
    rationale="COPY . sends the whole context to the builder and into the layer: a checkout's "
    ".git and any model files beside the code inflate every build and image, and leak history. "
    "Only what is really in the context counts (.git, files judged weights by content), minus "
    "what .dockerignore excludes. A COPY . in a builder stage only is judged by the weight "
    "files it sends; .git is not asked to be excluded when a RUN --mount=type=bind,source=.git "
    "needs it.",
    fix="add a .dockerignore with at least .git, **/*.safetensors, **/*.gguf, **/*.pt, "
    "**/*.bin, **/models (or allowlist: * then !src), or COPY only what the image needs",
)
def check_context_leak(ctx: Context) -> Iterator[Hit]:
    whole, git = _copies(ctx)
    path = ignore.find(ctx.df.path, ctx.context_dir)
    pats = ignore.load(ctx.df.path, ctx.context_dir)
    for c in git:
        if c.final and not (pats and ignore.excluded(".git", pats)):
            yield Hit("context-leak", c.ins.line, f"{c.ins.cmd} puts .git, the repository's "
                      "history, into the image", context={"stage": c.stage.label})
    if not whole:
        return
    final = [c for c in whole if c.final]
    c = (final or whole)[0]
    if not c.final:
        found, stopped = _weights(ctx, pats or [], c.ins)
        if found:
            yield Hit("context-leak", c.ins.line, f"{c.ins.cmd} in builder stage "
                      f"{c.stage.label} sends the weight files of the build context to the "
                      f"builder: {listing(found)}", context={"stage": c.stage.label})
        if stopped:
            yield _stop_hit(c)
        return
    fix = _KEEP_GIT_FIX if _git_mounted(ctx) else None
    leaks, stopped = _final_leaks(ctx, pats, c.ins)
    if stopped:
        yield _stop_hit(c)
    if not leaks:
        return
    if path is None:
        yield Hit("context-leak", c.ins.line, f"{c.ins.cmd} copies the whole build context "
                  f"({ctx.context_dir}), which has no .dockerignore, into the image: "
                  f"{listing(leaks)}", fix=fix)
        return
    yield Hit("context-leak", c.ins.line, f"{c.ins.cmd} copies the whole build context into "
              f"the image and {path.name} does not exclude: {listing(leaks)}", fix=fix,
              context={"dockerignore": str(path)})


_KEEP_GIT_FIX = (
    "add a .dockerignore with at least **/*.safetensors, **/*.gguf, **/*.pt, **/*.bin, "
    "**/models (keep .git: a RUN bind-mounts it), or COPY only what the image needs"
)
