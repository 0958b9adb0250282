"""Split shell text (a RUN line, a start command, a start script) into simple commands.

This is not a shell: it finds the simple commands of a script well enough to recognise
``pip install ...`` or ``huggingface-cli download ...`` in them. Operators (``&&``, ``||``,
``;``, ``|``, ``&``, parentheses) separate commands; redirections are dropped; leading
``VAR=value`` assignments and wrappers (``sudo``, ``exec``, ``env``, ``tini --`` ...) are
removed; ``sh -c "..."`` is split again.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

_OPERATORS = {";", ";;", "&&", "||", "|", "&", "(", ")", "|&", "{", "}", "!"}
_REDIRECT = re.compile(r"^\d*(>>?|<<?<?|>&|<&|&>>?)$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "time", "command"}
#: wrapper -> number of arguments it takes before the real command
_WRAPPERS = {"sudo": 0, "exec": 0, "nohup": 0, "nice": 0, "gosu": 1, "su-exec": 1}
_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
MAX_DEPTH = 4


class SimpleCommand:
    """One simple command: its words, the variables assigned before it, its line, and
    whether its output goes on to the next command through a pipe (``curl ... | sh``).

    A plain class, not a dataclass: lint builds its module graph at every start."""

    __slots__ = ("argv", "env", "line", "piped")

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, line: int = 1,
                 piped: bool = False) -> None:
        self.argv = argv
        self.env = env if env is not None else {}
        self.line = line
        self.piped = piped

    def __repr__(self) -> str:
        return (f"SimpleCommand(argv={self.argv!r}, env={self.env!r}, line={self.line}, "
                f"piped={self.piped})")

    @property
    def name(self) -> str:
        return self.argv[0].rsplit("/", 1)[-1] if self.argv else ""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash-continued lines; each result keeps its first line number."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 1
    for i, raw in enumerate(text.splitlines(), start=1):
        if not buf:
            start = i
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            buf.append(raw[:-1])
            continue
        buf.append(raw)
        out.append((start, " ".join(buf)))
        buf = []
    if buf:
        out.append((start, " ".join(buf)))
    return out


def _tokens(line: str) -> list[str]:
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        return list(lex)
    except ValueError:  # unbalanced quotes: fall back to plain words
        return line.split()


def _segments(tokens: list[str]) -> list[tuple[list[str], bool]]:
    """The words of each simple command, and whether a pipe follows it."""
    segs: list[tuple[list[str], bool]] = [([], False)]
    skip_next = False
    for tok in tokens:
        if skip_next:
            skip_next = False
            continue
        if tok in _OPERATORS:
            if segs[-1][0]:
                segs[-1] = (segs[-1][0], tok in {"|", "|&"})
            segs.append(([], False))
        elif _REDIRECT.match(tok):
            skip_next = True
            if segs[-1][0] and segs[-1][0][-1].isdigit():
                segs[-1][0].pop()
        else:
            segs[-1][0].append(tok)
    return [s for s in segs if s[0]]


def _strip_wrappers(words: list[str], env: dict[str, str]) -> list[str]:
    i = 0
    while i < len(words):
        w = words[i]
        base = w.rsplit("/", 1)[-1]
        if _ASSIGN.match(w):
            name, _, value = w.partition("=")
            env[name] = value
            i += 1
        elif w in _KEYWORDS:
            i += 1
        elif base in _WRAPPERS:
            i += 1 + _WRAPPERS[base]
            while i < len(words) and words[i].startswith("-") and base == "sudo":
                i += 1
        elif base == "env":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        elif base in {"tini", "dumb-init"}:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
                if words[i - 1] == "--":
                    break
        else:
            break
    return words[i:]


def _shell_script(argv: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (also ``bash -lc``, ``bash -euxc``), else None."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for i, w in enumerate(argv[1:], start=1):
        if w.startswith("-") and not w.startswith("--") and "c" in w[1:]:
            return argv[i + 1] if i + 1 < len(argv) else None
        if not w.startswith("-"):
            return None
    return None


def normalise(argv: list[str]) -> list[str]:
    """``python -m pip`` / ``pip3`` / ``uv pip`` -> ``pip``; other argv unchanged (compare
    :attr:`SimpleCommand.name`, the program's base name)."""
    if not argv:
        return argv
    name = argv[0].rsplit("/", 1)[-1]
    if _PYTHON.match(name) and len(argv) >= 3 and argv[1] == "-m":
        return normalise([argv[2], *argv[3:]])
    if name in {"pip3", "pip"} or re.match(r"^pip\d(\.\d+)?$", name):
        return ["pip", *argv[1:]]
    if name == "uv" and len(argv) >= 2 and argv[1] == "pip":
        return ["pip", *argv[2:]]
    return list(argv)  # the path stays: /opt/scripts/fetch.sh is a file to read


Segments = tuple[tuple[int, tuple[tuple[tuple[str, ...], bool], ...]], ...]


@lru_cache(maxsize=2048)
def _split(text: str) -> Segments:
    """(line, the words of each simple command and whether a pipe follows) of *text*.
    Cached: the rules look at the same RUN text several times, and tokenising dominates."""
    return tuple(
        (line_no, tuple((tuple(seg), piped) for seg, piped in _segments(_tokens(line))))
        for line_no, line in _logical_lines(text)
    )


def commands(text: str, *, depth: int = 0) -> list[SimpleCommand]:
    """The simple commands of *text*, in order, with their line numbers in *text*."""
    out: list[SimpleCommand] = []
    for line_no, segs in _split(text):
        for words, piped in segs:
            env: dict[str, str] = {}
            argv = _strip_wrappers(list(words), env)
            if not argv:
                continue
            script = _shell_script(argv)
            if script is not None and depth < MAX_DEPTH:
                for sub in commands(script, depth=depth + 1):
                    sub.env = {**env, **sub.env}
                    sub.line = line_no
                    out.append(sub)
                continue
            out.append(SimpleCommand(normalise(argv), env, line_no, piped))
    return out


def assignments(text: str) -> dict[str, str]:
    """Shell variables *text* sets: ``NAME=value`` commands (``export`` included) and the
    ``NAME=value`` words before a command (``CMAKE_VERSION=3.22 sh deps.sh``, which the
    command's scripts see); last value wins; values are as written (no expansion)."""
    out: dict[str, str] = {}
    for _line_no, segs in _split(text):
        for seg, _piped in segs:
            words = seg[1:] if seg[0] in {"export", "local", "readonly", "declare"} else seg
            for w in words:
                if not _ASSIGN.match(w):
                    break
                name, _, value = w.partition("=")
                out[name] = value
    return out


def options_and_operands(
    args: list[str], with_value: frozenset[str]
) -> tuple[list[str], list[str]]:
    """Split *args* into options and operands; options in *with_value* consume the next word."""
    opts: list[str] = []
    operands: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            opts.append(a)
            continue
        if a.startswith("-") and a != "-":
            opts.append(a)
            if a in with_value:
                skip = True
            continue
        operands.append(a)
    return opts, operands
