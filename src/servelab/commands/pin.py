"""Pin every tag-only FROM of a Dockerfile to name:tag@sha256:<digest>, asking the registry.

Each FROM whose image has a tag but no digest is resolved with a manifest HEAD request (the
digest the registry reports: for a multi-arch tag, the index digest) and rewritten in place as
name:tag@sha256:...; only that word changes, so flags, stage names, comments and line endings
stay as they were, and the file is replaced atomically. Local and private registries work
(http for 127.0.0.1/localhost and SERVELAB_INSECURE_REGISTRIES; credentials from docker login or
SERVELAB_REGISTRY_USER/SERVELAB_REGISTRY_PASSWORD).

FROM lines that name their image through an ARG are reported, not rewritten: pin the ARG's
default instead. They are substituted as servelab lint substitutes them (global ARG defaults,
${BASE:-default}), so pin --check and lint call the same line the same thing. scratch and
earlier stages need nothing.

With --check nothing is written and no registry is asked: the unpinned FROM lines are listed
(rule base-unpinned) and the exit code says whether there are any.

Exit codes: 0 every base pinned, 1 unpinned bases remain (--check) or could not be resolved,
2 bad input (missing or unreadable Dockerfile), 3 the registry cannot be reached.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import add_format, input_path

    parser.add_argument("dockerfile", type=input_path, metavar="DOCKERFILE",
                        help="the Dockerfile to pin")
    parser.add_argument("--check", action="store_true",
                        help="only list unpinned FROM lines; never write the file; exit 1 if any")
    add_format(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.commands._common import emit
    from servelab.image.pin import pin_file
    from servelab.image.render import render_pin

    report = pin_file(Path(args.dockerfile), check=args.check)
    emit(render_pin(report, args.format), args.output, args.format)
    return report.exit_code
