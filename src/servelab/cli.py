"""The command line: parse arguments, call the core, print its result, return an exit code.

Each subcommand lives in ``servelab.commands.<module>`` and provides ``configure(parser)`` and
``run(args) -> int``. Command modules import only argparse at module level, so that
``servelab lint`` does not pay for the Docker SDK or jsonschema.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, NoReturn

from servelab import __version__, logs
from servelab.errors import ExitCode, ServelabError, Terminated

#: (command name, module under servelab.commands, one-line help)
COMMANDS: list[tuple[str, str, str]] = [
    ("validate", "validate", "validate experiment files against the schema"),
    ("doctor", "doctor", "report what this machine can do (engine, buildx, OCI, Trivy, GPU)"),
    ("lint", "lint", "static checks of serving Dockerfiles (pinned base, non-root, weights)"),
    ("k8s-check", "k8s_check", "pre-launch checks of Kubernetes manifests of a GPU service"),
    ("build", "build", "build each arm N times (no cache, OCI, fixed timestamps); compare"),
    ("diff", "diff", "explain what differs between two images (config, layers, files)"),
    ("pin", "pin", "pin every FROM of a Dockerfile to its registry digest (or --check)"),
    ("scan", "scan", "scan an image with Trivy: gate, compare, SARIF, SBOM; fails closed"),
    ("smoke", "smoke", "start the image hardened and time it to ready and a first good request"),
    ("run", "run", "run a whole experiment: lint, build, scan, smoke; artifacts and summary"),
    ("calibrate", "calibrate", "the control against itself (A/A): noise and thresholds"),
    ("report", "report", "merge artifacts from several jobs or runners into one summary"),
    ("compare", "compare", "compare two result.json or summary.json files side by side"),
    ("history", "history", "the trend of past runs: digests, size, start-up, findings, verdicts"),
    ("push", "push", "push the image a run tested to a registry, byte for byte (same digest)"),
    ("gpu-probe", "gpu_probe", "probe the host's GPUs and CUDA without Docker (nvidia-smi, torch)"),
    ("action-outputs", "action_outputs", "the GitHub Action's outputs and artifact plan"),
]
#: Commands that work but are not listed in --help: the composite action's own steps.
HIDDEN = frozenset({"action-outputs"})

DESCRIPTION = """\
servelab checks that an AI-serving image is rebuildable (pinned base, same digest on every
rebuild) and cheap to start (no baked weights, non-root, read-only root filesystem, no
downloads at start, a real readiness signal, a CUDA runtime that fits the driver).

Exit codes: 0 ok, 1 findings or a failed gate, 2 bad input or usage,
3 a missing tool, engine or capability; 130 or 143 after Ctrl-C or SIGTERM (once cleaned up).
"""


def _columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` finds it (COLUMNS, then the
    terminal on standard output, else 80), without importing shutil: argparse builds a
    formatter for every ``add_argument`` call and its default asks shutil, which with its
    bz2/lzma imports is about 5 ms of a ``servelab lint`` start."""
    cols = os.environ.get("COLUMNS", "")
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    out = sys.__stdout__
    try:
        return (os.get_terminal_size(out.fileno()).columns or 80) if out is not None else 80
    except (AttributeError, ValueError, OSError):  # closed, detached, not a terminal
        return 80


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's raw-description formatter, with the width from :func:`_columns`."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(int(ExitCode.BAD_INPUT))


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"servelab.commands.{name}")


def _chosen(argv: Sequence[str] | None) -> str | None:
    """The subcommand named on the command line, so only its module needs importing."""
    names = {name for name, _, _ in COMMANDS}
    for arg in argv or ():
        if not arg.startswith("-"):
            return arg if arg in names else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="servelab",
        description=DESCRIPTION,
    )
    parser.add_argument("--version", action="version", version=f"servelab {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0,
        help="log each external command (-v) and debug detail (-vv) to stderr",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    chosen = _chosen(argv)
    for name, modname, help_text in COMMANDS:
        listed: dict[str, Any] = {} if name in HIDDEN else {"help": help_text}
        if chosen is not None and name != chosen:
            sub.add_parser(name, **listed)  # listed, not loaded
            continue
        try:
            mod = _module(modname)
        except ModuleNotFoundError:
            continue
        p = sub.add_parser(
            name,
            **listed,
            description=(mod.__doc__ or help_text).strip(),
        )
        mod.configure(p)
        p.set_defaults(_module=modname)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. A signal that lands after the command's own handling
    (while its error is printed, or its SIGTERM handler restored) still ends in 130 or 143
    with one line, never a traceback."""
    try:
        with redelivered():
            return _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt as e:
        term = isinstance(e, Terminated)
        with contextlib.suppress(Exception):
            print(f"servelab: {'terminated (SIGTERM)' if term else 'interrupted (SIGINT)'}",
                  file=sys.stderr)
        return 143 if term else 130


@contextlib.contextmanager
def redelivered() -> Iterator[None]:
    """Ctrl-C and SIGTERM are never lost. A signal whose handler runs while Python is inside a
    callback it cannot raise from (a weakref callback of the import system, a ``__del__``, a
    garbage-collector callback) has its :class:`KeyboardInterrupt` or :class:`Terminated`
    printed as "Exception ignored" and dropped: the run would go on to its end and exit 0.
    While this block is active such an exception is not printed; the same signal is sent to
    the main thread again 10 ms later, once the callback is over, so the command unwinds,
    cleans up and exits 130 or 143. Other unraisable exceptions go to the previous hook,
    which is put back on exit."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        kind = unraisable.exc_type
        if isinstance(kind, type) and issubclass(kind, KeyboardInterrupt):
            signum = signal.SIGTERM if issubclass(kind, Terminated) else signal.SIGINT
            _send_later(signum)
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _send_later(signum: int, delay_s: float = 0.01) -> None:
    """*signum* to the main thread after *delay_s*, from a helper thread: a real signal, so
    a blocking call in the main thread wakes too."""
    main_ident = threading.main_thread().ident
    if main_ident is None or not hasattr(signal, "pthread_kill"):
        return

    def send() -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pthread_kill(main_ident, signum)

    timer = threading.Timer(delay_s, send)
    timer.daemon = True
    timer.start()


def entry() -> NoReturn:
    """The ``servelab`` program (console script and ``python -m servelab``): :func:`main`,
    then exit with its code. A signal that lands after main has returned, or while Python
    shuts down (when it puts back the default handlers, and a SIGINT would end the process
    as killed by it), is held blocked until the process is gone: the code main chose is the
    exit code, and an interrupt that comes after it is not a traceback. SIGTERM raises
    :class:`Terminated` for the whole of it, not only while a command runs."""
    code: int | None = None
    signal.signal(signal.SIGTERM, _raise_terminated)  # also once main has put its own back
    while True:
        try:
            if code is None:
                code = main()
            if hasattr(signal, "pthread_sigmask"):
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            break
        except KeyboardInterrupt as e:  # between main's return and the mask
            code = 143 if isinstance(e, Terminated) else 130 if code is None else code
    sys.exit(code)


def _main(argv: Sequence[str]) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        from servelab.commands._common import check_outputs

        with contextlib.suppress(Exception):  # forget this line's outputs: nothing runs
            check_outputs()
        return int(e.code) if isinstance(e.code, int) else int(ExitCode.BAD_INPUT)
    if not getattr(args, "_module", None):
        parser.print_help(sys.stderr)
        return int(ExitCode.BAD_INPUT)
    # a lone surrogate (a name that was not UTF-8) that reached a JSON report is written
    # as its escape (``\\udc80``, valid JSON), never an encoding error
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    # applied when a module first logs; progress on stderr unless the command's --quiet
    logs.configure(args.verbose, quiet=bool(getattr(args, "quiet", False)))
    previous = _sigterm_raises()
    try:
        from servelab.commands._common import check_outputs

        check_outputs()  # no output option names an input (noted as the line was parsed)
        code = int(_module(args._module).run(args))
        sys.stdout.flush()  # here, not at exit: a full disk or a closed pipe is said
        return code
    except ServelabError as e:
        from servelab.escape import (
            log_block,  # a message may quote input: no line it starts
            untrusted_block,
        )

        # a tool's output quoted in it (a build log tail, Trivy's stderr) cannot issue a
        # workflow command under GitHub Actions either: it goes inside ::stop-commands::
        print(untrusted_block(log_block(f"servelab {args.command}: {e}"), sys.stderr),
              file=sys.stderr)
        return int(e.exit_code)
    except KeyboardInterrupt as e:
        return _interrupted(args.command, e)
    except Exception as e:  # a bug: say so plainly, traceback only on request
        signalled = _interrupt_under(e)
        if signalled is not None:  # a signal met while Python wrapped it (class creation)
            return _interrupted(args.command, signalled)
        stream = _stream_fault(e)
        if stream is not None:  # standard output full, closed or failing: exit 2 or 3
            print(f"servelab {args.command}: {stream}", file=sys.stderr)
            return int(stream.exit_code)
        if os.environ.get("SERVELAB_DEBUG"):
            raise
        disk = _disk_fault(e)
        if disk is not None:  # a full or read-only disk met outside the writer: exit 3
            print(f"servelab {args.command}: {disk}", file=sys.stderr)
            return int(disk.exit_code)
        print(
            f"servelab {args.command}: internal error: {type(e).__name__}: {e}\n"
            "  this is a bug in servelab; rerun with SERVELAB_DEBUG=1 for the traceback "
            "and report it",
            file=sys.stderr,
        )
        return int(ExitCode.MISSING_TOOL)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupted(command: str, e: KeyboardInterrupt) -> int:
    """Say the command was stopped by a signal; 128 + its number."""
    term = isinstance(e, Terminated)
    print(f"servelab {command}: {'terminated (SIGTERM)' if term else 'interrupted (SIGINT)'}",
          file=sys.stderr)
    return 143 if term else 130


def _interrupt_under(e: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM an error was raised from, if any. Python wraps an exception
    raised while it creates a class (``__set_name__``: a dataclass defined as a module is
    first imported) in a RuntimeError, so a SIGTERM that lands then reaches the command as
    that error, its cause the :class:`Terminated`."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen and len(seen) < 32:
        if isinstance(cur, KeyboardInterrupt):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def _stream_fault(e: BaseException) -> ServelabError | None:
    """A write to standard output that failed (no file name: the stream, not a path): the
    disk full or failing under it (``> /dev/full``: exit 3), or its reader gone (EPIPE:
    exit 2). What is still buffered is dropped, so Python's exit does not fail again."""
    import errno

    from servelab import textio

    if not isinstance(e, OSError) or e.filename is not None:
        return None
    if e.errno == errno.EPIPE:
        err: ServelabError = textio.write_error(e, "<stdout>", "the standard output")
        err.hint = "the pipe's reader exited before servelab finished writing: read all of it"
    elif textio.is_disk_fault(e):
        err = textio.write_error(e, "<stdout>", "the standard output")
    else:
        return None
    textio.drop_stdout()
    return err


def _disk_fault(e: BaseException) -> ServelabError | None:
    """ENOSPC, EDQUOT, EROFS or EIO on a named path as the writer reports it (exit 3)."""
    from servelab import textio

    if isinstance(e, OSError) and e.filename is not None and textio.is_disk_fault(e):
        return textio.write_error(e, str(e.filename), "there")
    return None


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def _sigterm_raises() -> Any:
    """While a command runs, SIGTERM raises Terminated in the main thread (as Ctrl-C raises
    KeyboardInterrupt), so every command unwinds, cleans up and exits 143. Returns the handler
    to restore (None off the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_terminated)
