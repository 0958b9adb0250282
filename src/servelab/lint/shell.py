"""Split shell text (a RUN line, a start command, a start script) into simple commands.

This is not a shell: it finds the simple commands of a script well enough to recognise
``pip install ...`` or ``huggingface-cli download ...`` in them. :func:`tokenize` (the one
tokenizer, k8s-check's launch scripts use it too) reads quotes before lines, in one pass: a
newline inside a quoted string belongs to the word, so it cannot hide the commands after it
(issue 24). Operators (``&&``, ``||``, ``;``, ``|``, ``&``, parentheses, a newline) separate
commands; redirections are not words (the file stdout goes to is kept); a here-document body
is not part of the text around it: it is read as a script of its own (unless Python or
another language reads it), so its quotes cannot reach the commands after it; command
substitutions (``$(...)``, backticks) are read as commands too; leading ``VAR=value``
assignments and wrappers (``sudo``, ``exec``, ``env``, ``tini --`` ...) are removed;
``sh -c "..."`` is split again. Nesting is read at most :data:`MAX_DEPTH` deep.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

_OPERATORS = {";", ";;", "&&", "||", "|", "&", "(", ")", "|&", "{", "}", "!"}
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "time", "command"}
#: wrapper -> number of arguments it takes before the real command
_WRAPPERS = {"sudo": 0, "exec": 0, "nohup": 0, "nice": 0, "gosu": 1, "su-exec": 1}
_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
MAX_DEPTH = 4


class SimpleCommand:
    """One simple command: its words, the variables assigned before it, its line, and
    whether its output goes on to the next command through a pipe (``curl ... | sh``) or
    into a file (``curl ... > install.sh``).

    A plain class, not a dataclass: lint builds its module graph at every start."""

    __slots__ = ("argv", "env", "line", "piped", "stdout")

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, line: int = 1,
                 piped: bool = False, stdout: str = "") -> None:
        self.argv = argv
        self.env = env if env is not None else {}
        self.line = line
        self.piped = piped
        #: the file its standard output is redirected to, or ""
        self.stdout = stdout

    def __repr__(self) -> str:
        return (f"SimpleCommand(argv={self.argv!r}, env={self.env!r}, line={self.line}, "
                f"piped={self.piped})")

    @property
    def name(self) -> str:
        return self.argv[0].rsplit("/", 1)[-1] if self.argv else ""


_WORD_END = frozenset(" \t\r\n;&|()<>")
#: an operator at the current position, longest first
_OP = re.compile(r";;|&&|\|\||\|&|[;&|()]")
#: a redirection operator, with the file descriptor before it
_REDIR = re.compile(r"\d*(?:&>>?|>>|>&|<&|<<<|<<-?|>\||[<>])")
_PLAIN = re.compile(r"[^\s;&|()<>'\"\\`$#]+")


class Token(NamedTuple):
    """A word (quotes removed) or an operator (``;`` for a newline), and its line. A
    here-document's body comes as an operator ``<<`` with the *body*, before the newline
    that ends its command."""

    text: str
    line: int
    op: bool
    body: str | None = None


class _Heredoc(NamedTuple):
    delimiter: str
    strip_tabs: bool


def _heredoc_body(text: str, i: int, doc: _Heredoc) -> tuple[str, int]:
    """The body of *doc* starting at *i* (after a newline) and the index after its
    terminator line (the end of *text* when there is none, as a shell reads it)."""
    j = i
    n = len(text)
    while j < n:
        end = text.find("\n", j)
        end = n if end < 0 else end
        raw = text[j:end].rstrip("\r")
        if (raw.lstrip("\t") if doc.strip_tabs else raw) == doc.delimiter:
            return text[i:j], min(end + 1, n)
        j = end + 1
    return text[i:], n


def _closing(text: str, i: int, close: str) -> int:
    """The index after the quote, backtick or ``$(``/``${`` group whose opening character is
    at *i* (nested groups and quotes inside honoured, with a stack, not recursion); the end of
    *text* when it is not closed."""
    n = len(text)
    if close in "'`":
        j = text.find(close, i + 1)
        return n if j < 0 else j + 1
    stack = [close]
    j = i + 1
    while j < n:
        c, top = text[j], stack[-1]
        if c == "\\":
            j += 2
        elif c in "'`" and (top != '"' or c == "`"):
            j = _closing(text, j, c)
        elif top == '"' and text.startswith(("$(", "${"), j):
            stack.append(")" if text[j + 1] == "(" else "}")
            j += 2
        elif c == top:
            stack.pop()
            j += 1
            if not stack:
                return j
        elif c == '"' or (c == "(" and top == ")") or (c == "{" and top == "}"):
            stack.append('"' if c == '"' else top)
            j += 1
        else:
            j += 1
    return n


def _unquote_double(body: str) -> str:
    return re.sub(r'\\([\\"$`\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), body)


def _word(text: str, i: int) -> tuple[str, int]:
    """The word starting at *i* with its quotes removed, and the index after it."""
    parts: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c in _WORD_END:
            break
        if m := _PLAIN.match(text, i):
            parts.append(m.group(0))
            i = m.end()
        elif c == "\\":
            parts.append(text[i + 1:i + 2] if text[i + 1:i + 2] != "\n" else "")
            i += 2
        elif c == "'":
            j = _closing(text, i, "'")
            parts.append(text[i + 1:j - 1] if text[j - 1:j] == "'" and j > i + 1 else text[i + 1:j])
            i = j
        elif c == '"':
            j = _closing(text, i, '"')
            end = j - 1 if j <= n and text[j - 1:j] == '"' and j > i + 1 else j
            parts.append(_unquote_double(text[i + 1:end]))
            i = j
        elif c == "`" or text.startswith(("$(", "${"), i):
            close = "`" if c == "`" else (")" if text[i + 1] == "(" else "}")
            j = _closing(text, i if c == "`" else i + 1, close)
            parts.append(text[i:j])
            i = j
        else:  # a lone $ or a # inside a word
            parts.append(c)
            i += 1
    return "".join(parts), i


def tokenize(text: str) -> list[Token]:
    """The words and operators of shell *text*, quotes honoured before lines: a newline
    inside a quoted string is part of the word, one outside ends the command; here-document
    bodies are not words (see :class:`Token`). Linear."""
    out: list[Token] = []
    docs: list[_Heredoc] = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c in " \t\r":
            i += 1
        elif c == "\n":
            i += 1
            line += 1
            for doc in docs:  # the bodies follow the line that names them
                body, i2 = _heredoc_body(text, i, doc)
                out.append(Token("<<", line, True, body))
                line += text.count("\n", i, i2)
                i = i2
            docs.clear()
            out.append(Token(";", line - 1, True))
        elif c == "\\" and text.startswith("\\\n", i):
            line += 1
            i += 2
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif m := _REDIR.match(text, i):
            op = m.group(0)
            out.append(Token(op, line, True))
            i = m.end()
            if op.startswith("<<") and op != "<<<":
                while i < n and text[i] in " \t":
                    i += 1
                delimiter, i = _word(text, i)
                out.append(Token(delimiter, line, False))
                docs.append(_Heredoc(delimiter, op == "<<-"))
        elif m := _OP.match(text, i):
            out.append(Token(m.group(0), line, True))
            i = m.end()
        else:
            start = line
            word, j = _word(text, i)
            line += text.count("\n", i, j)
            out.append(Token(word, start, False))
            i = j
    return out


def is_redirection(tok: Token) -> bool:
    """A redirection operator (``>``, ``2>&``, ``&>>``, ``<<``), not a here-document body."""
    return tok.op and tok.body is None and ("<" in tok.text or ">" in tok.text)


def without_redirections(tokens: list[Token]) -> list[Token]:
    """*tokens* less the redirections (``2>&1``, ``> log``, ``<<EOF``) and their targets."""
    out: list[Token] = []
    skip = False
    for tok in tokens:
        if skip and not tok.op:
            skip = False
            continue
        skip = is_redirection(tok)
        if not skip:
            out.append(tok)
    return out


def _substitutions(word: str) -> list[str]:
    """The command texts of the ``$(...)`` and backtick groups in a word (they run too)."""
    out: list[str] = []
    i = word.find("$(")
    tick = word.find("`")
    while i >= 0 or tick >= 0:
        if tick >= 0 and (i < 0 or tick < i):
            j = _closing(word, tick, "`")
            out.append(word[tick + 1:j - 1])
        else:
            j = _closing(word, i + 1, ")")
            out.append(word[i + 2:j - 1])
        i = word.find("$(", j)
        tick = word.find("`", j)
    return out


#: interpreters of other languages: a here-document they read is not a shell script
_OTHER_LANGUAGES = re.compile(r"^(python[\d.]*|perl|ruby|node|php|R|Rscript|psql|mysql|sqlite3)$")


def _body_is_script(words: list[str]) -> bool:
    """Whether a here-document given to the command *words* is read as a shell script: it
    is run by a shell (``RUN <<EOF`` as BuildKit runs it, ``bash -ex <<EOF``) or, most often,
    written to a file that runs later (``cat > /fetch.sh <<EOF``). Only a body that another
    language's interpreter reads (``python3 - <<PY``) is not. Read on its own, a body's quotes
    can never reach the commands after it."""
    env: dict[str, str] = {}
    argv = _strip_wrappers(list(words), env)
    return not argv or not _OTHER_LANGUAGES.match(argv[0].rsplit("/", 1)[-1])


#: one simple command: its first line, its words, whether a pipe follows it, and the file
#: its standard output is redirected to (``curl -fsSL URL > /tmp/install.sh``), or ""
Segment = tuple[int, tuple[str, ...], bool, str]


def _stdout(tok: Token) -> bool:
    return tok.text in {">", ">>", "1>", "1>>", ">|", "&>", "&>>"}


def _segments(tokens: list[Token], depth: int = 0) -> list[Segment]:
    """The words of each simple command, whether a pipe follows it and where its output
    goes; redirections are not words; command substitutions come before their pipeline."""
    segs: list[Segment] = []
    words: list[str] = []
    first = 1
    out = [""]
    subs: list[Segment] = []  # they run before the pipeline that holds them
    pipeline: list[Segment] = []

    def close(piped: bool) -> None:
        if words:
            pipeline.append((first, tuple(words), piped, out[0]))
        words.clear()
        out[0] = ""
        if not piped:
            segs.extend(subs)
            segs.extend(pipeline)
            subs.clear()
            pipeline.clear()

    target: Token | None = None
    for tok in tokens:
        if target is not None and not tok.op:
            out[0] = tok.text if _stdout(target) else out[0]
            target = None
            continue
        target = tok if is_redirection(tok) else None
        if target is not None:
            continue
        if tok.body is not None:  # a here-document: a script when a shell reads it
            if _body_is_script(words) and depth < MAX_DEPTH:
                (subs if words else segs).extend(
                    (tok.line + line - 1, ws, piped, o)
                    for line, ws, piped, o in _split(tok.body, depth + 1))
            continue
        if tok.op or tok.text in _OPERATORS:
            close(tok.text in {"|", "|&"})
        else:
            if not words:
                first = tok.line
            words.append(tok.text)
            if ("$(" in tok.text or "`" in tok.text) and depth < MAX_DEPTH:
                subs.extend((tok.line + line - 1, ws, piped, o) for sub in
                            _substitutions(tok.text)
                            for line, ws, piped, o in _split(sub, depth + 1))
    close(False)
    return segs


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


#: distinct texts whose tokens and commands are kept: every RUN, start command and script
#: of a large Dockerfile is read by several rules, so an entry must outlive one rule's pass
_CACHE = 1 << 16


@lru_cache(maxsize=_CACHE)
def _split(text: str, depth: int = 0) -> tuple[Segment, ...]:
    """(line, words, whether a pipe follows) of each simple command of *text*. Cached: the
    rules look at the same RUN text several times, and tokenising dominates."""
    return tuple(_segments(tokenize(text), depth))


def commands(text: str, *, depth: int = 0) -> list[SimpleCommand]:
    """The simple commands of *text*, in order, with their line numbers in *text*. The
    commands are shared between callers (cached): read them, do not change them."""
    return list(_commands(text, depth))


@lru_cache(maxsize=_CACHE)
def _commands(text: str, depth: int) -> tuple[SimpleCommand, ...]:
    out: list[SimpleCommand] = []
    for line_no, words, piped, stdout in _split(text):
        env: dict[str, str] = {}
        argv = _strip_wrappers(list(words), env)
        if not argv:
            continue
        script = _shell_script(argv)
        if script is not None and depth < MAX_DEPTH:
            out += [SimpleCommand(sub.argv, {**env, **sub.env}, line_no + sub.line - 1,
                                  sub.piped, sub.stdout) for sub in _commands(script, depth + 1)]
            continue
        out.append(SimpleCommand(normalise(argv), env, line_no, piped, stdout))
    return tuple(out)


def assignments(text: str) -> dict[str, str]:
    """Shell variables *text* sets: ``NAME=value`` commands (``export`` included) and the
    ``NAME=value`` words before a command (``CMAKE_VERSION=3.22 sh deps.sh``, which the
    command's scripts see); last value wins; values are as written (no expansion)."""
    out: dict[str, str] = {}
    for _line_no, seg, _piped, _out in _split(text):
        words = seg[1:] if seg[0] in {"export", "local", "readonly", "declare"} else seg
        for w in words:
            if not _ASSIGN.match(w):
                break
            name, _, value = w.partition("=")
            out[name] = value
    return out


def shown(word: str) -> str:
    """*word* for a message: a ``$NAME`` shown as ``${NAME}``, never a bare ``$``."""
    return re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", r"${\1}", word)


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
