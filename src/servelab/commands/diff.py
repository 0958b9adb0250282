"""Explain what differs between two images A and B.

A and B are OCI archives (docker buildx build --output type=oci, docker save), OCI layout
directories, or image references (oci-archive:PATH, oci:DIR, docker-daemon:REF and docker://REF
force the kind; a plain reference is read from the local engine when it has it, else from the
registry).

The comparison goes from the top down and stops where things are equal: index and platforms,
manifest, config (created, history, env, labels, entrypoint, user, ...), then layers. Only layers
whose digests and diff_ids differ are opened; they are streamed (gzip/zstd decompressed on the
fly, never extracted) and compared entry by entry: content, size, mode, uid/gid, mtime, link
target, xattrs and PAX headers.

Verdicts: identical; timestamps-only (only mtimes and created dates differ); encoding-only (same
files, other compression or tar layout); differs (content or settings differ).

Exit codes: 0 identical (with --ignore-timestamps: also timestamps-only and encoding-only),
1 the images differ, 2 bad input (unreadable archive, unknown reference), 3 a missing tool or
unreachable engine/registry.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="first image: archive, layout dir or reference")
    parser.add_argument("b", metavar="B", help="second image: archive, layout dir or reference")
    parser.add_argument(
        "--ignore-timestamps", action="store_true",
        help="hide timestamp-only differences and exit 0 when nothing else differs",
    )
    parser.add_argument("--platform", metavar="OS/ARCH",
                        help="compare this platform of multi-platform images (e.g. linux/amd64)")
    parser.add_argument("--max-entries", type=int, default=1000, metavar="N",
                        help="list at most N file differences per layer (default 1000)")
    parser.add_argument("-f", "--format", default="text", choices=["text", "json", "markdown"],
                        help="output format (default text)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the report to FILE instead of standard output")


def run(args: argparse.Namespace) -> int:
    from servelab.commands._common import emit
    from servelab.errors import ExitCode, UsageError
    from servelab.image.diff import diff_images, render

    if args.max_entries < 1:
        raise UsageError("--max-entries must be at least 1")
    result = diff_images(args.a, args.b, platform=args.platform,
                         ignore_timestamps=args.ignore_timestamps,
                         max_entries=args.max_entries)
    emit(render(result, args.format), args.output)
    return int(ExitCode.OK if result.equivalent else ExitCode.FINDINGS)
