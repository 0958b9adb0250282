"""Static checks of serving Dockerfiles: ``lint_paths`` returns a FindingsReport.

The parser is BuildKit's own (PyPI ``dockerfile``); rules live in :mod:`servelab.lint.rules`
(a package, one module per theme); hadolint findings are merged when hadolint is installed.
Nothing here imports the Docker SDK or jsonschema.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from servelab.errors import InputError
from servelab.findings import CoverageNote, Finding, FindingsReport, Rule
from servelab.lint import config as _config
from servelab.lint import follow, ignore, parse, rules
from servelab.lint import hadolint as _hadolint
from servelab.lint.config import LintConfig
from servelab.lint.image import Analysis
from servelab.textio import PathPolicy, repository_root

if TYPE_CHECKING:
    from servelab.lint.basecfg import BaseResolver
    from servelab.textio import AllowedPath

__all__ = [
    "RULES", "LintConfig", "discover_config", "find_dockerfiles", "is_dockerfile_name",
    "lint_paths",
]

#: every lint rule id -> its Rule, in documentation order
RULES: dict[str, Rule] = rules.RULES.rules


def discover_config(start: Path | None = None,
                    allowed: tuple[AllowedPath, ...] = ()) -> LintConfig:
    """Lint settings from the nearest .servelab.yaml/pyproject.toml at or above *start*
    (cwd), within its repository."""
    return _config.discover((start or Path.cwd()).resolve(), set(RULES), allowed)


_BASE_NAMES = ("dockerfile", "containerfile")
#: names that start like a Dockerfile but are templates, docs or ignore files
_NOT_DOCKERFILE = (
    ".dockerignore", ".containerignore", ".j2", ".jinja", ".jinja2", ".tmpl", ".tpl",
    ".template", ".in", ".erb", ".md", ".txt", ".rst", ".orig", ".bak", ".rej", ".swp", ".sh",
    ".py", ".yaml", ".yml", ".json", ".toml", ".lock", ".patch", ".diff",
)
DOCKERFILE_NAMES = (
    "Dockerfile, Containerfile, Dockerfile.*, Dockerfile-*, Dockerfile_*, *.Dockerfile, "
    "*.containerfile (any case; not templates such as Dockerfile.j2)"
)


def is_dockerfile_name(name: str) -> bool:
    """Whether directory mode lints a file of this name (see :data:`DOCKERFILE_NAMES`)."""
    low = name.lower()
    if low.endswith(_NOT_DOCKERFILE):
        return False
    for base in _BASE_NAMES:
        if low == base or low.endswith("." + base):
            return True
        if low.startswith(base) and low[len(base)] in "._-":
            return True
    return False


def find_dockerfiles(paths: Iterable[str | Path]) -> list[tuple[Path, str]]:
    """(path, display name) of every Dockerfile named or found under directories."""
    out: list[tuple[Path, str]] = []
    for given in paths:
        p = Path(given)
        if not p.is_dir():
            out.append((p, str(given)))
            continue
        found: list[tuple[Path, str]] = []
        policy = PathPolicy(repository_root(p))
        for dirpath, dirnames, filenames in os.walk(p):  # linked folders are not entered
            dirnames[:] = sorted(d for d in dirnames if d not in ignore.SKIP_DIRS)
            for f in sorted(filenames):
                if is_dockerfile_name(f):
                    q = Path(dirpath) / f  # a link out of the repository is refused unread
                    found.append((policy.confine(f, Path(dirpath), kind="dockerfile",
                                                 field="Dockerfile", file=str(q)), str(q)))
        if not found:
            raise InputError(
                f"no Dockerfile found (looked for {DOCKERFILE_NAMES})",
                file=str(given),
                hint="pass a Dockerfile path or a directory that contains one",
            )
        out.extend(found)
    return out


class _FileResult(NamedTuple):
    df: parse.Dockerfile
    findings: list[Finding]
    suppressions: _config.Suppressions
    #: what following the start command did not fully read (docs/limits.md)
    coverage: list[CoverageNote]


def _lint_file(
    path: Path,
    *,
    display: str,
    build_args: Mapping[str, str],
    health_declared: bool,
    cfg: LintConfig,
    context: Path | None,
    resolver: BaseResolver | None,
) -> _FileResult:
    df = parse.load(path, display, build_args)
    ctx_dir = context if context is not None else (path.parent if str(path.parent) else Path())
    analysis = Analysis(df, ctx_dir, build_args, source_finder=follow.source)
    ctx = rules.Context(df, analysis, ctx_dir, health_declared, resolver)
    try:
        hits = rules.run_checks(ctx, lambda rid: rid not in cfg.disable)
    except RecursionError as e:  # stage chains past what the limits allow (docs/limits.md)
        raise InputError("stages or substitutions chained too deeply to check",
                         file=display, hint="lower SERVELAB_MAX_STAGES or split the "
                         "Dockerfile") from e
    findings = []
    for h in hits:
        r = RULES[h.rule]
        if len(df.stages) == 1:  # "stage: 0" says nothing in a single-stage file
            h.context.pop("stage", None)
        findings.append(
            Finding(
                rule_id=h.rule,
                severity=cfg.severity.get(h.rule, h.severity or r.severity),
                message=h.message,
                file=display,
                line=h.line,
                fix=h.fix or r.fix,
                context=h.context,
            )
        )
    spans = [(ins.line, ins.end_line) for ins in df.instructions]
    coverage = [n._replace(file=display) for n in ctx.analysis.coverage.items]
    return _FileResult(df, findings, _config.Suppressions(df.lines, spans), coverage)


def _suppressed(f: Finding, sup: _config.Suppressions, cfg: LintConfig) -> bool:
    related = {f.rule_id, _hadolint.DUPLICATES.get(f.rule_id, f.rule_id)}
    if related & cfg.disable:
        return True
    start = sup.start(f.line or 1)
    if related & sup.servelab(start):
        return True
    if f.source != "servelab":
        return False
    manager = f.context.get("manager")
    return any(_hadolint.covers(code, f.rule_id, manager) for code in sup.hadolint(start))


def _merge_hadolint(
    results: dict[str, _FileResult], cfg: LintConfig, report: FindingsReport
) -> None:
    """Add hadolint's findings, except those servelab's own rules judge (they are dropped
    whether servelab found something there or not) and exact repeats."""
    shown = {d: (("./" + d) if d.startswith("-") else d) for d in results}
    back = {v: k for k, v in shown.items()}
    had = _hadolint.run(list(shown.values()))
    report.notes.extend(had.notes)
    seen: set[tuple[str | None, int | None, int | None, str, str]] = set()
    for f in had.findings:
        f.file = back.get(f.file or "", f.file)
        dup_of = _hadolint.DUPLICATES.get(f.rule_id)
        key = (f.file, f.line, f.column, f.rule_id, f.message)
        if key in seen or (dup_of and dup_of not in cfg.disable):
            continue
        seen.add(key)
        res = results.get(f.file or "")
        if res is None or _suppressed(f, res.suppressions, cfg):
            continue
        f.severity = cfg.severity.get(f.rule_id, f.severity)
        report.findings.append(f)
        report.rules.setdefault(f.rule_id, had.rules[f.rule_id])


def lint_paths(
    paths: Iterable[str | Path],
    *,
    build_args: Mapping[str, str] | None = None,
    health_declared: bool = False,
    config: LintConfig | None = None,
    context: Path | None = None,
    hadolint: bool | None = None,
    resolve_base: bool = False,
) -> FindingsReport:
    """Lint Dockerfiles (files, or directories searched for them).

    *build_args* fill ARGs used in FROM; *health_declared* says the experiment spec declares
    a health endpoint (so ``no-health`` does not apply); *config* defaults to the settings
    found from the current directory; *context* overrides the build context (default: each
    Dockerfile's directory); *hadolint* overrides the config's hadolint setting;
    *resolve_base* reads the final base image's config (USER, HEALTHCHECK, EXPOSE) from the
    local engine or its registry (off: lint reads only files). Raises InputError for
    missing, binary, empty or unparsable files.
    """
    cfg = config if config is not None else discover_config()
    args = dict(build_args or {})
    if context is not None and not context.is_dir():
        raise InputError("build context is not a directory", file=str(context))
    files = find_dockerfiles(paths)
    resolver = None
    if resolve_base:
        from servelab.lint.basecfg import BaseResolver

        resolver = BaseResolver()
    results: dict[str, _FileResult] = {}
    for path, display in files:
        results[display] = _lint_file(
            path,
            display=display,
            build_args=args,
            health_declared=health_declared,
            cfg=cfg,
            context=context,
            resolver=resolver,
        )
    enabled = {rid: r for rid, r in RULES.items() if rid not in cfg.disable}
    report = FindingsReport(
        tool="servelab lint",
        findings=[],
        rules={
            rid: Rule(
                r.id, cfg.severity.get(rid, r.severity), r.summary, r.rationale, r.fix, r.help_uri
            )
            for rid, r in enabled.items()
        },
        files=list(results),
        settings=_config.settings_of(cfg),
    )
    for display, res in results.items():
        report.findings += [f for f in res.findings if not _suppressed(f, res.suppressions, cfg)]
        report.add_coverage(res.coverage)
        report.notes += [
            f"{display}:{line}: unknown rule id {rid!r} in a servelab: ignore comment"
            for line, rid in _config.unknown_suppressions(res.df.lines, set(RULES))
        ]
        # forms today's frontend reads and an older builder refuses or reads differently
        report.notes += [f"{display}:{line}: {what}" for line, what in res.df.notes]
    if resolver is not None:
        report.notes += resolver.notes
    use_hadolint = cfg.hadolint if hadolint is None else hadolint
    if use_hadolint and results:
        _merge_hadolint(results, cfg, report)
    return report
