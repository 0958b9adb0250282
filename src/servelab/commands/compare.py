"""Compare two runs side by side: result.json or summary.json files (or --out directories)
from different days or machines, e.g. yesterday's scheduled rebuild and today's.

Shows, per arm, the digests, sizes, start-up, latency and findings of A and B, what changed,
and whether the inputs were the same (spec hash, Dockerfile, context, build args, commit,
SOURCE_DATE_EPOCH, base digest, Trivy DB).

A and B are read with servelab's safe reader (regular files only, 32 MiB, strict JSON); a
summary.json is checked against schemas/summary.schema.json and every result against
schemas/result.schema.json, so a summary with no results is bad input, never "same digest".

Only what both runs measured is compared; what one side lacks is listed under "Missing". The
verdict needs the treatment's digest in both: two runs that share no arm, a side without a
treatment, or a side that built nothing are "not comparable" (exit 2, even with
--allow-drift), never "same digest".

Exit codes: 0 the treatment's digest is the same in A and B (or --allow-drift), 1 it differs
(drift), 2 bad input or not comparable.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="the earlier run: result.json, summary.json or DIR")
    parser.add_argument("b", metavar="B", help="the later run")
    parser.add_argument("--allow-drift", action="store_true",
                        help="exit 0 even when the digest changed")
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown",
                        help="output format (default: markdown)")


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from servelab.run.merge import compare_runs

    cmp = compare_runs(Path(args.a), Path(args.b))
    if args.format == "json":
        sys.stdout.write(json.dumps(cmp.data, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(cmp.markdown)
    if cmp.exit_code == 2:
        from servelab.escape import terminal_text

        sys.stderr.write("servelab compare: not comparable: "
                         + terminal_text("; ".join(cmp.data["missing"])) + "\n"
                         "  fix: compare two runs that both built the treatment\n")
        return 2
    return 0 if args.allow_drift else cmp.exit_code
