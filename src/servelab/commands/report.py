"""Merge artifacts from several jobs or runners into one summary.

Give the --out directories (or summary.json / result.json files) of runs made on different
machines, e.g. the jobs of a matrix. The merged summary says, for each arm, whether the same
inputs (same spec hash, same Dockerfile, context and build args, same SOURCE_DATE_EPOCH) gave
the same image digest on every runner: the cross-machine reproducibility one machine cannot
show.

Exit codes: 0 every group of equal inputs gave one digest, 1 a group gave several digests,
2 bad input.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="artifact directories, summary.json or result.json files")
    parser.add_argument("--out", metavar="DIR",
                        help="write the merged summary.md and summary.json here")
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown",
                        help="what to print (default: markdown)")


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from servelab.run.merge import merge_runs

    merged = merge_runs([Path(p) for p in args.paths])
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.md").write_text(merged.markdown, encoding="utf-8")
        (out / "summary.json").write_text(json.dumps(merged.data, indent=2, default=str) + "\n")
    if args.format == "json":
        sys.stdout.write(json.dumps(merged.data, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(merged.markdown)
    return merged.exit_code
