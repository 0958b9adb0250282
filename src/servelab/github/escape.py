"""Text from inputs made safe for the runner's log, where a line that starts with ``::`` is a
workflow command (``::error::``, ``::add-mask::``, ``::stop-commands::``).

* :func:`command_data` and :func:`command_property`: the escaping GitHub's own toolkit uses
  for the message (``%``, CR, LF) and for property values (also ``:`` and ``,``).
* :func:`log_text`: a plain log line cannot be escaped, so text from inputs never starts a
  line: CR, LF and the other line breaks become visible ``\\r``/``\\n``.
* :func:`untrusted_block`: whole untrusted blocks (a program's log) go inside
  ``::stop-commands::`` under GitHub Actions; the CLI's error printer and the text emitter
  (``commands._common.emit``) pass every block through it.

This module imports nothing: ``servelab lint`` (its ``--format github``) uses it too.
"""

from __future__ import annotations

#: what ends a line for the runner, or for a viewer of its log (Python's str.splitlines)
_BREAKS = {0x0A: "\\n", 0x0D: "\\r", 0x0B: "\\v", 0x0C: "\\f", 0x1C: "\\x1c", 0x1D: "\\x1d",
           0x1E: "\\x1e", 0x85: "\\x85", 0x2028: "\\u2028", 0x2029: "\\u2029"}
_DATA = {ord("%"): "%25", 0x0D: "%0D", 0x0A: "%0A"}
_PROPERTY = {**_DATA, ord(":"): "%3A", ord(","): "%2C"}


def command_data(text: str) -> str:
    """*text* as the message of a workflow command (after the second ``::``)."""
    return text.translate(_DATA)


def command_property(text: str) -> str:
    """*text* as a property value of a workflow command (``title=``, ``file=``)."""
    return text.translate(_PROPERTY)


def log_text(text: str) -> str:
    """*text* on one line: no line break of it can start a new (command) line in a log."""
    return text.translate(_BREAKS)


def untrusted_block(text: str, stream: object = None) -> str:
    """*text*, several lines that came from an input or a tool (a build log tail, a container
    log, Trivy's stderr, a text report quoting input), as printed to the job log: under GitHub
    Actions (``GITHUB_ACTIONS=true``) between ``::stop-commands::TOKEN`` and ``::TOKEN::``,
    with a fresh random token it cannot know, so that no workflow command inside takes effect.
    Unchanged elsewhere, for one line (:func:`log_text` keeps those), and when *stream* (what
    it is printed to) is a regular file rather than the log."""
    import os

    if (os.environ.get("GITHUB_ACTIONS") != "true" or "\n" not in text.rstrip("\n")
            or _regular_file(stream)):
        return text
    token = os.urandom(16).hex()
    body = text if text.endswith("\n") else text + "\n"
    return f"::stop-commands::{token}\n{body}::{token}::" + ("\n" if text.endswith("\n") else "")


def _regular_file(stream: object) -> bool:
    import os
    import stat

    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except (AttributeError, OSError, ValueError):
        return False
