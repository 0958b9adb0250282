"""Dockerfile words: quote removal and ``$VAR`` substitution as BuildKit does it.

The parser keeps ``ARG``/``ENV`` values and ``FROM`` references as written. BuildKit
substitutes ``$NAME``, ``${NAME}``, ``${NAME:-word}``, ``${NAME-word}``, ``${NAME:+word}``,
``${NAME+word}`` (and ``:?``/``?``); the escape character (``\\`` or the ``escape``
directive's backtick) protects a ``$``. A name with no value is reported, not guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Lookup = Callable[[str], "str | None"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPS = (":-", ":+", ":?", "-", "+", "?")

#: Build arguments BuildKit sets itself in the global scope (values of a linux/amd64 build).
PREDEFINED: dict[str, str] = {
    "TARGETPLATFORM": "linux/amd64",
    "TARGETOS": "linux",
    "TARGETARCH": "amd64",
    "TARGETVARIANT": "",
    "BUILDPLATFORM": "linux/amd64",
    "BUILDOS": "linux",
    "BUILDARCH": "amd64",
    "BUILDVARIANT": "",
}


def unquote(text: str, escape: str = "\\") -> str:
    """Remove shell-style quotes from an ARG/ENV value, keeping what they protect."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = ""
            else:
                out.append(c)
        elif c == escape and i + 1 < len(text) and quote != "'":
            out.append(text[i + 1])
            i += 1
        elif quote == '"':
            if c == '"':
                quote = ""
            else:
                out.append(c)
        elif c in "'\"":
            quote = c
        else:
            out.append(c)
        i += 1
    return "".join(out)


class Expansion:
    """The substituted text and the names that had no value (a plain class: cheap to
    define at start-up)."""

    __slots__ = ("unresolved", "value")

    def __init__(self, value: str, unresolved: list[str] | None = None) -> None:
        self.value = value
        self.unresolved: list[str] = unresolved if unresolved is not None else []


def _closing_brace(text: str, start: int) -> int:
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _braced(inner: str, lookup: Lookup, escape: str, out: Expansion) -> str:
    m = _NAME.match(inner)
    if not m:
        return "${" + inner + "}"
    name, rest = m.group(0), inner[m.end() :]
    value = lookup(name)
    op = next((o for o in _OPS if rest.startswith(o)), None)
    if op is None:
        if value is None:
            out.unresolved.append(name)
            return ""
        return value
    word = expand(rest[len(op) :], lookup, escape)
    empty = value is None or (op.startswith(":") and value == "")
    if op in {":-", "-"}:
        if empty:
            out.unresolved.extend(word.unresolved)
            return word.value
        return value or ""
    if op in {":+", "+"}:
        if empty:
            return ""
        out.unresolved.extend(word.unresolved)
        return word.value
    if empty:  # :? and ?: BuildKit fails the build
        out.unresolved.append(name)
        return ""
    return value or ""


def expand(text: str, lookup: Lookup, escape: str = "\\") -> Expansion:
    """Substitute variables in *text*; names without a value land in ``unresolved``."""
    out = Expansion("")
    parts: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == escape and i + 1 < len(text) and text[i + 1] == "$":
            parts.append("$")
            i += 2
            continue
        if c != "$" or i + 1 >= len(text):
            parts.append(c)
            i += 1
            continue
        if text[i + 1] == "{":
            end = _closing_brace(text, i + 1)
            if end < 0:
                parts.append(text[i:])
                break
            parts.append(_braced(text[i + 2 : end], lookup, escape, out))
            i = end + 1
            continue
        m = _NAME.match(text, i + 1)
        if not m:
            parts.append(c)
            i += 1
            continue
        value = lookup(m.group(0))
        if value is None:
            out.unresolved.append(m.group(0))
        parts.append(value or "")
        i = m.end()
    out.value = "".join(parts)
    return out


def references(text: str, name: str) -> bool:
    """Whether *text* refers to variable *name* (``$NAME`` or ``${NAME...}``)."""
    return (
        re.search(r"\$(\{" + re.escape(name) + r"\b|" + re.escape(name) + r"\b)", text) is not None
    )
