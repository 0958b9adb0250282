"""The history of past runs of one experiment, newest first: e.g. a scheduled rebuild's.

PATH is a run directory (servelab run --out), a summary.json, a history file (JSON Lines,
*.jsonl, one run a line: what --append-to writes; schemas/history.schema.json), or a folder
holding any of these (the artifacts of past workflow runs, once downloaded); in a folder,
history files are those named history.jsonl or *.history.jsonl. Every file is
read with servelab's safe reader and checked against its schema.

The trend shows per run: date, commit, digest per arm, reproducible or not, compressed size,
start-up (median and spread), findings by severity and the verdict. The first run of a new
digest is marked (◆), with the recorded inputs that differ from the run before (base digest,
SOURCE_DATE_EPOCH, builder, engine, Trivy and its DB, context hash, ...) or, when none
differs, "not reproducible". Markdown adds size, start-up and findings over time as Mermaid
xychart-beta charts. Nothing is dropped silently: runs of other experiments are listed apart,
a run read twice is counted once, and each file or line not used is named with its reason.

--out DIR writes history.md, history.json and history.svg (the charts, self-contained); DIR
is claimed for the command like run --out: a second servelab writing there, or one of these
files already there, is exit 2 and nothing is written.
--append-to FILE adds the runs that FILE does not hold yet to it (created when missing),
keeping its lines as they are: the way to carry a history forward from run to run. The file
is read and appended to under a lock, in one write, so parallel jobs appending to one file all
land; each run is one JSON record on one line (ASCII). A FILE that is not a servelab history
(another tool's JSON Lines, a text file) is refused, exit 2, and left as it was.

Exit codes: 0 the trend was written, 2 bad usage or no run could be read.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from servelab.run.history import History


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import input_path
    parser.add_argument("paths", type=input_path, nargs="+", metavar="PATH",
                        help="run directories, summary.json or history (.jsonl) files, or "
                        "folders of them")
    parser.add_argument("--format", choices=["text", "markdown", "json"], default="text",
                        help="what to print (default: text)")
    parser.add_argument("--experiment", metavar="NAME",
                        help="the experiment to trace (default: the one with the most runs)")
    parser.add_argument("--out", metavar="DIR",
                        help="write history.md, history.json and history.svg here")
    parser.add_argument("--append-to", metavar="HISTORY_FILE",
                        help="append the runs this history file lacks to it (JSON Lines)")


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from servelab.run.history import append, read_history
    from servelab.run.render import render_history

    out = _out_dir(args.out) if args.out else None
    history = read_history([Path(p) for p in args.paths], args.experiment)
    if out is not None:
        _write_out(out, history)
    if args.append_to:
        target = Path(args.append_to)
        # the history file may be an input too: its lines are kept, the new ones appended
        # under a lock in one write; a summary.json input never is the target
        added = append(target, history)
        sys.stderr.write(f"servelab history: {added} run(s) appended to {target}\n")
    sys.stdout.write(render_history(history, args.format))
    return 0


def _out_dir(text: str) -> Path:
    from pathlib import Path

    from servelab.errors import InputError

    out = Path(text)
    if out.exists() and not out.is_dir():
        raise InputError("--out names an existing file, not a directory; nothing was written",
                         file=text, hint="give a directory for history.md, .json and .svg")
    return out


#: what history --out writes: a directory already holding one of these is refused
OUT_NAMES = ("history.md", "history.json", "history.svg")


def _write_out(out: Path, history: History) -> None:
    """Write the three files into *out*, claimed like run/build/report --out do
    (textio.claim_dir): a second servelab on it, or a user's file of these names, is exit 2
    and nothing is written."""
    from servelab.errors import InputError
    from servelab.run.history import same_file, series
    from servelab.run.render import render_history
    from servelab.run.svg import history_svg
    from servelab.textio import claim_dir, write_file

    files = {"history.md": render_history(history, "markdown"),
             "history.json": render_history(history, "json"),
             "history.svg": history_svg(f"servelab history: {history.experiment}",
                                        series(history))}
    for name in files:
        if any(same_file(out / name, f) for f in history.inputs):
            raise InputError(f"--out would replace an input ({name}); nothing was written",
                             file=str(out / name), hint="give another --out directory")
    with claim_dir(out, names=OUT_NAMES):
        for name, text in files.items():
            write_file(out / name, text, what=f"the {name}")
