"""BuildKit's progress, read while a build runs: the live steps, build.log and the error tail.

API::

    reader = Reader(mode, progress)          # mode: "rawjson" or "plain" (--progress=MODE)
    proc.run(argv, on_stderr=reader.feed)    # each stderr line as it comes
    reader.close()
    reader.log_text()                        # build.log: as --progress=plain writes it
    reader.error_tail()                      # the failed steps' last log lines + buildx's end

``--progress=rawjson`` is not in the ``--help`` of every buildx that has it (Debian's 0.13.1
lists auto/plain/tty), so servelab tries it and falls back to ``plain`` when buildx answers
"invalid progress mode" (:meth:`Reader.refused`; :data:`MODES` remembers it for the process).

rawjson writes BuildKit's ``SolveStatus`` messages as indented JSON objects, one after another
(``vertexes``, ``statuses``, ``logs`` with base64 ``data``, ``warnings``), and buildx's own
closing words (the Dockerfile excerpt, ``ERROR: failed to solve: ...``) as plain text. The
objects are decoded as they complete with :meth:`json.JSONDecoder.raw_decode` over a buffer
(an object ends at a ``}`` in the first column: names and logs are JSON strings, which hold no
raw newline). In that mode buildx leaves out the block that plain output ends a failure with
(``------`` / `` > [4/4] RUN false:`` / the step's last log lines / ``------``):
:meth:`Reader.error_tail` rebuilds it from the vertices that carry an ``error``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from servelab import logs

RAWJSON, PLAIN = "rawjson", "plain"
#: the progress modes still worth trying, best first (rawjson drops out when refused)
MODES = [RAWJSON, PLAIN]
#: log lines of a failed step that the error tail shows (as buildx's plain output does)
TAIL_LINES = 10
#: the most log lines kept per step for the tail (the whole log goes to build.log)
KEPT_LINES = 200
#: an unfinished JSON object longer than this is given up as text
MAX_PENDING = 16 << 20

_PLAIN_STEP = re.compile(r"#(\d+) (\[.*|\S.*)$")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$")


def modes() -> list[str]:
    """The progress modes to try for the next build, best first."""
    return list(MODES)


def refuse(mode: str) -> None:
    """buildx said *mode* is not a progress mode: do not try it again in this process."""
    if mode in MODES and len(MODES) > 1:
        MODES.remove(mode)


def _time(text: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time with nanoseconds, as BuildKit writes."""
    m = _STAMP.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    frac = (m.group(2) or ".0")[:7]
    zone = m.group(3) or "Z"
    try:
        return datetime.fromisoformat(
            m.group(1) + frac + ("+00:00" if zone == "Z" else zone)).timestamp()
    except ValueError:
        return None


@dataclass
class Vertex:
    """One step of the build as BuildKit reports it."""

    number: int
    name: str
    started: float | None = None
    completed: float | None = None
    cached: bool = False
    error: str = ""
    lines: list[str] = field(default_factory=list)
    partial: str = ""


class Reader:
    """Reads one build's stderr in *mode*, showing its steps on *progress*."""

    def __init__(self, mode: str, progress: logs.Progress | None = None) -> None:
        self.mode = mode
        self.progress = progress
        self.vertices: dict[str, Vertex] = {}
        self.objects = 0
        #: buildx's own words (not JSON): its error excerpt and closing line
        self.text: list[str] = []
        self._log: list[str] = []
        self._pending = ""
        self._decoder = json.JSONDecoder()

    # -- input
    def feed(self, line: str) -> None:
        """One line of the build's stderr (or any piece of it)."""
        if self.mode != RAWJSON:
            self._plain(line)
            return
        self._pending += line
        if "}" in line or not self._pending.lstrip("\r\n").startswith("{"):
            self._drain(final=False)

    def close(self) -> None:
        """The build ended: what is left is text."""
        if self.mode == RAWJSON:
            self._drain(final=True)
        for v in self.vertices.values():
            if v.partial:
                self._vertex_line(v, v.partial)
                v.partial = ""

    def refused(self) -> bool:
        """buildx did not know the progress mode (nothing was built)."""
        return self.objects == 0 and any("invalid progress mode" in x for x in self.text)

    def _drain(self, *, final: bool) -> None:
        while True:
            buf = self._pending.lstrip("\r\n")  # a text line keeps its indentation
            if not buf.strip():  # a blank line goes; spaces may start a text line
                self._pending = "" if final or "\n" in buf else buf
                return
            if buf.startswith("{"):
                if not final and "\n}" not in buf and len(buf) <= MAX_PENDING:
                    self._pending = buf  # the object is not complete yet
                    return
                try:
                    obj, end = self._decoder.raw_decode(buf)
                except ValueError:
                    line, _, rest = buf.partition("\n")  # not JSON after all: text
                    self._text(line)
                    self._pending = rest
                    continue
                self._pending = buf[end:]
                if isinstance(obj, dict):
                    self.objects += 1
                    self._status(obj)
                continue
            line, nl, rest = buf.partition("\n")
            if not nl and not final:
                self._pending = buf
                return
            self._text(line)
            self._pending = rest

    def _text(self, line: str) -> None:
        line = line.rstrip("\r\n")
        self.text.append(line)
        self._log.append(line)

    # -- rawjson messages
    def _status(self, doc: dict[str, object]) -> None:
        for v in _dicts(doc.get("vertexes")):
            self._vertex(v)
        for s in _dicts(doc.get("statuses")):
            self._progress_status(s)
        for entry in _dicts(doc.get("logs")):
            self._logs(entry)
        for w in _dicts(doc.get("warnings")):
            short = _b64(w.get("short"))
            if short:
                self._log.append(f"WARNING: {short.strip()}")

    def _vertex(self, doc: dict[str, object]) -> None:
        digest = str(doc.get("digest") or "")
        if not digest:
            return
        v = self.vertices.get(digest)
        if v is None:
            v = Vertex(len(self.vertices) + 1, str(doc.get("name") or digest[:19]))
            self.vertices[digest] = v
        started = _time(doc.get("started"))
        if started is not None and v.started is None:
            v.started = started
            self._log.append(f"\n#{v.number} {v.name}")
            if self.progress is not None:
                self.progress.step(v.name)
        if doc.get("cached") and not v.cached:
            v.cached = True
            self._log.append(f"#{v.number} CACHED")
        completed = _time(doc.get("completed"))
        if completed is not None and v.completed is None:
            v.completed = completed
            error = str(doc.get("error") or "")
            if error:
                v.error = error
                self._log.append(f"#{v.number} ERROR: {error}")
            elif not v.cached:
                took = completed - (v.started or completed)
                self._log.append(f"#{v.number} DONE {took:.1f}s")

    def _progress_status(self, doc: dict[str, object]) -> None:
        v = self.vertices.get(str(doc.get("vertex") or ""))
        name = str(doc.get("id") or doc.get("name") or "")
        current, total = doc.get("current"), doc.get("total")
        amount = ""
        if isinstance(current, int) and current:
            amount = logs.size(current) + (f" / {logs.size(total)}"
                                           if isinstance(total, int) and total else "")
        if doc.get("completed") and v is not None:
            self._log.append(f"#{v.number} {name} {amount} done".replace("  ", " "))
        if self.progress is not None and name:
            self.progress.note(f"{name} {amount}".strip())

    def _logs(self, doc: dict[str, object]) -> None:
        v = self.vertices.get(str(doc.get("vertex") or ""))
        data = _b64(doc.get("data"))
        if v is None or not data:
            return
        stamp = _time(doc.get("timestamp"))
        offset = f"{stamp - v.started:.3f} " if stamp is not None and v.started else ""
        pieces = data.split("\n")
        last = pieces.pop()
        for piece in pieces:  # as plain output: seconds since the step started, the line
            line = v.partial + piece if v.partial else offset + piece
            v.partial = ""
            self._vertex_line(v, line)
        if last:
            v.partial = (v.partial or offset) + last

    def _vertex_line(self, v: Vertex, line: str) -> None:
        line = line.rstrip("\r")
        v.lines.append(line)
        if len(v.lines) > KEPT_LINES:
            del v.lines[:len(v.lines) - KEPT_LINES]
        self._log.append(f"#{v.number} {line}")
        if self.progress is not None and line.strip():
            self.progress.note(line)

    # -- plain (the fallback)
    def _plain(self, line: str) -> None:
        line = line.rstrip("\r\n")
        self._log.append(line)
        self.text.append(line)
        if len(self.text) > KEPT_LINES:
            del self.text[:len(self.text) - KEPT_LINES]
        m = _PLAIN_STEP.match(line)
        if m is None or self.progress is None:
            return
        key = "#" + m.group(1)
        if key not in self.vertices and not m.group(2).startswith(("DONE", "CACHED")):
            self.vertices[key] = Vertex(len(self.vertices) + 1, m.group(2))
            self.progress.step(m.group(2))
        else:
            self.progress.note(m.group(2))

    # -- output
    def seconds_of(self, prefix: str) -> float | None:
        """Seconds BuildKit spent in its steps named *prefix*... (``exporting``: writing the
        image's layers and archive), from their started and completed times; None when no
        such step completed (plain progress has no times)."""
        took = [v.completed - v.started for v in self.vertices.values()
                if v.name.startswith(prefix) and v.started is not None
                and v.completed is not None]
        return round(sum(took), 3) if took else None

    def log_text(self) -> str:
        """The build's whole log as buildx's plain output reads (build.log)."""
        return "\n".join(self._log).lstrip("\n") + "\n"

    def error_tail(self) -> str:
        """What plain output ends a failed build with: each failed step's last log lines
        between ``------`` rules, then buildx's closing text (Dockerfile excerpt, ERROR)."""
        if self.mode != RAWJSON:
            return "\n".join(self.text)
        out: list[str] = []
        for v in self.vertices.values():
            if not v.error or (v.name.startswith("[internal]") and not v.lines):
                continue
            out += ["------", f" > {v.name}:", *v.lines[-TAIL_LINES:], "------"]
        return "\n".join(out + [x for x in self.text if x.strip()])


def _dicts(value: object) -> list[dict[str, object]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _b64(value: object) -> str:
    if not isinstance(value, str):
        return ""
    try:
        return base64.b64decode(value, validate=False).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""
