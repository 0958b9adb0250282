"""The readiness signal: no-health."""

from __future__ import annotations

from collections.abc import Iterator

from servelab.findings import Severity

from . import RULES, Context, Hit
from ._start import Role, base_facts, role


@RULES.rule(
    "no-health",
    Severity.WARNING,
    "a server image with no HEALTHCHECK and no health endpoint declared",
    rationale="Without a readiness signal nobody can tell a server that is loading weights "
    "from one that hangs, and cold-start time cannot be measured. Only long-running servers "
    "are judged: an EXPOSE, or a start command (or the start script it runs) that starts a "
    "server. Init containers, CI, base and library images are left alone, and so is an image "
    "that runs its base's program (no ENTRYPOINT, and no CMD or only a CMD of arguments: the "
    "base's HEALTHCHECK is unknown without --resolve-base).",
    fix="add HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1, or declare the "
    "health endpoint in the experiment spec",
)
def check_no_health(ctx: Context) -> Iterator[Hit]:
    if ctx.health_declared or ctx.analysis.state().healthcheck is not None:
        return
    facts = base_facts(ctx)
    if facts is not None and facts.healthcheck:
        return
    verdict = role(ctx)
    if verdict.role != Role.SERVER:
        return
    state = ctx.analysis.state()
    if facts is None and state.entrypoint is None and (
        state.cmd is None or (state.cmd.args and state.cmd.args[0].startswith("-"))
    ):
        return  # it runs its base's program, and the base may well have a HEALTHCHECK
    final = ctx.df.final
    yield Hit(
        "no-health",
        final.from_instr.line,
        f"the final image is a server ({verdict.evidence}) with no HEALTHCHECK (or "
        "HEALTHCHECK NONE) and no health endpoint declared",
        context={"stage": final.label},
    )
