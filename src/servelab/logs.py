"""Logging, configured on first use.

The CLI says how verbose to be (:func:`configure`); modules that log take their logger from
:func:`get`. Whichever comes second applies the configuration, so a command that never logs
(``servelab lint``) never imports :mod:`logging` (about 10 ms of a 200 ms start), and a
library user who calls servelab from Python keeps their own logging set-up untouched.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

FORMAT = "servelab: %(message)s"

#: the CLI's -v count, None until :func:`configure` is called (library use)
_verbosity: list[int | None] = [None]
_applied: list[bool] = [False]


def configure(verbosity: int) -> None:
    """Record the CLI's verbosity (0 warnings, 1 commands run, 2+ debug); applied at once if
    :mod:`logging` is already loaded, else when the first logger is asked for."""
    _verbosity[0] = verbosity
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
