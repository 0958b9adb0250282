"""Write the composite action's outputs for a servelab results directory (hidden: the action's
own step, not listed in servelab --help).

  python -m servelab action-outputs --results-dir DIR [--prefix P] [--job J] [--attempt N]
                                    [--slots N] [--upload true|false]

Reads DIR/summary.json and appends to GITHUB_OUTPUT: the action's outputs (verdict,
reproducible, digest, size, startup-p50, findings-*, summary-path, results-dir) and the
artifact plan (artifact-name-<i>/artifact-path-<i> for each upload slot, then the summary and
overflow artifacts). A missing summary.json gives empty outputs, not an error: the run's own
step reports why it did not finish. With more repeat directories than slots it writes a
warning annotation.

Errors are written as ::error workflow commands on standard output, which the runner turns
into annotations. Exit codes: 0 outputs written, 2 bad input or usage (GITHUB_OUTPUT not set,
an unwritable file), 3 a missing tool.
"""

from __future__ import annotations

import argparse
import os


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results-dir", required=True, metavar="DIR",
                        help="the --out directory of servelab run")
    parser.add_argument("--prefix", default="servelab",
                        help="first part of every artifact name (default: servelab)")
    parser.add_argument("--job", default=os.environ.get("GITHUB_JOB", "job"),
                        help="the job id in artifact names (default: $GITHUB_JOB, else job)")
    attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "1")
    parser.add_argument("--attempt", type=int, default=int(attempt) if attempt.isdigit() else 1,
                        help="the run attempt; above 1 it ends every artifact name "
                        "(default: $GITHUB_RUN_ATTEMPT, else 1)")
    parser.add_argument("--slots", type=int, metavar="N",
                        help="upload slots (default: action.yml's, "
                        "servelab.run.github.MAX_ARTIFACT_SLOTS)")
    # GitHub compares strings case-insensitively in `if:`; so does this.
    parser.add_argument("--upload", default="true",
                        help="true (any case) to plan the uploads; else no slot is filled")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.errors import ServelabError
    from servelab.run.github import MAX_ARTIFACT_SLOTS, action_outputs, annotate

    try:
        action_outputs(
            Path(args.results_dir),
            prefix=args.prefix,
            job=args.job,
            attempt=args.attempt,
            slots=MAX_ARTIFACT_SLOTS if args.slots is None else args.slots,
            upload=args.upload.strip().lower() == "true",
        )
    except ServelabError as e:
        annotate([{"level": "error", "title": "servelab", "message": str(e)}])
        return int(e.exit_code)
    except OSError as e:
        annotate([{"level": "error", "title": "servelab", "message": str(e)}])
        return 2
    return 0
