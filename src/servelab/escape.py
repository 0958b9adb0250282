"""Text from inputs made safe for every place servelab shows it: one function per output
format, all here, so that a reader finds every format's rule in one place
(docs/limits.md#text-from-inputs). Text from an input (a name, a message, a path, a log line,
the experiment's ``spec.change``) goes through the function of the format it is written in,
and through nothing else.

=======================  =========================================================
format                   function
=======================  =========================================================
workflow command         :func:`command_data`, :func:`command_property`
                         (:func:`command_visible` before the toolkit's ``Command``)
job log line / block     :func:`log_text`, :func:`untrusted_block`, :func:`log_block`
terminal                 :func:`terminal_text`
progress line            :func:`progress_text`
Markdown inline          :func:`md_text`, :func:`md_prose` (servelab's sentences with code)
Markdown table cell      :func:`md_cell`, :func:`md_code` (inline code)
Markdown quoted log      :func:`md_fence` (a fence the quoted text cannot close)
PR comment               :func:`no_mentions` (the whole comment, a second line of defence)
HTML inside <details>    :func:`html_text`
SVG/XML text, attribute  :func:`xml_text`
Mermaid label            :func:`mermaid_text`
JSON lines               :func:`json_line`
=======================  =========================================================

Common rule: C0 and C1 controls, DEL, line and paragraph separators, bidi controls and lone
surrogates are never passed on: shown as visible escapes (``\\r``, ``\\u202e``, ``\\xff``) or
removed (terminal escape sequences). Mentions (``@name``, ``@org/team``) and references
(``#12``, ``org/repo#12``, ``GH-12``) in Markdown and HTML get a zero-width space, so they
notify nobody and link nothing.

This module imports nothing of servelab: every stage (``run/``, ``github/``, ``lint``'s
``--format github``) may use it.
"""

from __future__ import annotations

import re
from typing import Any

# ------------------------------------------------------------------ workflow commands

#: what ends a line for the runner, or for a viewer of its log (Python's str.splitlines)
_BREAKS = {0x0A: "\\n", 0x0D: "\\r", 0x0B: "\\v", 0x0C: "\\f", 0x1C: "\\x1c", 0x1D: "\\x1d",
           0x1E: "\\x1e", 0x85: "\\x85", 0x2028: "\\u2028", 0x2029: "\\u2029"}
_DATA = {ord("%"): "%25", 0x0D: "%0D", 0x0A: "%0A"}
_PROPERTY = {**_DATA, ord(":"): "%3A", ord(","): "%2C"}


def command_visible(text: str) -> str:
    """*text* for a workflow command before GitHub's escaping (:func:`command_data`,
    :func:`command_property`, or the toolkit's ``Command``): every control but CR and LF
    (ESC, BEL, tab, the other line breaks), bidi marks, overrides and isolates (U+202A-202E,
    U+2066-2069, U+200E/F, U+061C) and lone surrogates shown as visible escapes (``\\x1b``,
    ``\\u202e``), so an annotation's file, title or message cannot reorder or hide what
    GitHub shows. CR and LF are left to GitHub's ``%0D``/``%0A``."""
    return text if text.isprintable() else text.translate(_COMMAND_VISIBLE)


def command_data(text: str) -> str:
    """*text* as the message of a workflow command (after the second ``::``):
    :func:`command_visible`, then the escaping GitHub's own toolkit uses (``%``, CR, LF)."""
    return command_visible(text).translate(_DATA)


def command_property(text: str) -> str:
    """*text* as a property value of a workflow command (``title=``, ``file=``):
    :func:`command_visible`, then ``%``, CR, LF, ``:`` and ``,`` as GitHub escapes them."""
    return command_visible(text).translate(_PROPERTY)


def log_text(text: str) -> str:
    """*text* on one line of a job log: no line break of it can start a new (command) line;
    CR, LF and the other line breaks become visible ``\\r``/``\\n``."""
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


# ------------------------------------------------------------------------- terminal

#: ESC sequences: CSI (colours, cursor moves), OSC (titles, hyperlinks) up to BEL or ST, and
#: the two-character ones; the 8-bit CSI (U+009B) too
_ESCAPES = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
                      r"|\x1b[ -~]?")
#: C0 and C1 controls, DEL, bidi marks, overrides and isolates, line and paragraph separators,
#: the two noncharacters XML refuses: shown as visible escapes
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_CONTROLS.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A),
                                              0x200E, 0x200F, 0x061C, 0x2028, 0x2029,
                                              0xFEFF, 0xFFFE, 0xFFFF)})
_CONTROLS.update({0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"})
#: lone surrogates: the bytes of a name that was not UTF-8 (a tar member read with
#: surrogateescape, U+DC80..U+DCFF) as ``\\xNN``, any other as ``\\uXXXX``
_CONTROLS.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})
_CONTROLS.update({c: f"\\x{c - 0xDC00:02x}" for c in range(0xDC80, 0xDD00)})
_KEEP_LINES = {c: v for c, v in _CONTROLS.items() if c not in (0x09, 0x0A)}
_COMMAND_VISIBLE = {c: v for c, v in _CONTROLS.items() if c not in (0x0A, 0x0D)}


def terminal_text(text: object, *, one_line: bool = True, show_escapes: bool = False) -> str:
    """*text* safe for a terminal or a log: escape sequences removed, other C0/C1 controls,
    bidi controls and lone surrogates shown escaped (``\\x07``, ``\\u202e``; bytes that were
    not UTF-8 as ``\\xff``); with *one_line* (the default) line breaks and tabs too, so text
    from an input never starts a line of its own (a ``::error::`` workflow command).
    *show_escapes* shows an escape sequence's ESC as ``\\x1b`` instead of removing the
    sequence: for names that must stay told apart (``servelab diff``'s file names)."""
    s = str(text)
    if s.isprintable():
        return s
    if not show_escapes:
        s = _ESCAPES.sub("", s)
    return s.translate(_CONTROLS if one_line else _KEEP_LINES)


def log_block(text: object) -> str:
    """*text* of several lines for a log (an error message with a program's output): each line
    as :func:`terminal_text` keeps it, and a line that would begin with ``::`` (a workflow
    command; the runner ignores leading blanks) is shown behind ``| ``."""
    lines = terminal_text(text, one_line=False).split("\n")
    return "\n".join(f"| {ln}" if ln.lstrip().startswith("::") else ln for ln in lines)


#: the longest field of a progress line
PROGRESS_FIELD_MAX = 160


def progress_text(text: str, limit: int = PROGRESS_FIELD_MAX) -> str:
    """*text* made safe for one progress line: terminal escape sequences dropped, every other
    control character (CR, LF, ESC, ...), line separator and bidi control a space, runs of
    spaces one, at most *limit* characters. A progress line starts with ``servelab: ``, so
    build text never starts a workflow command (``::``)."""
    text = text[:limit * 4]  # a megabyte-long log line costs no more than a short one
    text = _ESCAPES.sub("", text)
    out = "".join(" " if ord(c) in _CONTROLS else c for c in text)
    joined = " ".join(out.split())
    return joined if len(joined) <= limit else joined[:limit - 1] + "\u2026"


# ------------------------------------------------------------------------- Markdown

_MD = {ord("\\"): "\\\\", ord("`"): "\\`", ord("|"): "\\|", ord("["): "\\[",
       ord("]"): "\\]", ord("<"): "&lt;", ord(">"): "&gt;", ord("&"): "&amp;",
       ord("*"): "\\*", ord("_"): "\\_", ord("~"): "\\~", ord("#"): "\\#", ord("!"): "\\!"}
#: @mentions and references GitHub would notify or cross-link (``#12``, ``org/r#12``,
#: ``GH-12``): a zero-width space after the ``@``, ``#`` or ``GH-``
_MENTION = re.compile(r"((?<![\w`])@(?=[A-Za-z0-9])|#(?=[0-9])|\bGH-(?=[0-9]))", re.IGNORECASE)
#: the same in Markdown, where ``&#124;`` is an entity, not a reference
_MENTION_MD = re.compile(r"((?<![\w`])@(?=[A-Za-z0-9])|(?<!&)#(?=[0-9])|\bGH-(?=[0-9]))",
                         re.IGNORECASE)
_ZWSP = "\u200b"


def _unmention(text: str, pattern: re.Pattern[str] = _MENTION) -> str:
    return pattern.sub(lambda m: m.group(1) + _ZWSP, text)


def md_text(text: object) -> str:
    """*text* as literal Markdown on one line (a paragraph, a heading, a list item, a table
    cell): ``|``, backticks, brackets, emphasis, ``#`` and HTML escaped, mentions and
    references neutralised, controls and line breaks shown as for the terminal."""
    return _unmention(terminal_text(text)).translate(_MD)


def md_cell(text: object) -> str:
    """*text* in a Markdown table cell: :func:`md_text` (which escapes ``|``, the cell
    separator GitHub splits on even inside code)."""
    return md_text(text)


def md_code(text: object, *, table: bool = True) -> str:
    """*text* as inline code: a fence longer than any run of backticks in it, controls and
    line breaks shown; in a table cell (*table*) ``|`` escaped (GitHub splits cells on it
    even in code). Mentions in code notify nobody."""
    s = terminal_text(text)
    if table:
        s = s.replace("|", "\\|")
    runs = re.findall(r"`+", s)
    fence = "`" * (max((len(r) for r in runs), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"


_SPAN = re.compile(r"`([^`]*)`")


def md_prose(text: object) -> str:
    """servelab's own sentence that quotes inputs (a reason, a piece of evidence, a note)
    as Markdown on one line: each ```code``` span it holds stays a code span (rebuilt by
    :func:`md_code`, so its content cannot close it), everything else as :func:`md_text`.
    Whatever backticks an input brought, every backtick of the result belongs to a code
    span made here or is escaped."""
    s = str(text)
    out: list[str] = []
    pos = 0
    for m in _SPAN.finditer(s):
        out += [md_text(s[pos:m.start()]), md_code(m.group(1), table=False)]
        pos = m.end()
    out.append(md_text(s[pos:]))
    return "".join(out)


def md_fence(text: object, *, indent: int = 0, info: str = "text") -> list[str]:
    """*text* (a build or server log) as the lines of a fenced code block that it cannot
    close: the fence is backticks, longer than any run of backticks in it (and at least 3);
    each line indented by *indent* spaces (inside a list item), controls shown as for the
    terminal, ESC sequences removed. Nothing inside is Markdown or HTML, no mention notifies."""
    body = terminal_text(text, one_line=False).split("\n")
    runs = [len(r) for line in body for r in re.findall(r"`+", line)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    pad = " " * indent
    return [f"{pad}{fence}{info}", *(pad + line for line in body), f"{pad}{fence}"]


_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: a code span: a backtick run, then the same run again, within one paragraph
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(?:(?!\n[ \t]*\n)[\s\S])*?(?<!`)\1(?!`)")


def _unmention_prose(text: str) -> str:
    """:func:`_unmention` outside the code spans of *text* (lines outside fenced blocks)."""
    pos, kept = 0, []
    for span in _CODE_SPAN.finditer(text):
        kept += [_unmention(text[pos:span.start()], _MENTION_MD), span.group(0)]
        pos = span.end()
    return "".join([*kept, _unmention(text[pos:], _MENTION_MD)])


def no_mentions(markdown: str) -> str:
    """*markdown* for a PR comment: ``@name``, ``#123`` and ``GH-123`` outside code no longer
    notify anyone or link an issue (a zero-width space after ``@``/``#``/``GH-``); fenced code
    blocks (of any fence length) and code spans (also over several lines) kept as they are."""
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        m = _FENCE_LINE.match(line)
        if fence is None and not m:
            prose.append(line)
            continue
        if prose:
            out.append(_unmention_prose("\n".join(prose)))
            prose = []
        if fence is None and m:
            fence = m.group(1)
        elif m and fence is not None and m.group(1)[0] == fence[0] \
                and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):
            fence = None
        out.append(line)
    if prose:
        out.append(_unmention_prose("\n".join(prose)))
    return "\n".join(out)


# ------------------------------------------------------------------------------ HTML

_HTML = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;", ord('"'): "&quot;",
         ord("'"): "&#39;"}


def html_text(text: object) -> str:
    """*text* inside an HTML element of the summary (``<summary>`` of a ``<details>``): one
    line, ``& < > " '`` as entities (no tag, no ``</details>``), mentions neutralised."""
    return _unmention(terminal_text(text)).translate(_HTML)


# ------------------------------------------------------------------------------- SVG

def xml_text(text: object) -> str:
    """*text* in SVG/XML character data or an attribute value (quoted either way): one line,
    characters XML 1.0 refuses (controls, lone surrogates, U+FFFE/U+FFFF) shown escaped,
    ``& < > " '`` as entities (so ``]]>`` and ``-->`` are inert)."""
    return terminal_text(text).translate(_HTML)


# --------------------------------------------------------------------------- Mermaid

def mermaid_text(text: object) -> str:
    """*text* inside a quoted Mermaid string (a chart's title or axis label): letters, digits
    and `` .:-_#/()`` only, so no quote, bracket, line break, directive (``%%``) or HTML."""
    return "".join(c for c in str(text) if c.isalnum() or c in " .:-_#/()").strip() or "?"


# ------------------------------------------------------------------------ JSON lines

def json_line(value: Any) -> str:
    """*value* as one line of a JSON Lines file: ASCII only (U+2028, U+2029 and lone
    surrogates as ``\\uXXXX``, so no reader splits the line), keys sorted, no NaN or
    infinity (ValueError: the caller says which input held it). No newline at the end."""
    import json

    return json.dumps(value, ensure_ascii=True, sort_keys=True, allow_nan=False)
