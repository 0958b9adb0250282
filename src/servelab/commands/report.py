"""Merge artifacts from several jobs or runners into one summary.

Give the --out directories (or summary.json / result.json files) of runs made on different
machines, e.g. the jobs of a matrix. The merged summary says, for each arm, whether the same
inputs (same spec hash, same Dockerfile, context and build args, same SOURCE_DATE_EPOCH) gave
the same image digest on every runner: the cross-machine reproducibility one machine cannot
show.

Every summary.json is checked against schemas/summary.schema.json and each of its results
against schemas/result.schema.json: a summary with no results, or results that are not
objects, is bad input (exit 2), never "same digest". --out must be a directory (made if
missing) that holds no summary.md or summary.json: servelab never overwrites a file, and an
existing file as --out is refused too. The directory is locked while report writes there.

A result without a digest (its build failed or was skipped) is no digest: it never groups
with another, and a group holding one is "not comparable" (exit 2), never "same digest".

Shards (the directories of ``servelab run --shard ARM:N``, one arm and repeat each, e.g. the
jobs of workflows-examples/big-image-shards.yml) are merged into the verdict and summary one
machine would give: control against treatment on every metric, the gates, the fixed factors,
reproducibility from the digests. Every arm and repeat must be there once (else exit 2); the
exit code is the run's (0, 1 a failed gate, 2 invalid).

Exit codes: 0 every group of equal inputs gave one digest, 1 a group gave several digests,
2 bad input, or (no group gave several digests) a group is not comparable: a runner gave no
digest.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import input_path
    parser.add_argument("paths", type=input_path, nargs="+", metavar="PATH",
                        help="artifact directories, summary.json or result.json files")
    parser.add_argument("--out", metavar="DIR",
                        help="write the merged summary.md and summary.json here")
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown",
                        help="what to print (default: markdown)")


#: what report --out writes: a directory already holding one of these is refused
OUT_NAMES = ("summary.md", "summary.json")


def run(args: argparse.Namespace) -> int:
    import contextlib
    import json
    import sys

    from servelab.run.merge import merge_runs
    from servelab.textio import claim_dir, write_file

    shards = _shards([Path(p) for p in args.paths], args.out, args.format)
    if shards is not None:
        return shards
    with contextlib.ExitStack() as stack:
        out = (stack.enter_context(claim_dir(Path(args.out), names=OUT_NAMES))
               if args.out else None)
        merged = merge_runs([Path(p) for p in args.paths])
        if out is not None:
            write_file(out / "summary.md", merged.markdown, what="the merged summary.md")
            write_file(out / "summary.json", json.dumps(merged.data, indent=2, default=str)
                       + "\n", what="the merged summary.json")
    if args.format == "json":
        sys.stdout.write(json.dumps(merged.data, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(merged.markdown)
    if merged.exit_code == 2:
        from servelab.escape import terminal_text

        sys.stderr.write("servelab report: not comparable: "
                         + terminal_text("; ".join(merged.data["missing"])) + "\n"
                         "  fix: merge runs whose builds gave a digest on every runner\n")
    return merged.exit_code


def _shards(paths: list[Path], out: str | None, fmt: str) -> int | None:
    """The merge of ``servelab run --shard`` directories; None when *paths* are not shards."""
    import json
    import sys
    import tempfile

    from servelab.escape import terminal_text
    from servelab.run.results import load_results_noted
    from servelab.run.shards import all_shards, merge_shards
    from servelab.textio import claim_dir

    rows: list[dict[str, object]] = []
    notes: list[str] = []
    for p in paths:
        got, repeated = load_results_noted(p)
        rows += got
        notes += repeated
    if not all_shards(rows):
        return None
    for note in notes:
        sys.stderr.write(f"servelab report: {terminal_text(note)}\n")
    if out is not None:
        with claim_dir(Path(out), names=OUT_NAMES):
            res = merge_shards(rows, Path(out))
    else:
        with tempfile.TemporaryDirectory(prefix="servelab-report-") as tmp:
            res = merge_shards(rows, Path(tmp))
    if fmt == "json":
        sys.stdout.write(json.dumps(res.summary, indent=2, default=str) + "\n")
    else:
        sys.stdout.write(res.markdown)
    return res.exit_code
