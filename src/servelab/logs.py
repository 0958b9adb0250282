"""Logging, configured on first use.

The CLI says how verbose to be (:func:`configure`); modules that log take their logger from
:func:`get`. Whichever comes second applies the configuration, so a command that never logs
(``servelab lint``) never imports :mod:`logging` (about 10 ms of a 200 ms start), and a
library user who calls servelab from Python keeps their own logging set-up untouched.

Progress of long steps (a build, a load, a push, a scan) goes through :func:`progress`, on
stderr, as the CLI set it (:func:`configure`): a live line redrawn in place on a terminal; in a
log (not a terminal, or ``GITHUB_ACTIONS=true``) a line for a sub-step only once it has run
:data:`QUIET_S` (never one a layer), a heartbeat at most every :data:`HEARTBEAT_S` seconds and
the end line, each at most :data:`LINE_MAX` characters
with digests cut to 12 hex (:func:`log_line`); nothing with ``--quiet`` or for a library user. Its
imports (threading) wait until a step starts, so ``servelab lint`` pays nothing for it.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import logging
    import threading

FORMAT = "servelab: %(message)s"

#: the CLI's -v count, None until :func:`configure` is called (library use)
_verbosity: list[int | None] = [None]
_applied: list[bool] = [False]


def configure(verbosity: int, *, quiet: bool = False) -> None:
    """Record the CLI's verbosity (0 warnings, 1 commands run, 2+ debug); applied at once if
    :mod:`logging` is already loaded, else when the first logger is asked for. Progress is
    shown (:func:`progress_mode`) unless *quiet*."""
    _verbosity[0] = verbosity
    _mode[0] = OFF if quiet else progress_mode()
    _applied[0] = False
    if "logging" in sys.modules:
        _apply()


def get(name: str) -> logging.Logger:
    """The logger *name*, with the CLI's configuration applied if it has been given."""
    import logging

    _apply()
    return logging.getLogger(name)


def _apply() -> None:
    verbosity = _verbosity[0]
    if verbosity is None or _applied[0]:
        return
    import logging

    _applied[0] = True
    level = logging.WARNING
    if verbosity == 1:
        level = logging.INFO
    elif verbosity >= 2:
        level = logging.DEBUG
    logging.basicConfig(level=level, format=FORMAT, stream=sys.stderr)
    if verbosity >= 1:
        logging.getLogger("servelab.proc").setLevel(logging.DEBUG)


# ---------------------------------------------------------------------------- progress

OFF, LIVE, LINES = "off", "live", "lines"
#: in a log, the longest silence of a running step before a heartbeat line
HEARTBEAT_S = 10.0
#: on a terminal, the fewest seconds between two redraws of the live line
REDRAW_S = 0.2
#: the most characters of build text (a step's name, a log line) a progress line shows
FIELD_MAX = 160
#: how progress is shown; off until the CLI configures it
_mode: list[str] = [OFF]


def progress_mode(stream: TextIO | None = None) -> str:
    """:data:`LINES` under GitHub Actions or when *stream* (stderr) is not a terminal, else
    :data:`LIVE`."""
    import os

    out = stream if stream is not None else sys.stderr
    if os.environ.get("GITHUB_ACTIONS") == "true":
        return LINES
    try:
        return LIVE if out.isatty() else LINES
    except (AttributeError, ValueError, OSError):
        return LINES


def neutral(text: str, limit: int = FIELD_MAX) -> str:
    """*text* made safe for one progress line: :func:`servelab.escape.progress_text`."""
    from servelab.escape import progress_text

    return progress_text(text, limit)


#: the widest line of a log (CI): longer ones end in "…"
LINE_MAX = 120
#: a sub-step gets a line of its own in a log once it has run this many seconds
QUIET_S = 3.0
_DIGEST = None


def log_line(text: str) -> str:
    """A line of a log as a person reads it: digests cut to 12 hex (``sha256:0123456789ab``;
    in full in the run's files) and at most :data:`LINE_MAX` characters (a longer line loses
    its middle: its end says how the step went)."""
    import re

    global _DIGEST  # noqa: PLW0603 - compiled on first use: servelab lint never needs it
    if _DIGEST is None:
        _DIGEST = re.compile(r"\b(sha256:)?([0-9a-f]{12})[0-9a-f]{52}\b")
    text = _DIGEST.sub(lambda m: f"{m.group(1) or ''}{m.group(2)}", text)
    if len(text) <= LINE_MAX:
        return text
    keep = LINE_MAX // 3  # the end says how it went ("done in 1.2s, 66.6 MB"): kept
    return text[:LINE_MAX - keep - 1] + "\u2026" + text[-keep:]


def size(n: float) -> str:
    """Bytes as a person reads them: 512 B, 3.4 MB, 1.02 GB (powers of 1000)."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.{2 if n < 10 else 1}f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


class Progress:
    """One long step's progress (see :func:`progress`): ``with`` it, then tell it the
    sub-steps (:meth:`step`), the bytes or items done (:meth:`advance`, :meth:`done_to`)
    and the latest detail (:meth:`note`); it says how long the step took when the block ends.
    In a log that is one line per sub-step, a heartbeat after :data:`HEARTBEAT_S` without a
    line, and the end line: a step with no sub-steps that ends within 10 s is one line.
    Thread-safe: a reader thread may feed it while a ticker thread redraws or beats."""

    def __init__(self, what: str, *, total: float | None = None, unit: str = "B",
                 mode: str | None = None, stream: TextIO | None = None,
                 quiet: bool = False) -> None:
        self.what = neutral(what)
        #: a log shows its end only when it failed or took QUIET_S or more (a routine step)
        self.quiet = quiet
        self.total = total
        self.unit = unit
        self.mode = _mode[0] if mode is None else mode
        self.stream = stream
        self.done = 0.0
        self.steps = 0
        self._step = ""
        self._step_t0 = 0.0
        self._step_shown = False
        self._note = ""
        self._t0 = time.monotonic()
        self._last_line = self._t0
        self._drawn = 0.0
        self._lock: threading.Lock | None = None
        self._stop: threading.Event | None = None
        self._ticker: threading.Thread | None = None

    # -- feeding it
    def step(self, name: str) -> None:
        """A new sub-step (a build instruction, a layer): a line of its own in a log."""
        if self.mode == OFF:
            return
        with self._locked():
            self.steps += 1
            self._step, self._note = neutral(name), ""
            self._step_t0, self._step_shown = time.monotonic(), False
            if self.mode == LIVE:
                self._draw(force=True)
            elif QUIET_S <= 0:
                self._show_step()

    def _show_step(self) -> None:
        """A log's line for the running sub-step: only once it has run :data:`QUIET_S` (quick
        sub-steps, a layer or a build instruction, make no line; the end line names the one
        that failed)."""
        if self._step and not self._step_shown:
            self._step_shown = True
            self._line(f"{self.what}: {self._step}")

    def advance(self, n: float) -> None:
        """*n* more bytes (or items) done."""
        self.done_to(self.done + n)

    def done_to(self, done: float, total: float | None = None) -> None:
        """*done* bytes (or items) of *total* (or of the total given before) done."""
        if self.mode == OFF:
            return
        with self._locked():
            self.done = done
            if total is not None:
                self.total = total
            if self.mode == LIVE:
                self._draw()

    def note(self, text: str) -> None:
        """The latest detail (a log line of the running step): shown, never a line alone."""
        if self.mode == OFF:
            return
        with self._locked():
            self._note = neutral(text)
            if self.mode == LIVE:
                self._draw()

    # -- the block
    def __enter__(self) -> Progress:
        if self.mode == OFF:
            return self
        import threading

        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._t0 = self._last_line = time.monotonic()
        if self.mode == LIVE:  # a log gets its first line from a sub-step, a beat or the end
            self._draw(force=True)
        self._ticker = threading.Thread(target=self._tick, name="servelab-progress",
                                        daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, t: object, e: BaseException | None, tb: object) -> None:
        if self.mode == OFF or self._stop is None:
            return
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        took = time.monotonic() - self._t0
        end = "done" if e is None else (
            "interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        if (self.quiet and self.mode == LINES and e is None and took < QUIET_S
                and self._last_line == self._t0):
            return  # a routine step that went well and quickly: its figures are in the files
        at = f" at {self._step}" if e is not None and self._step else ""
        with self._locked():
            self._line(f"{self.what}: {end} in {took:.1f}s{self._amount(final=True)}{at}")

    def _tick(self) -> None:
        stop = self._stop
        while stop is not None and not stop.wait(REDRAW_S if self.mode == LIVE else 1.0):
            with self._locked():
                if self.mode == LIVE:
                    self._draw(force=True)
                elif not self._step_shown and time.monotonic() - self._step_t0 >= QUIET_S:
                    self._show_step()
                elif time.monotonic() - self._last_line >= HEARTBEAT_S:
                    self._line(self._status())

    # -- writing
    def _locked(self) -> threading.Lock | _NoLock:
        return self._lock if self._lock is not None else _NoLock()

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def _amount(self, *, final: bool = False) -> str:
        if not self.done and not self.total:
            return ""
        if self.unit != "B":
            return f", {self.done:.0f}/{self.total:.0f} {self.unit}" if self.total else \
                f", {self.done:.0f} {self.unit}"
        if self.total and not final:
            pct = min(100.0, 100.0 * self.done / self.total)
            return f", {pct:.0f}% of {size(self.total)}"
        return f", {size(self.done)}"

    def _status(self) -> str:
        took = time.monotonic() - self._t0
        parts = [f"{self.what}: {took:.0f}s{self._amount()}"]
        if self._step:
            parts.append(self._step)
        if self._note:
            parts.append(self._note)
        return ", ".join(parts[:1]) + "".join(f" | {p}" for p in parts[1:])

    def _line(self, text: str) -> None:
        """One whole line (in LIVE mode it replaces the live line)."""
        out = self._out()
        lead = "\r\x1b[K" if self.mode == LIVE else ""
        try:
            out.write(f"{lead}{log_line(f'servelab: {text}')}\n")
            out.flush()
        except (OSError, ValueError):  # stderr gone: progress is never worth failing for
            self.mode = OFF
        self._last_line = time.monotonic()

    def _draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        text = f"servelab: {self._bar()}{self._status()}"
        width = _width(self._out())
        if len(text) >= width:
            text = text[:max(10, width - 2)] + "\u2026"
        try:
            self._out().write(f"\r\x1b[K{text}")
            self._out().flush()
        except (OSError, ValueError):
            self.mode = OFF

    def _bar(self, cells: int = 20) -> str:
        if not self.total:
            return ""
        full = int(cells * min(1.0, self.done / self.total))
        return "[" + "#" * full + "." * (cells - full) + "] "


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> None:
        return None


def _width(out: TextIO) -> int:
    import os

    try:
        return os.get_terminal_size(out.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def progress(what: str, *, total: float | None = None, unit: str = "B",
             quiet: bool = False) -> Progress:
    """A :class:`Progress` for the long step *what*, shown as the CLI configured (nothing for
    a library user or with ``--quiet``)::

        with logs.progress("docker load", total=archive_size) as p:
            ...; p.advance(n)
    """
    return Progress(what, total=total, unit=unit, quiet=quiet)
