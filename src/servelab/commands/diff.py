"""Explain what differs between two images A and B.

A and B are OCI archives (docker buildx build --output type=oci, docker save), OCI layout
directories, or image references (oci-archive:PATH, oci:DIR, docker-daemon:REF and docker://REF
force the kind; a plain reference is read from the local engine when it has it, else from the
registry). Text that looks like a path (ends in .tar, starts with / . or ~, or has a directory
part that exists) is only ever a path: a missing file is exit 2, never a registry lookup.

The comparison goes from the top down and stops where things are equal: index and platforms,
manifest, config (created, history, env, labels, entrypoint, user, ...), then layers. Only layers
whose digests and diff_ids differ are opened; they are streamed (gzip/zstd decompressed on the
fly, never extracted) and compared entry by entry: content, size, mode, uid/gid, mtime, link
target, xattrs and PAX headers.

Every blob read is verified against its digest and declared size while it streams (a layer
reported as "other compression" is read through to check both digests and its diff_id), and
decompression is capped: a layer stops at --max-layer-bytes (default 256G,
SERVELAB_MAX_LAYER_BYTES) uncompressed, or once past 64 MiB (SERVELAB_EXPANSION_FLOOR) when it
expands more than --max-expansion times (default 100, SERVELAB_MAX_EXPANSION).

Verdicts: identical; timestamps-only (only mtimes and created dates differ); encoding-only (same
files, other compression or tar layout); differs (content or settings differ).

Exit codes: 0 identical (with --ignore-timestamps: also timestamps-only and encoding-only),
1 the images differ, 2 bad input (unreadable archive, unknown reference, a blob that does not
match its digest or size, corrupt data, a cap reached), 3 a missing tool or unreachable
engine/registry; 130/143 on Ctrl-C/SIGTERM (the work stops within a second).
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import ascii_int, output_path
    parser.add_argument("a", metavar="A", help="first image: archive, layout dir or reference")
    parser.add_argument("b", metavar="B", help="second image: archive, layout dir or reference")
    parser.add_argument(
        "--ignore-timestamps", action="store_true",
        help="hide timestamp-only differences and exit 0 when nothing else differs",
    )
    parser.add_argument("--platform", metavar="OS/ARCH",
                        help="compare this platform of multi-platform images (e.g. linux/amd64)")
    parser.add_argument("--max-entries", type=ascii_int, default=1000, metavar="N",
                        help="list at most N file differences per layer (default 1000)")
    parser.add_argument("--max-layer-bytes", metavar="SIZE",
                        help="stop reading a layer past SIZE uncompressed (e.g. 512G; default "
                        "256G or SERVELAB_MAX_LAYER_BYTES)")
    parser.add_argument("--max-expansion", metavar="RATIO",
                        help="stop reading a layer past 64 MiB that expands more than RATIO "
                        "times its compressed bytes (default 100 or SERVELAB_MAX_EXPANSION)")
    parser.add_argument("-f", "--format", default="text", choices=["text", "json", "markdown"],
                        help="output format (default text)")
    parser.add_argument("-o", "--output", type=output_path, metavar="FILE",
                        help="write the report to FILE instead of standard output")


def run(args: argparse.Namespace) -> int:
    from servelab.cleanup import Cleanup, new_run_id
    from servelab.commands._common import emit
    from servelab.errors import ExitCode, UsageError
    from servelab.image.blob import Limits
    from servelab.image.diff import diff_images
    from servelab.image.render import render_diff

    if args.max_entries < 1:
        raise UsageError("--max-entries must be at least 1")
    limits = Limits.from_env(max_layer_bytes=args.max_layer_bytes,
                             max_expansion=args.max_expansion)
    with Cleanup(new_run_id()):  # SIGTERM unwinds like Ctrl-C: temporary copies are removed
        result = diff_images(args.a, args.b, platform=args.platform,
                             ignore_timestamps=args.ignore_timestamps,
                             max_entries=args.max_entries, limits=limits)
    emit(render_diff(result, args.format), args.output, args.format)
    return int(ExitCode.OK if result.equivalent else ExitCode.FINDINGS)
