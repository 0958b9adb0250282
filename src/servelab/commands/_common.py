"""Options shared by several subcommands."""

from __future__ import annotations

import argparse

FORMATS_HELP = "output format: text (default), json, markdown, sarif or github (annotations)"


def add_format(parser: argparse.ArgumentParser, default: str = "text") -> None:
    parser.add_argument(
        "-f", "--format", default=default,
        choices=["text", "json", "markdown", "sarif", "github"],
        help=FORMATS_HELP,
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE",
        help="write the report to FILE instead of standard output",
    )


def add_fail_on(parser: argparse.ArgumentParser, default: str = "error") -> None:
    parser.add_argument(
        "--fail-on", default=default, choices=["error", "warning", "info", "none"],
        help=f"exit 1 when a finding reaches this severity (default: {default})",
    )


def emit(report_text: str, output: str | None) -> None:
    import sys

    from servelab.report import write_output

    write_output(report_text, output, sys.stdout.write)
