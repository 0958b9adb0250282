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
assignments and wrappers with their options (``sudo -u u``, ``timeout 30``, ``env -i``,
``nice -n 5``, ``xargs -n1``, ``numactl``, ``tini --`` ... :data:`_WRAPPERS`) are removed;
ANSI-C quoting (``$'...'``) is decoded; a here-string given to a shell is a script;
``sh -c "..."``, ``su -c "..."`` and ``eval ...`` are split again, their variables taken from
the script's own assignments and the image's ENV. A form whose command cannot be known (an
``eval "$CMD"`` of an unknown variable, nesting past :data:`MAX_DEPTH`) comes as an
:data:`UNREAD` command, a coverage note for the rules. Each command carries the path of the
file test that guards it (:attr:`SimpleCommand.guard`: ``if [ ! -f P ]; then ...``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple

_OPERATORS = {";", ";;", "&&", "||", "|", "&", "(", ")", "|&", "{", "}", "!"}
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
MAX_DEPTH = 4


class SimpleCommand:
    """One simple command: its words, the variables assigned before it, its line, and
    whether its output goes on to the next command through a pipe (``curl ... | sh``) or
    into a file (``curl ... > install.sh``).

    A plain class, not a dataclass: lint builds its module graph at every start."""

    __slots__ = ("argv", "env", "guard", "line", "piped", "stdout")

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, line: int = 1,
                 piped: bool = False, stdout: str = "") -> None:
        self.argv = argv
        self.env = env if env is not None else {}
        self.line = line
        self.piped = piped
        #: the file its standard output is redirected to, or ""
        self.stdout = stdout
        #: the path whose absence it runs on (``if [ ! -f P ]; then ...``), or ""
        self.guard = ""

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


def _ansi_end(text: str, i: int) -> int:
    """The index after the quote that closes an ANSI-C string whose body starts at *i*
    (a backslash escapes the next character, ``\\'`` included)."""
    n = len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
        elif text[i] == "'":
            return i + 1
        else:
            i += 1
    return n


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
         "e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|"
                          r"c.|.)", re.S)


def _ansi_c(body: str) -> str:
    """The value of an ANSI-C quoted string's body, as bash decodes it."""

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU" and len(e) > 1:
            code = min(int(e[1:], 16), 0x10FFFF)
            return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)
        if e[0] in "01234567":
            return chr(int(e, 8) & 0xFF)
        if e[0] == "c" and len(e) == 2:
            return chr(ord(e[1].upper()) ^ 0x40)
        return _ANSI.get(e, "\\" + e)

    return _ANSI_ESCAPE.sub(one, body)


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
        elif text.startswith("$'", i):  # ANSI-C quoting: $'pip\x20install'
            j = _ansi_end(text, i + 2)
            parts.append(_ansi_c(text[i + 2:j - 1] if text[j - 1:j] == "'" else text[i + 2:j]))
            i = j
        elif text.startswith('$"', i):  # a locale string reads as a double-quoted one
            i += 1
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


#: one simple command: its first line, its words, whether a pipe follows it, the file its
#: standard output is redirected to (``curl -fsSL URL > /tmp/install.sh``) or "", and the
#: operator that ends it (``&&``, ``||``, ``;`` ...; "" at the end of the text)
Segment = tuple[int, tuple[str, ...], bool, str, str]


def _stdout(tok: Token) -> bool:
    return tok.text in {">", ">>", "1>", "1>>", ">|", "&>", "&>>"}


def _nested(text: str, line: int, depth: int) -> list[Segment]:
    """The segments of a script nested at *line* (a here-document, a here-string, a command
    substitution), at their lines in the outer text."""
    return [(line + ln - 1, ws, piped, o, op) for ln, ws, piped, o, op in _split(text, depth + 1)]


def _segments(tokens: list[Token], depth: int = 0) -> list[Segment]:
    """The words of each simple command, whether a pipe follows it, where its output goes
    and the operator after it; redirections are not words; command substitutions come
    before their pipeline; a here-document or here-string a shell reads is a script."""
    segs: list[Segment] = []
    words: list[str] = []
    first = 1
    out = [""]
    subs: list[Segment] = []  # they run before the pipeline that holds them
    pipeline: list[Segment] = []

    def close(op: str) -> None:
        piped = op in {"|", "|&"}
        if words:
            pipeline.append((first, tuple(words), piped, out[0], op))
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
            if target.text.endswith("<<<") and depth < MAX_DEPTH and _is_shell(words):
                subs.extend(_nested(tok.text, tok.line, depth))  # bash <<< "pip install x"
            out[0] = tok.text if _stdout(target) else out[0]
            target = None
            continue
        target = tok if is_redirection(tok) else None
        if target is not None:
            continue
        if tok.body is not None:  # a here-document: a script when a shell reads it
            if _body_is_script(words) and depth < MAX_DEPTH:
                (subs if words else segs).extend(_nested(tok.body, tok.line, depth))
            continue
        if tok.op or (tok.text in _OPERATORS and tok.text != "!"):
            close(tok.text)
        else:
            if not words:
                first = tok.line
            words.append(tok.text)
            if ("$(" in tok.text or "`" in tok.text) and depth < MAX_DEPTH:
                subs.extend(seg for sub in _substitutions(tok.text)
                            for seg in _nested(sub, tok.line, depth))
    close("")
    return segs


def _is_shell(words: list[str]) -> bool:
    """Whether the command *words* is a shell reading its script from stdin."""
    env: dict[str, str] = {}
    argv = _strip_wrappers(list(words), env)
    return bool(argv) and argv[0].rsplit("/", 1)[-1] in _SHELLS and _shell_script(argv) is None


class _Wrapper(NamedTuple):
    """A program that runs the command after its own options and operands."""

    #: its options that take the next word as their value
    with_value: frozenset[str] = frozenset()
    #: operands before the command (``timeout 30 cmd``, ``gosu user cmd``)
    operands: int = 0


_W = _Wrapper
#: command wrappers, how many words each takes before the command it runs
_WRAPPERS: dict[str, _Wrapper] = {
    "sudo": _W(frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T",
                          "--user", "--group", "--chdir"})),
    "doas": _W(frozenset({"-u", "-C"})),
    "exec": _W(frozenset({"-a"})),
    "nohup": _W(),
    "setsid": _W(),
    "nice": _W(frozenset({"-n", "--adjustment"})),
    "ionice": _W(frozenset({"-c", "-n", "--class", "--classdata"})),
    "timeout": _W(frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "stdbuf": _W(frozenset({"-i", "-o", "-e", "--input", "--output", "--error"})),
    "taskset": _W(frozenset(), 1),
    "numactl": _W(frozenset({"-N", "-m", "-C", "-i", "-p", "-l", "--cpunodebind", "--membind",
                             "--physcpubind", "--interleave", "--preferred"})),
    "chroot": _W(frozenset({"--userspec", "--groups"}), 1),
    "xargs": _W(frozenset({"-I", "-n", "-P", "-L", "-d", "-a", "-s", "-E", "--max-args",
                           "--max-procs", "--max-lines", "--delimiter", "--arg-file",
                           "--replace"})),
    "gosu": _W(frozenset(), 1),
    "su-exec": _W(frozenset(), 1),
    "s6-setuidgid": _W(frozenset(), 1),
    "chpst": _W(frozenset({"-u", "-U", "-e", "-n", "-l", "-L"})),
    "runuser": _W(frozenset({"-u", "-g", "-G", "--user", "--group"})),
    "setpriv": _W(frozenset({"--reuid", "--regid", "--groups", "--ruid", "--euid", "--rgid",
                             "--egid"})),
    "unbuffer": _W(),
    "tini": _W(frozenset({"-e", "-p"})),
    "dumb-init": _W(frozenset({"-r", "--rewrite"})),
    "catatonit": _W(),
    "time": _W(frozenset({"-f", "-o", "--format", "--output"})),
    "builtin": _W(),
    "command": _W(),
}
_KEYWORDS = {"if", "then", "else", "elif", "do", "while", "until", "!", "fi", "done"}


def _skip_options(words: list[str], i: int, wrapper: _Wrapper) -> int:
    """The index of the first word after the options (and ``--``) of a wrapper at *i*."""
    i += 1
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        w = words[i]
        i += 1
        if w == "--":
            break
        if w in wrapper.with_value:
            i += 1
    return i


def _strip_wrappers(words: list[str], env: dict[str, str]) -> list[str]:
    """*words* less the leading ``VAR=value`` assignments (into *env*), keywords and command
    wrappers (``sudo -u u``, ``timeout -s KILL 30``, ``env -i A=b``, ``nice -n 5``,
    ``xargs -n1``, ``taskset -c 0-3``, ``numactl --membind=0`` ...)."""
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
        elif base == "env":
            i = _skip_options(words, i, _Wrapper(frozenset({"-u", "-C", "--unset", "--chdir"})))
            if words[i - 1:i] in (["-S"], ["--split-string"]) and i < len(words):
                return [*_split_words(words[i]), *words[i + 1:]]
        elif base in _WRAPPERS:
            i = _skip_options(words, i, _WRAPPERS[base]) + _WRAPPERS[base].operands
        else:
            break
    return words[i:]


def _split_words(text: str) -> list[str]:
    return [t.text for t in tokenize(text) if not t.op]


def _su_script(argv: list[str]) -> str | None:
    """The command of ``su -c CMD [user]`` / ``su user -c CMD`` (``--command=CMD``)."""
    for i, w in enumerate(argv[1:], start=1):
        if w in {"-c", "--command"} and i + 1 < len(argv):
            return argv[i + 1]
        if w.startswith("--command="):
            return w.partition("=")[2]
    return None


def _shell_script(argv: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (also ``bash -lc``, ``bash -euxc``, ``su -c``), else
    None."""
    if argv and argv[0].rsplit("/", 1)[-1] in {"su", "runuser"}:
        return _su_script(argv)
    if not argv or argv[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    for i, w in enumerate(argv[1:], start=1):
        if w.startswith("-") and not w.startswith("--") and "c" in w[1:]:
            return argv[i + 1] if i + 1 < len(argv) else None
        if w in {"-o", "+o"}:  # bash -o pipefail -c '...'
            continue
        if not w.startswith(("-", "+")) and argv[i - 1] not in {"-o", "+o"}:
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
    """(line, words, whether a pipe follows, stdout, operator after) of each simple command
    of *text*. Cached: the rules look at the same RUN text several times, and tokenising
    dominates."""
    return tuple(_segments(tokenize(text), depth))


#: the program of a :class:`SimpleCommand` that stands for a form the reader could not take
#: apart (``eval "$CMD"`` of a variable it does not know): its second word says what
UNREAD = "\0unread"


def commands(text: str, *, depth: int = 0,
             env: Mapping[str, str] | None = None) -> list[SimpleCommand]:
    """The simple commands of *text*, in order, with their line numbers in *text*. The
    commands are shared between callers (cached): read them, do not change them. *env*
    (the image's ENV) resolves the variables ``eval``/``sh -c``/``$CMD`` run that *text*
    does not assign itself. A form that cannot be read comes as a command named
    :data:`UNREAD` (see :func:`unread`); the other callers never match it."""
    items = tuple(sorted(env.items())) if env else ()
    return list(_commands(text, depth, items))


def unread(text: str, env: Mapping[str, str] | None = None) -> list[tuple[int, str]]:
    """(line, what) of each form in *text* the reader could not take apart: ``eval``,
    ``sh -c`` or a program held in a variable whose value is unknown."""
    return [(c.line, c.argv[1]) for c in commands(text, env=env) if c.argv[0] == UNREAD]


_WHOLE_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def _resolved(word: str, values: Mapping[str, str]) -> str | None:
    """*word* with its ``$NAME``/``${NAME}`` substituted from *values*; None when one is
    unknown."""
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        value = values.get(m.group(1))
        if value is None:
            missing = True
            return m.group(0)
        return value

    out = _WHOLE_VAR.sub(sub, word)
    return None if missing else out


def _known(script: str, values: Mapping[str, str]) -> str:
    """*script* with its variables substituted; as written when a variable is unknown but
    no command word is held in one (``sh -c "pip install $PKG"`` is still a pip install);
    "" when a command's own name is unknown (``eval "$CMD"``)."""
    if "$" not in script:
        return script
    resolved = _resolved(script, values)
    if resolved is not None:
        return resolved
    starts = [ws[0] for _l, ws, _p, _o, _op in _split(script) if ws]
    return "" if any(_WHOLE_VAR.fullmatch(w) for w in starts) else script


def _indirect(argv: list[str], values: Mapping[str, str]) -> tuple[str | None, str]:
    """(script, form) of a command that runs a script built from words: ``eval WORDS``,
    ``sh -c SCRIPT``, ``su -c SCRIPT``, ``$CMD args`` (a program in a variable); script None
    when the command is none of these, "" when its variables are unknown."""
    if argv[0] == "eval":
        return _known(" ".join(argv[1:]), values), "eval"
    script = _shell_script(argv)
    if script is not None:
        return _known(script, values), f"{argv[0].rsplit('/', 1)[-1]} -c"
    if _WHOLE_VAR.fullmatch(argv[0]):
        value = _resolved(argv[0], values)
        if value is not None and " " in value.strip():
            return _join_command(value, argv[1:]), "a command in a variable"
    return None, ""


def _join_command(held: str, args: list[str]) -> str:
    """A command line held in a variable (as it is: the shell splits it) and the arguments
    after it (quoted), as shell text."""
    return " ".join([held, *(shlex.quote(a) for a in args)])


#: a folder listed in a test of emptiness: ``$(ls -A /models)``, ``$(ls /models 2>/dev/null)``
_LISTING = re.compile(r"^\$\(\s*ls(?:\s+-\w+)*\s+([^\s)|;&<>-][^\s)|;&<>]*)")


class _Guards:
    """Which commands run only when a file is missing: the then-branch of
    ``if [ ! -f P ]``, the else-branch of ``if [ -d P ]``, the command after
    ``[ -e P ] ||``, ``test -d P ||`` or ``[ ! -s P ] &&``."""

    _TESTS = frozenset({"-f", "-e", "-d", "-s", "-r", "-L", "-h", "-x", "-a"})

    def __init__(self) -> None:
        #: per open ``if``: (path, whether its then-branch runs when the path is missing)
        self.frames: list[tuple[str, bool]] = []
        self.in_else: list[bool] = []
        self.next = ""

    @classmethod
    def test(cls, words: tuple[str, ...]) -> tuple[str, bool] | None:
        """(path, negated) of a file test ``[ ! -f P ]``, ``test -d P``, ``! [ -e P ]``."""
        ws = list(words[1:] if words[:1] in {("if",), ("elif",)} else words)
        negated = False
        while ws and ws[0] == "!":
            negated, ws = not negated, ws[1:]
        if not ws or ws[0] not in {"[", "[[", "test"}:
            return None
        inner = [w for w in ws[1:] if w not in {"]", "]]"}]
        if inner[:1] == ["!"]:
            negated, inner = not negated, inner[1:]
        if len(inner) == 2 and inner[0] in cls._TESTS:
            return inner[1], negated
        listed = _LISTING.match(inner[1]) if len(inner) == 2 and inner[0] in {"-z", "-n"} \
            else None
        if listed:  # [ -z "$(ls -A /models)" ]: the folder is empty
            return listed.group(1), negated != (inner[0] == "-z")
        return None

    def guard(self, words: tuple[str, ...], op: str) -> str:
        """The path that guards the command *words* (ended by *op*), or ""."""
        current, self.next = self.next, ""
        if words[:1] == ("else",) and self.frames:
            self.in_else[-1] = True
        i = 0
        while i < len(words) and words[i] in {"then", "else", "do"}:
            i += 1
        words = words[i:]
        head = words[0] if words else ""
        if head == "fi" and self.frames:
            self.frames.pop()
            self.in_else.pop()
            return ""
        found = self.test(words)
        if head in {"if", "elif"}:
            if head == "elif" and self.frames:
                self.frames.pop()
                self.in_else.pop()
            self.frames.append(found if found is not None else ("", False))
            self.in_else.append(False)
            return ""
        if found is not None:
            path, negated = found
            if (op == "||" and not negated) or (op == "&&" and negated):
                self.next = path
            return ""
        if current:
            if op == "&&":
                self.next = current
            return current
        for (path, missing_then), in_else in zip(reversed(self.frames), reversed(self.in_else),
                                                 strict=True):
            if path and missing_then != in_else:
                return path
        return ""


@lru_cache(maxsize=_CACHE)
def _commands(text: str, depth: int,
              env: tuple[tuple[str, str], ...] = ()) -> tuple[SimpleCommand, ...]:
    out: list[SimpleCommand] = []
    guards = _Guards()
    values: dict[str, str] | None = None
    for line_no, words, piped, stdout, op in _split(text, depth):
        guard = guards.guard(words, op)
        local: dict[str, str] = {}
        argv = _strip_wrappers(list(words), local)
        if not argv:
            continue
        if argv[0] == "eval" or _shell_script(argv) is not None or argv[0].startswith("$"):
            if values is None:
                values = {**dict(env), **assignments(text)}
            script, form = _indirect(argv, {**values, **local})
            if script == "" and form:
                out.append(SimpleCommand([UNREAD, f"{form} {' '.join(argv[1:])[:80]}".strip()
                                          if form == "eval" else f"{form} {argv[-1][:80]}"],
                                         local, line_no, piped, stdout))
                continue
            if script is not None and depth >= MAX_DEPTH:
                out.append(SimpleCommand([UNREAD, f"{form} nested more than {MAX_DEPTH} deep "
                                          "(servelab's bound)"], local, line_no, piped, stdout))
                continue
            if script is not None:
                for sub in _commands(script, depth + 1, env):
                    cmd = SimpleCommand(sub.argv, {**local, **sub.env}, line_no + sub.line - 1,
                                        sub.piped, sub.stdout)
                    cmd.guard = sub.guard or guard
                    out.append(cmd)
                continue
        cmd = SimpleCommand(normalise(argv), local, line_no, piped, stdout)
        cmd.guard = guard
        out.append(cmd)
    return tuple(out)


def assignments(text: str) -> dict[str, str]:
    """Shell variables *text* sets: ``NAME=value`` commands (``export`` included) and the
    ``NAME=value`` words before a command (``CMAKE_VERSION=3.22 sh deps.sh``, which the
    command's scripts see); last value wins; values are as written (no expansion)."""
    out: dict[str, str] = {}
    for _line_no, seg, _piped, _out, _op in _split(text):
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
