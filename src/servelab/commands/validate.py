"""Validate experiment files against servelab's JSON Schema.

Every problem of every file is reported with file, line, column, JSON path and a fix: schema
errors, malformed YAML, duplicate keys, tags on wrong values (!!int abc), NaN and infinity,
non-UTF-8 bytes (UTF-16 named as such), oversized files, pipes and devices (only regular files
are read), alias bombs, deep nesting, empty files and multi-document files where the
experiment cannot be told apart. Limits: docs/limits.md.

Both forms are accepted: the native one (apiVersion: servelab/v1, kind: Experiment) and a
Kubernetes ConfigMap whose data holds change, fixed, metrics and repeats as strings.

Exit codes: 0 all valid, 2 a file is invalid or unreadable.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import add_allow_path, add_format, input_path

    parser.add_argument("files", nargs="+", metavar="FILE", type=input_path,
                        help="experiment YAML files")
    parser.add_argument(
        "--document", metavar="NAME",
        help="the metadata.name of the experiment document in a multi-document file",
    )
    add_allow_path(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.commands._common import emit
    from servelab.errors import ExitCode
    from servelab.report import get_reporter
    from servelab.spec import validate_files

    reporter = get_reporter(args.format)
    report = validate_files([Path(f) for f in args.files], args.document,
                            tuple(args.allow_path))
    emit(reporter.render(report), args.output, args.format)
    return int(ExitCode.BAD_INPUT if report.findings else ExitCode.OK)
