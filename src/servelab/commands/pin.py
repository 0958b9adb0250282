"""Pin every tag-only FROM of a Dockerfile to name:tag@sha256:<digest>, asking the registry.

Each FROM whose image has a tag but no digest is resolved with a manifest HEAD request (the
digest the registry reports: for a multi-arch tag, the index digest) and rewritten in place as
name:tag@sha256:...; only that word changes, so flags, stage names, comments and line endings
stay as they were, and the file is replaced atomically. Local and private registries work
(http for 127.0.0.1/localhost and SERVELAB_INSECURE_REGISTRIES; credentials from docker login or
SERVELAB_REGISTRY_USER/SERVELAB_REGISTRY_PASSWORD).

FROM lines that name their image through an ARG are reported, not rewritten: pin the ARG's
default instead. scratch and earlier stages need nothing.

With --check nothing is written and no registry is asked: the unpinned FROM lines are listed
(rule base-unpinned) and the exit code says whether there are any.

Exit codes: 0 every base pinned, 1 unpinned bases remain (--check) or could not be resolved,
2 bad input (missing or unreadable Dockerfile), 3 the registry cannot be reached.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import add_format

    parser.add_argument("dockerfile", metavar="DOCKERFILE", help="the Dockerfile to pin")
    parser.add_argument("--check", action="store_true",
                        help="only list unpinned FROM lines; never write the file; exit 1 if any")
    add_format(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.commands._common import emit
    from servelab.image.pin import pin_file
    from servelab.report import get_reporter

    reporter = get_reporter(args.format)
    report = pin_file(Path(args.dockerfile), check=args.check)
    for p in report.pinned:
        report.findings.notes.append(f"pinned line {p['line']}: {p['from']} -> {p['to']}")
    if not report.pinned and not report.findings.findings:
        report.findings.notes.append("every base is pinned by digest")
    emit(reporter.render(report.findings), args.output)
    return report.exit_code
