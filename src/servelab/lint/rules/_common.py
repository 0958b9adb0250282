"""Small helpers the rule modules share."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from servelab.lint.parse import Stage
from servelab.lint.words import expand, unquote

from . import Context


def judged(stage: Stage) -> bool:
    """Whether a FROM names a real image (not scratch, not a stage, resolved, not blank)."""
    return (stage.base is not None and stage.parent is None and bool(stage.base.strip())
            and stage.base.lower() != "scratch")


def shown(stage: Stage) -> str:
    if stage.base is not None and stage.base != stage.base_raw:
        return f"{stage.base_raw} (resolves to {stage.base})"
    return stage.base_raw


def values(ctx: Context, stage: Stage, words: Iterable[str]) -> list[str]:
    """*words* with the stage's ARG/ENV values substituted (as written when one is unknown)."""
    state = ctx.analysis.state(stage)
    out = []
    for w in words:
        exp = expand(w, state.lookup, ctx.df.escape)
        out.append(unquote(exp.value if not exp.unresolved else w, ctx.df.escape))
    return out


def listing(items: Iterable[str]) -> str:
    """Every item, comma-separated, each once (messages name them all)."""
    return ", ".join(dict.fromkeys(items))


_WHOLE_CONTEXT = frozenset({".", "./", "*", "./*", "/", ""})


def whole_context(src: str) -> bool:
    """Whether a COPY/ADD source names the whole build context: ``.``, ``./*``, and a path
    that climbs above the context's root (``../``, ``./..``, ``../*``), which BuildKit keeps
    inside the context, at its root (marker-api's ``COPY ../ ./``)."""
    if src in _WHOLE_CONTEXT:
        return True
    rest = src.rstrip("/")
    if rest.endswith("/*"):
        rest = rest[:-2]
    return ".." in rest.split("/") and posixpath.normpath("/" + rest) == "/"
