"""Credentials in build arguments and the image config: secret-in-build."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from servelab.findings import Severity
from servelab.lint.lazyre import LazyPattern
from servelab.lint.parse import Instruction, Stage, arg_items
from servelab.lint.words import unquote

from . import RULES, Context, Hit

_SECRET_WORDS = {
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "SECRET",
    "CREDENTIALS",
    "CREDENTIAL",
    "APIKEY",
    "PAT",
}
_SECRET_PAIRS = {
    ("API", "KEY"),
    ("ACCESS", "KEY"),
    ("PRIVATE", "KEY"),
    ("SECRET", "KEY"),
    ("AUTH", "KEY"),
    ("SIGNING", "KEY"),
    ("CLIENT", "SECRET"),
}
_NOT_SECRET_SUFFIX = {
    "FILE", "PATH", "DIR", "ENV", "NAME", "ID", "URL", "URI", "MOUNT", "LENGTH", "LEN", "TYPE",
    "COUNT", "SIZE", "LIMIT", "MAX", "MIN", "TTL", "TIMEOUT", "EXPIRY", "LIFETIME", "HEADER",
    "PREFIX", "FORMAT", "MODE", "KIND", "VERSION", "REGION", "ENDPOINT", "HOST", "PORT",
    "ENABLED", "DISABLED", "REQUIRED", "PARALLELISM",
}
#: a name part that makes the variable a switch about credentials, not one
_FLAG_WORDS = {"NO", "DISABLE", "DISABLED", "ENABLE", "ENABLED", "USE", "SKIP", "ALLOW",
               "IGNORE", "REQUIRE", "REQUIRED", "IMPLICIT"}
_FLAG_VALUE = LazyPattern(r"^(|[01]|true|false|yes|no|on|off|none|null|auto|-?\d+(\.\d+)?)$",
                         re.I)


def looks_secret(name: str, value: str | None = None) -> bool:
    """Whether variable *name* (with *value*, when known) holds a credential.

    A name with a secret word (``TOKEN``, ``PASSWORD``, ``API_KEY`` ...) counts, unless it is
    a switch or a setting about one (``SCCACHE_S3_NO_CREDENTIALS``, ``HF_TOKEN_PATH``,
    ``MAX_TOKEN_LEN``) or its value is a boolean or a number (``=0``, ``=false``).
    """
    parts = name.upper().split("_")
    if parts[-1] in _NOT_SECRET_SUFFIX or any(p in _FLAG_WORDS for p in parts):
        return False
    if value is not None and _FLAG_VALUE.match(value.strip()):
        return False
    if any(p in _SECRET_WORDS for p in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


_MOUNT_ADVICE = (
    "pass it as a BuildKit secret: RUN --mount=type=secret,id={id},env={name} ... and "
    "docker build --secret id={id},env={name}; never as ARG or ENV"
)


def _secret_fix(name: str) -> str:
    return _MOUNT_ADVICE.format(id=name.lower(), name=name)


def _secret_mount_env(ins: Instruction) -> set[str]:
    out = set()
    for opts in ins.mounts():
        if opts["type"] == "secret" and opts.get("env"):
            out.add(opts["env"])
    return out


def _default_hit(ctx: Context, ins: Instruction, name: str, st: Stage | None) -> Hit:
    return Hit(
        "secret-in-build",
        ins.line,
        f"ARG {name} has a credential as its default value, written in the Dockerfile",
        fix=_secret_fix(name),
        context={"stage": st.label} if st else {},
    )


def _scope_hit(ctx: Context, ins: Instruction, name: str, st: Stage,
               later: list[Instruction]) -> Hit | None:
    """The ARG leaks through the first RUN in its scope (BuildKit writes every ARG in scope
    into each later RUN's history), unless every such RUN takes the name from a secret."""
    runs = [i for i in later if i.cmd == "RUN"]
    if not runs or all(name in _secret_mount_env(r) for r in runs):
        return None
    first = runs[0]
    if st.index in {s.index for s in ctx.analysis.chain()}:
        return Hit(
            "secret-in-build",
            ins.line,
            f"ARG {name} is in scope of RUN at line {first.line}: BuildKit writes its value "
            f"into that step's history (RUN |1 {name}=...), which ships with the image",
            fix=_secret_fix(name),
            context={"stage": st.label},
        )
    return Hit(
        "secret-in-build",
        ins.line,
        f"ARG {name} is in scope of RUN at line {first.line} in builder stage {st.label}: its "
        "value goes into the build's provenance and cache records (not the final image)",
        fix=_secret_fix(name),
        context={"stage": st.label},
        severity=Severity.WARNING,
    )


def _env_hits(ctx: Context, st: Stage, ins: Instruction) -> Iterator[Hit]:
    final = st.index in {s.index for s in ctx.analysis.chain()}
    for name, raw in zip(ins.args[0::2], ins.args[1::2], strict=False):
        value = unquote(raw, ctx.df.escape)
        if value and looks_secret(name, value):
            where = "the image config" if final else f"the config of builder stage {st.label}"
            yield Hit(
                "secret-in-build",
                ins.line,
                f"ENV {name} puts a credential into {where}",
                fix=_secret_fix(name),
                context={"stage": st.label},
                severity=None if final else Severity.WARNING,
            )


def _stage_hits(ctx: Context, st: Stage) -> Iterator[Hit]:
    for pos, ins in enumerate(st.instructions):
        if ins.cmd == "ENV":
            yield from _env_hits(ctx, st, ins)
        if ins.cmd != "ARG":
            continue
        for name, default, _raw in arg_items(ins, ctx.df.escape):
            value = unquote(default, ctx.df.escape) if default is not None else None
            if not looks_secret(name, value):
                continue
            if value:
                yield _default_hit(ctx, ins, name, st)
                continue
            hit = _scope_hit(ctx, ins, name, st, st.instructions[pos + 1 :])
            if hit is not None:
                yield hit


@RULES.rule(
    "secret-in-build",
    Severity.ERROR,
    "credential passed as ARG or ENV",
    rationale="BuildKit writes every ARG in scope into the history of each later RUN "
    "(`RUN |1 HF_TOKEN=... /bin/sh -c ...`), whether the RUN uses it or not: in the final "
    "image's stages anyone who can pull the image reads it (error); in a builder stage it "
    "stays in the build's provenance and cache (warning). ENV values sit in the image config. "
    "A global ARG counts in a stage only once declared again there.",
    fix="use RUN --mount=type=secret,id=hf_token,env=HF_TOKEN ... with docker build --secret "
    "id=hf_token,env=HF_TOKEN",
)
def check_secret_in_build(ctx: Context) -> Iterator[Hit]:
    for ins in ctx.df.global_args:
        for name, default, _raw in arg_items(ins, ctx.df.escape):
            value = unquote(default, ctx.df.escape) if default is not None else None
            if value and looks_secret(name, value):
                yield _default_hit(ctx, ins, name, None)
    for st in ctx.df.stages:
        yield from _stage_hits(ctx, st)
