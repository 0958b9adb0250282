"""The running user: root-user."""

from __future__ import annotations

from collections.abc import Iterator

from servelab.findings import Severity
from servelab.lint.lazyre import LazyPattern
from servelab.textio import ascii_int

from . import RULES, Context, Hit
from ._common import judged
from ._start import base_facts

#: bases that document a non-root default user: distroless/other ``:nonroot`` tags,
#: Chainguard images (not wolfi-base and chainguard-base, shells that run as root), Red Hat's
#: UBI language images (USER 1001), Bitnami and Ray images, TorchServe's (USER model-server)
KNOWN_NON_ROOT = LazyPattern(
    r"[:-]nonroot\b|^cgr\.dev/chainguard/(?!(wolfi-base|chainguard-base)\b)|/ubi\d+/(python|nodejs|go-toolset|ruby|php|perl)-\d+|"
    r"^(docker\.io/)?(bitnami|rayproject)/|^(docker\.io/)?pytorch/torchserve(?![\w.-])"
)


def is_root(user: str) -> bool:
    name = user.split(":", 1)[0].strip()
    return name in {"", "root"} or ascii_int(name) == 0


@RULES.rule(
    "root-user",
    Severity.ERROR,
    "the final image runs as root",
    rationale="A serving process has no need for root; as root a compromised model server "
    "owns the container and whatever it mounts. The final stage's user counts: a USER in a "
    "builder stage the final stage is not built FROM does not carry over. With no USER at "
    "all the base image's user applies: --resolve-base reads it from the local engine or the "
    "registry; without it that user is unknown and the finding is a warning (bases known "
    "to default to non-root, such as :nonroot tags, Chainguard, UBI language, Bitnami, Ray "
    "and TorchServe images, are left alone).",
    fix="create an unprivileged user and end with USER <uid> (e.g. RUN useradd -u 10001 app, "
    "then USER 10001); if the base already sets one, repeat it with USER",
)
def check_root_user(ctx: Context) -> Iterator[Hit]:
    state = ctx.analysis.state()
    final = ctx.df.final
    where = {"stage": final.label}
    if state.user is not None:
        value, ins = state.user
        if value is not None and is_root(value):
            yield Hit("root-user", ins.line, f"the final image runs as USER {value}",
                      context=where)
        return
    root = ctx.analysis.chain()[0]
    line = final.from_instr.line
    if not judged(root):
        if root.base is not None and root.base.lower() == "scratch" and (
                state.cmd is not None or state.entrypoint is not None):
            yield Hit("root-user", line, "the final image is built FROM scratch and sets no "
                      "USER: it runs as uid 0", context=where)
        elif root.parent is None and (root.unresolved or (root.base is not None
                                                          and not root.base.strip())):
            # FROM ${BASE} with no value: the build argument alone decides the user
            args = ("ARG " + ", ".join(root.unresolved)) if root.unresolved else "its ARG"
            yield Hit("root-user", line, f"the final stage sets no USER and its base "
                      f"{root.base_raw} is left open by {args} (no value given): the user "
                      "it runs as is whatever image the build argument names; most bases "
                      "run as root", context=where, severity=Severity.WARNING)
        return
    facts = base_facts(ctx)
    if facts is None and KNOWN_NON_ROOT.search(root.base or ""):
        return  # the base's documented user is not root
    if facts is None:
        how = ("could not be read" if ctx.resolve_base is not None
               else "is unknown without --resolve-base")
        told = (f" ({root.base_raw}: a --build-arg can name another base)"
                if "$" in root.base_raw else "")
        yield Hit("root-user", line, f"the final stage sets no USER, so it runs as the user of "
                  f"{root.base}{told}, which {how}; most bases run as root",
                  context=where, severity=Severity.WARNING)
    elif is_root(facts.user):
        yield Hit("root-user", line, f"the final stage sets no USER and its base {root.base} "
                  f"runs as {facts.user or 'root (no USER)'} ({facts.source}): the final image "
                  "runs as root", context=where)
