"""Error classes. Each carries the exit code it maps to and a message that says how to fix it.

Exit codes across every command:

* 0 ok
* 1 findings or a failed gate
* 2 bad input or usage
* 3 a missing tool, engine or capability

When several apply, the larger code wins (3 over 2 over 1), see :func:`combine`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum


def tail(text: str, lines: int = 12, *, width: int = 300, inline: bool = False) -> str:
    """The last *lines* non-blank lines of a program's output, each cut to its last *width*
    characters: one per line as ``  | line``, or with *inline* on one line joined by `` | ``
    (here, not in :mod:`servelab.proc`, so that :class:`CommandError` needs no import of it;
    ``proc.tail`` is the same function)."""
    rows = [r.strip() if inline else r for r in text.strip().splitlines() if r.strip()]
    rows = [r[-width:] for r in rows[-lines:]]
    return " | ".join(rows) if inline else "\n".join("  | " + r for r in rows)


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    BAD_INPUT = 2
    MISSING_TOOL = 3


def combine(codes: Iterable[int]) -> int:
    """The exit code of several outcomes: 3 wins over 2, 2 over 1, 1 over 0."""
    return max((int(c) for c in codes), default=int(ExitCode.OK))


class ServelabError(Exception):
    """Base class: a message for the user, a hint on how to fix it, and an exit code."""

    exit_code: int = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  fix: {self.hint}"
        return self.message


class UsageError(ServelabError):
    """Wrong arguments or options."""

    exit_code = ExitCode.BAD_INPUT


class InputError(ServelabError):
    """A file the user gave is missing, unreadable or invalid."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if file is not None:
            where = file
            if line is not None:
                where += f":{line}"
                if column is not None:
                    where += f":{column}"
            where += ": "
        super().__init__(f"{where}{message}", hint=hint)
        self.file = file
        self.line = line
        self.column = column


class InvalidRunError(ServelabError):
    """An experiment whose fixed factors were not really fixed: its comparison means nothing."""

    exit_code = ExitCode.BAD_INPUT


class ToolMissingError(ServelabError):
    """A program servelab needs is not installed or not on PATH."""

    exit_code = ExitCode.MISSING_TOOL

    def __init__(self, tool: str, *, hint: str | None = None) -> None:
        super().__init__(f"required tool '{tool}' was not found on PATH", hint=hint)
        self.tool = tool


class CapabilityError(ServelabError):
    """The engine, builder, DB or device cannot do what the run needs."""

    exit_code = ExitCode.MISSING_TOOL


class CommandError(ServelabError):
    """A subprocess failed or timed out; carries the command, exit code and stderr."""

    exit_code = ExitCode.MISSING_TOOL

    def __init__(
        self,
        command: Sequence[str],
        *,
        returncode: int | None,
        stderr: str,
        timed_out: bool = False,
        hint: str | None = None,
    ) -> None:
        import shlex

        self.command = list(command)
        self.returncode = returncode
        self.stderr = stderr
        self.timed_out = timed_out
        shown = shlex.join(self.command)
        if timed_out:
            msg = f"command timed out: {shown}"
        else:
            msg = f"command failed with exit code {returncode}: {shown}"
        shown_tail = tail(stderr)
        if shown_tail:
            msg += f"\n{shown_tail}"
        super().__init__(msg, hint=hint)


class GateFailed(ServelabError):
    """Findings reached the fail-on level, or a gate of the experiment failed."""

    exit_code = ExitCode.FINDINGS


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread while a :class:`servelab.cleanup.Cleanup` block is
    active; the CLI exits 143 (128 + 15) after cleaning, as it exits 130 on SIGINT."""
