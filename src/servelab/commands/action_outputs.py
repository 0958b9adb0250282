"""Publish a servelab results directory in the composite action (hidden: the action's own step,
not listed in servelab --help).

  python -m servelab action-outputs --results-dir DIR [--prefix P] [--job J] [--attempt N]
      [--slots N] [--upload true|false] [--exit-code N] [--log FILE] [--working-directory D]
      [--leg NAME] [--pr-comment true|false]

Reads DIR/summary.json and appends to GITHUB_OUTPUT: the action's outputs (verdict,
reproducible, digest, size, startup-p50, findings-*, summary-path, results-dir) and the
artifact plan (artifact-name-<i>/artifact-path-<i> for each upload slot, then the summary and
overflow artifacts). Artifact names are <prefix>-<job>[-<leg>]-<arm>-repeat-<n>: the action's
run step names the matrix leg (servelab.github.matrix_leg, from the matrix and strategy
contexts), so matrix legs never collide. With more repeat directories than slots it writes a
warning.

When servelab run stopped before writing summary.json (--exit-code given), it reports the stop
where GitHub shows it: an ::error annotation with the cause, and a job summary (also written as
DIR/summary.md) saying what ran (from --log, the run's captured output), what stopped it and
the fix in terms of the action's inputs.

With --pr-comment true it posts or updates the sticky pull-request comment (the verdict, why,
the control-vs-treatment table) with the token in GITHUB_TOKEN; never for a fork's pull
request; a failure to comment is a warning, not a failed step.

Errors are written as ::error workflow commands on standard output, which the runner turns
into annotations. summary.json is read through the safe reader and its schema. A
GITHUB_OUTPUT or GITHUB_STEP_SUMMARY that cannot be written is a warning on stderr, not a
failure. Exit codes: 0 outputs written (or warned about), 2 bad input or usage (GITHUB_OUTPUT
not set, a summary.json that is not servelab's, a pipe or device), 3 a missing tool.
"""

from __future__ import annotations

import argparse
import os


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else default


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import ascii_int, input_path
    parser.add_argument("--results-dir", required=True, metavar="DIR",
                        help="the --out directory of servelab run")
    parser.add_argument("--prefix", default="servelab",
                        help="first part of every artifact name (default: servelab)")
    parser.add_argument("--job", default=os.environ.get("GITHUB_JOB", "job"),
                        help="the job id in artifact names (default: $GITHUB_JOB, else job)")
    parser.add_argument("--attempt", type=ascii_int, default=_env_int("GITHUB_RUN_ATTEMPT", 1),
                        help="the run attempt; above 1 it ends every artifact name "
                        "(default: $GITHUB_RUN_ATTEMPT, else 1)")
    parser.add_argument("--slots", type=ascii_int, metavar="N",
                        help="upload slots (default: action.yml's, "
                        "servelab.github.MAX_ARTIFACT_SLOTS)")
    # GitHub compares strings case-insensitively in `if:`; so does this.
    parser.add_argument("--upload", default="true",
                        help="true (any case) to plan the uploads; else no slot is filled")
    parser.add_argument("--exit-code", default="", metavar="N",
                        help="servelab run's exit code; with no summary.json, report the stop")
    parser.add_argument("--log", type=input_path, metavar="FILE",
                        help="servelab run's captured output (what ran, what stopped it)")
    parser.add_argument("--working-directory", default=".", metavar="DIR",
                        help="where servelab run ran (a file an error names is looked up there)")
    parser.add_argument("--leg", default="", metavar="NAME",
                        help="the matrix leg in artifact names and the PR comment's key "
                        "(empty outside a matrix)")
    parser.add_argument("--pr-comment", default="false",
                        help="true (any case) to post or update the sticky PR comment, with "
                        "the token in $GITHUB_TOKEN")


def _log_text(path: str | None) -> str:
    from pathlib import Path

    from servelab.errors import ServelabError
    from servelab.textio import read_tail

    if not path:
        return ""
    try:  # the safe reader: a pipe or /dev/zero as --log is skipped, never waited on
        raw = read_tail(Path(path), 1 << 20, what="log")
    except (ServelabError, OSError):
        return ""
    return raw.decode("utf-8", errors="replace")


def _exit_code(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else (2 if text else None)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.errors import ServelabError
    from servelab.github import MAX_ARTIFACT_SLOTS, action_outputs, annotate, artifact_name

    leg = args.leg.strip()
    results = Path(args.results_dir)
    try:
        action_outputs(
            results,
            prefix=args.prefix,
            job=args.job,
            attempt=args.attempt,
            slots=MAX_ARTIFACT_SLOTS if args.slots is None else args.slots,
            upload=args.upload.strip().lower() == "true",
            leg=leg,
            exit_code=_exit_code(args.exit_code),
            log_text=_log_text(args.log),
            roots=[Path(args.working_directory), Path.cwd()],
        )
    except ServelabError as e:
        annotate([{"level": "error", "title": "servelab", "message": str(e)}])
        return int(e.exit_code)
    except OSError as e:
        annotate([{"level": "error", "title": "servelab", "message": str(e)}])
        return 2
    if args.pr_comment.strip().lower() == "true":
        _comment(results, artifact_name(args.prefix, args.job, leg))  # one per job and leg
    return 0


def _comment(results: object, key: str) -> None:
    """The sticky PR comment; what happened is a notice, a failure a warning (never exit 1)."""
    import os
    from pathlib import Path

    from servelab.errors import ServelabError
    from servelab.github import annotate, comment_on_pr

    try:
        outcome = comment_on_pr(Path(str(results)), key=key,
                                token=os.environ.get("GITHUB_TOKEN", ""))
    except ServelabError as e:
        annotate([{"level": "warning", "title": "servelab: no PR comment", "message": str(e)}])
        return
    text = f"PR comment {outcome.action}" + (f": {outcome.reason}" if outcome.reason else "") \
        + (f" ({outcome.url})" if outcome.url else "")
    annotate([{"level": "notice", "title": "servelab", "message": text}])
