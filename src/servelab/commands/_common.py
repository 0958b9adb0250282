"""Options shared by several subcommands."""

from __future__ import annotations

import argparse

FORMATS_HELP = "output format: text (default), json, markdown, sarif or github (annotations)"


#: the output files named on this command line (``output_path``), checked by
#: :func:`check_outputs` once it is parsed
_OUTPUTS: list[str] = []


def input_path(text: str) -> str:
    """argparse type of every option that names an input file (read by servelab or handed to
    a tool: ``--vex``, ``--ignore-file``, ``--spec``, targets): the file is an input of the
    command (:func:`servelab.textio.note_input_path`), so no output option may name it."""
    from servelab.textio import note_input_path

    if text and text != "-":
        note_input_path(text)
    return text


def output_path(text: str) -> str:
    """argparse type of every option that names an output file (``-o``, ``--sarif``): checked
    against every input once the whole command line is parsed (:func:`check_outputs`)."""
    _OUTPUTS.append(text)
    return text


def check_outputs() -> None:
    """Refuse (exit 2, before any work) an output option that names an input of the command,
    whichever option came first on the command line (``cli.main`` calls it after parsing)."""
    from pathlib import Path

    from servelab.textio import check_output

    named, _OUTPUTS[:] = list(_OUTPUTS), []  # one command line's (tests call main often)
    for text in named:
        if text and text != "-":
            check_output(Path(text))


def add_format(parser: argparse.ArgumentParser, default: str = "text") -> None:
    """``-f/--format`` of a findings command: every Reporter registered in servelab.report."""
    from servelab.report import reporter_names

    parser.add_argument(
        "-f", "--format", default=default, choices=reporter_names(),
        help=FORMATS_HELP,
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", type=output_path,
        help="write the report to FILE instead of standard output",
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` of a command with long steps: no progress on stderr (servelab.logs)."""
    parser.add_argument(
        "-q", "--quiet", action="store_true",
        help="no progress of long steps on stderr (shown by default: a live line on a "
        "terminal, one line per step and a heartbeat every 10 s in a log)",
    )


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + f"... ({len(text)} characters)"


def ascii_int(text: str) -> int:
    """argparse type for counts, ports and codes: :func:`servelab.textio.ascii_int` (ASCII
    digits only: ``int()`` would take ``"٣"`` as 3), with an optional sign and at most 9
    digits, so ``"²"``, ``"1e3"`` and 5000-digit numbers are a usage error (exit 2)."""
    from servelab import textio

    s = text.strip()
    sign = -1 if s[:1] == "-" else 1
    value = textio.ascii_int(s[1:] if s[:1] in "+-" else s, max_digits=9)
    if value is None:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number (ASCII digits)")
    return sign * value


def finite_float(text: str) -> float:
    """argparse type for seconds and hours: :func:`servelab.textio.finite_float` on ASCII text
    (``float()`` takes ``"٣"`` too), and not negative."""
    from servelab import textio

    s = text.strip()
    if not s or not all(c in "0123456789.+-eE" for c in s):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number (ASCII digits)")
    try:
        value = textio.finite_float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be a finite number >= 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be a finite number >= 0")
    return value


def fail_on_value(text: str) -> str:
    """argparse type of ``--fail-on``: the one grammar (servelab.findings.parse_fail_on);
    the value, canonical, or a usage error (exit 2)."""
    from servelab.errors import InputError
    from servelab.findings import parse_fail_on

    try:
        return parse_fail_on(text).text
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def add_fail_on(parser: argparse._ActionsContainer, default: str | None = "error", *,
                what: str = "exit 1 when a finding reaches this severity",
                shown_default: str | None = None) -> None:
    """The ``--fail-on`` flag, with one grammar and one help text wherever it is."""
    from servelab.findings import FAIL_ON_HELP

    parser.add_argument(
        "--fail-on", default=default, type=fail_on_value, metavar="SEVERITIES",
        help=f"{what} ({FAIL_ON_HELP}; default: {shown_default or default})",
    )


def emit(report_text: str, output: str | None, fmt: str = "") -> None:
    """Print (or write to *output*) a command's report. A ``text`` report on standard output
    quotes inputs and tools (names, log tails): under GitHub Actions it goes inside
    ``::stop-commands::`` (servelab.escape.untrusted_block), so that nothing in it is taken for
    a workflow command. Other formats (json, sarif, github annotations) are left as they are."""
    import sys

    from servelab.report import write_output

    if fmt == "text" and output in (None, "-"):
        from servelab.escape import untrusted_block

        report_text = untrusted_block(report_text, sys.stdout)
    write_output(report_text, output, sys.stdout.write)


def allow_path_value(text: str) -> object:
    """argparse type of ``--allow-path KIND=DIR`` (:func:`servelab.textio.parse_allow_path`)."""
    from servelab.errors import UsageError
    from servelab.textio import parse_allow_path

    try:
        return parse_allow_path(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def add_allow_path(parser: argparse._ActionsContainer) -> None:
    """``--allow-path KIND=DIR``: the only way to let a path the experiment names lead
    outside its repository (docs/limits.md); no file can set it."""
    from servelab.textio import PATH_KINDS

    parser.add_argument(
        "--allow-path", action="append", default=[], type=allow_path_value, metavar="KIND=DIR",
        help="let the experiment's paths of KIND lead under DIR, outside the repository "
        f"(repeatable; KIND: {', '.join(PATH_KINDS)}; e.g. model=/models)",
    )
