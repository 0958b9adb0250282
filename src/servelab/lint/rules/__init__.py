"""The lint rules, one module per theme, each rule a small function registered on
:data:`RULES` with its public :class:`~servelab.findings.Rule`.

A check gets a :class:`Context` (the parsed Dockerfile, its stage analysis, the build
context) and yields :class:`Hit` s. Rules about the running image judge the final stage and
the stages it is built FROM; ``weights-baked`` also looks at stages copied from; build-time
rules look at every stage. Importing this package registers every rule, in documentation
order (the order of the imports at the bottom).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from servelab.findings import Record, RuleRegistry, Severity
from servelab.lint.image import Analysis
from servelab.lint.parse import Dockerfile

if TYPE_CHECKING:
    from servelab.lint.basecfg import BaseFacts

__all__ = ["DOCS", "RULES", "Check", "Context", "Hit", "run_checks"]

DOCS = "https://github.com/servelab/servelab/blob/main/docs/lint.md#"


class Hit(Record):
    """What a check found: the rule, the line, the message, and optionally a fix, context and
    a severity other than the rule's."""

    __slots__ = ("context", "fix", "line", "message", "rule", "severity")

    def __init__(self, rule: str, line: int, message: str, fix: str | None = None,  # noqa: PLR0917
                 context: dict[str, str] | None = None,
                 severity: Severity | None = None) -> None:
        self.rule = rule
        self.line = line
        self.message = message
        self.fix = fix
        self.context: dict[str, str] = {} if context is None else context
        #: this finding's severity when it differs from the rule's default
        self.severity = severity


class Context(Record):
    """What a check reads: the parsed Dockerfile, its stage analysis, the build context."""

    __slots__ = ("analysis", "context_dir", "df", "health_declared", "resolve_base")

    def __init__(self, df: Dockerfile, analysis: Analysis, context_dir: Path,
                 health_declared: bool = False,
                 resolve_base: Callable[[str], BaseFacts | None] | None = None) -> None:
        self.df = df
        self.analysis = analysis
        self.context_dir = context_dir
        self.health_declared = health_declared
        #: reads a base image's config (``--resolve-base``); None: the base's config is unknown
        self.resolve_base = resolve_base


Check = Callable[[Context], Iterable[Hit]]
RULES: RuleRegistry[Check] = RuleRegistry(DOCS)


def run_checks(ctx: Context, enabled: Callable[[str], bool] = lambda _r: True) -> list[Hit]:
    hits: list[Hit] = []
    for rule, check in RULES.checks:
        if enabled(rule.id):
            hits.extend(check(ctx))
    return hits


# Importing the theme modules registers their rules on RULES, in this (documentation) order.
# isort: off
from servelab.lint.rules import base  # noqa: E402
from servelab.lint.rules import user  # noqa: E402
from servelab.lint.rules import health  # noqa: E402
from servelab.lint.rules import startup  # noqa: E402
from servelab.lint.rules import weights  # noqa: E402
from servelab.lint.rules import integrity  # noqa: E402
from servelab.lint.rules import packages  # noqa: E402
from servelab.lint.rules import secrets  # noqa: E402
from servelab.lint.rules import context  # noqa: E402
# isort: on

THEMES = (base, user, health, startup, weights, integrity, packages, secrets, context)
