"""``.dockerignore`` files: where BuildKit looks for them and what they exclude.

Matching follows moby/patternmatcher: patterns are cleaned paths relative to the context,
``*`` and ``?`` stay within one path segment, ``**`` spans segments, ``!`` re-includes, the
last matching pattern wins, and a pattern that matches a directory excludes what is inside.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import NamedTuple

#: Directories never searched for Dockerfiles nor walked for weight files in a context.
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache"}
)


class Pattern(NamedTuple):
    text: str
    regex: re.Pattern[str]
    negated: bool


def _star(pattern: str, i: int, out: list[str]) -> int:
    """Translate ``*`` or ``**`` at *i*; return the index of the last character used."""
    if pattern[i + 1 : i + 2] != "*":
        out.append("[^/]*")
        return i
    i += 1
    if i + 1 >= len(pattern):
        out.append(".*")
        return i
    if pattern[i + 1] == "/":
        i += 1
    out.append("(.*/)?")
    return i


def _bracket(pattern: str, i: int, out: list[str]) -> int:
    end = pattern.find("]", i + 1)
    if end < 0:
        out.append(re.escape("["))
        return i
    body = pattern[i + 1 : end].replace("\\", "\\\\")
    if body.startswith(("!", "^")):
        body = "^" + body[1:]
    out.append("[" + body + "]")
    return end


def _translate(pattern: str) -> re.Pattern[str]:
    out = ["^"]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            i = _star(pattern, i, out)
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            i = _bracket(pattern, i, out)
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return re.compile("".join(out))


_WILDCARD = re.compile(r"[*?\[]")


def has_wildcard(segment: str) -> bool:
    """Whether a path segment holds ``*``, ``?`` or ``[`` (a COPY glob, Go's filepath.Match)."""
    return bool(_WILDCARD.search(segment))


def segment_regex(segment: str) -> re.Pattern[str]:
    """One path segment's pattern as a regex: ``*`` and ``?`` never match ``/``."""
    return _translate(segment.replace("**", "*"))


def parse(text: str) -> list[Pattern]:
    pats: list[Pattern] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:].strip()
        line = posixpath.normpath(line)
        if len(line) > 1 and line.startswith("/"):
            line = line.lstrip("/") or "/"
        pats.append(Pattern(line, _translate(line), negated))
    return pats


def excluded(path: str, patterns: list[Pattern]) -> bool:
    """Whether *path* (relative to the context, ``/``-separated) is left out of the context."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    result = False
    for pat in patterns:
        if any(pat.regex.match(c) for c in candidates):
            result = not pat.negated
    return result


def _within(path: Path, folder: Path) -> bool:
    """Whether *path*, its links resolved, lies in *folder*: an ignore file linked out of the
    build context is never read (BuildKit would look for it inside the context)."""
    import os

    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def find(dockerfile: Path, context: Path) -> Path | None:
    """The ignore file BuildKit uses: ``<Dockerfile>.dockerignore`` beside it, else the
    context's ``.dockerignore``; one that is a link out of its folder counts as absent."""
    specific = dockerfile.with_name(dockerfile.name + ".dockerignore")
    if specific.is_file() and _within(specific, specific.parent):
        return specific
    general = context / ".dockerignore"
    return general if general.is_file() and _within(general, context) else None


def load(dockerfile: Path, context: Path) -> list[Pattern] | None:
    """The patterns of the ignore file :func:`find` picks, read through the safe reader (size
    cap, regular file, UTF-8: a bad one is :class:`~servelab.errors.InputError`, exit 2);
    None when there is no ignore file."""
    from servelab import textio

    path = find(dockerfile, context)
    if path is None:
        return None
    return parse(textio.read_text(path, what=".dockerignore",
                                  hint="fix or remove the .dockerignore"))
