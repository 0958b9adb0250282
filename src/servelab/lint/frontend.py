"""The Dockerfile parser of today's BuildKit frontend, in Python.

A port of moby/buildkit's frontend/dockerfile/parser (parser.go, directives.go,
split_command.go, line_parsers.go) as of 2026: parser directives (``syntax``, ``escape``,
``check``, in any order, only before the first comment, blank line or instruction), line
continuations with the escape character (comment and blank lines inside one skipped),
builder flags, JSON and shell forms, ``ENV``/``LABEL``/``ARG`` words, ``ONBUILD``,
``HEALTHCHECK``, and heredocs on ``RUN``/``COPY``/``ADD`` (``<<EOF``, ``<< EOF``,
``<<-EOF``, ``<<"EOF"``/``<<'EOF'``, ``3<<EOF``, several on one line). What it returns has
the shape the PyPI ``dockerfile`` package gave (the command, its flags, its values, heredoc
bodies, first and last line), so the rest of lint reads either.

It never substitutes ARG values (:mod:`servelab.lint.words` does) and never runs code: a
linear pass over the lines. :class:`FrontendError` carries BuildKit's message and the line.
Features a builder older than the current frontend refuses are listed in
:attr:`Parsed.notes` (see docs/lint.md#how-dockerfiles-are-read).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from servelab.lint.words import WordError, _Lexer, split_words

#: the parser directives the current frontend knows; any other ``# key=value`` ends them
DIRECTIVES = frozenset({"syntax", "escape", "check"})
_DIRECTIVE = re.compile(r"([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*\Z")
_WHITESPACE = re.compile(r"[\t\v\f\r ]+")
_HEREDOC = re.compile(r"\A([0-9]*)<<(-?)[\t\n\f\r ]*([^<]*)\Z")
_LEADING_TABS = re.compile(r"^\t+", re.MULTILINE)
_HEREDOC_CMDS = frozenset({"add", "copy", "run"})
_WS = "[ \t\n\r]*"  # JSON's blanks
_STR = '"[^"\\\\\x00-\x1f]*"'
_SIMPLE_ARRAY = re.compile(rf"\[{_WS}(?:{_STR}{_WS}(?:,{_WS}{_STR}{_WS})*)?\]{_WS}\Z")
_SIMPLE_STRING = re.compile('"([^"\\\\\x00-\x1f]*)"')
_BLANK_HEREDOC = re.compile(r"<<[\t ]")
_SYNTAX = re.compile(r"(?:(?:docker\.io/)?docker/)?dockerfile(?::([\w.-]+))?\Z")
_SYNTAX_VERSION = re.compile(r"1\.(\d+)")
_NOT_STRINGS = "when using JSON array syntax, arrays must be comprised of strings only"


class FrontendError(Exception):
    """BuildKit's parser refuses the file: its message and the 1-based line."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class Heredoc(NamedTuple):
    """One heredoc: its terminator, its body as the build sees it (leading tabs removed for
    ``<<-``), whether ``$`` is substituted in it (an unquoted terminator), its descriptor."""

    name: str
    content: str
    expand: bool = True
    chomp: bool = False
    fd: int = 0


class Command(NamedTuple):
    """One instruction as the parser gives it (the PyPI package's shape)."""

    cmd: str
    sub_cmd: str | None
    json: bool
    original: str
    start_line: int
    end_line: int
    flags: tuple[str, ...]
    value: tuple[str, ...]
    heredocs: tuple[Heredoc, ...]


class Directive(NamedTuple):
    name: str
    value: str
    line: int


class Parsed(NamedTuple):
    commands: list[Command]
    directives: list[Directive]
    escape: str
    #: (line, what): forms the current frontend reads that an older builder refuses
    notes: list[tuple[int, str]]


# -- lines -------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only (as Go's scanner), each with its newline."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _trim_newline(line: str) -> str:
    return line.rstrip("\r\n")


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


class _Directives:
    __slots__ = ("continuation", "done", "escape", "found", "seen")

    def __init__(self) -> None:
        self.done = False
        self.seen: set[str] = set()
        self.found: list[Directive] = []
        self.escape = "\\"
        self.continuation = _continuation("\\")

    def line(self, text: str, number: int) -> bool:
        """ParseLine: whether *text* (blanks already trimmed) is a parser directive."""
        if self.done:
            return False
        if not text.startswith("#"):
            self.done = True
            return False
        m = _DIRECTIVE.match(text[1:].lstrip())
        key = m.group(1).lower() if m else ""
        if key not in DIRECTIVES:
            self.done = True
            return False
        if key in self.seen:
            raise FrontendError(f"only one {key} parser directive can be used", number)
        self.seen.add(key)
        value = m.group(2) if m else ""
        self.found.append(Directive(key, value, number))
        if key == "escape":
            if value not in {"`", "\\"}:
                raise FrontendError(
                    f"invalid escape token '{value}' does not match ` or \\", number)
            self.escape = value
            self.continuation = _continuation(value)
        return True


def _continuation(escape: str) -> re.Pattern[str]:
    e = re.escape(escape)
    return re.compile(rf"([^{e}]){e}[ \t]*\Z|\A{e}[ \t]*\Z")


def _trim_continuation(line: str, d: _Directives) -> tuple[str, bool]:
    """(line without its continuation mark, whether the instruction ends here)."""
    m = d.continuation.search(line)
    if m is None:
        return line, True
    return line[:m.start()] + (m.group(1) or ""), False


# -- one instruction -----------------------------------------------------------------------


def _builder_flags(line: str, escape: str) -> tuple[str, list[str]]:
    """extractBuilderFlags: the leading ``--flag`` words and the rest of the line."""
    words: list[str] = []
    pos, n = 0, len(line)
    while True:
        while pos < n and line[pos].isspace():
            pos += 1
        if pos == n:
            return "", words
        if not line.startswith("--", pos):
            return line[pos:], words
        word, blank_ok, pos = _word(line, pos, escape, flag=True)
        if pos < n and word == "--":
            return line[pos:], words
        if word != "--" and (blank_ok or word):
            words.append(word)


def _word(text: str, pos: int, escape: str, *, flag: bool) -> tuple[str, bool, int]:
    """One word from *pos* to a blank outside quotes: (word, whether it had quotes, end).

    A flag word (extractBuilderFlags) drops its quotes and escapes; a parseWords word keeps
    them (an escape inside single quotes is plain text there)."""
    buf: list[str] = []
    quote = ""
    blank_ok = False
    n = len(text)
    while pos < n:
        ch = text[pos]
        if quote:
            if ch == quote:
                quote = ""
                if flag:
                    pos += 1
                    continue
            elif ch == escape and (flag or quote != "'"):
                if pos + 1 == n:
                    quote = ""
                    pos += 1
                    continue
                if not flag:
                    buf.append(ch)
                pos += 1
                ch = text[pos]
            buf.append(ch)
            pos += 1
            continue
        if ch.isspace():
            break
        if ch in "'\"":
            quote, blank_ok = ch, True
            if flag:
                pos += 1
                continue
        pos, ch = _escaped(text, pos, escape, buf, keep=not flag)
        buf.append(ch)
        pos += 1
    return "".join(buf), blank_ok, pos


def _escaped(text: str, pos: int, escape: str, buf: list[str], *, keep: bool) -> tuple[int, str]:
    """(position, character) of the character at *pos*, or of the one an escape there
    protects (the escape itself kept in *buf* when *keep*); an escape at the very end is
    dropped (the empty character)."""
    ch = text[pos]
    if ch != escape:
        return pos, ch
    if pos + 1 == len(text):
        return pos, ""
    if keep:
        buf.append(ch)
    return pos + 1, text[pos + 1]


def _parse_words(rest: str, escape: str) -> list[str]:
    """parseWords: blank-separated words, quotes and escapes kept."""
    words: list[str] = []
    pos, n = 0, len(rest)
    while True:
        while pos < n and rest[pos].isspace():
            pos += 1
        if pos == n:
            return words
        word, blank_ok, pos = _word(rest, pos, escape, flag=False)
        if blank_ok or word:
            words.append(word)


def _json(rest: str) -> list[str] | None:
    """parseJSON: the strings of a JSON array, None when *rest* is not one."""
    rest = rest.lstrip()
    if not rest.startswith("["):
        return None
    if _SIMPLE_ARRAY.match(rest):  # no escapes: the strings as written (json not imported)
        return _SIMPLE_STRING.findall(rest)
    import json

    try:
        data: Any = json.loads(rest)
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    if not all(isinstance(x, str) for x in data):
        raise WordError(_NOT_STRINGS)
    return data


def _name_val(rest: str, key: str, escape: str) -> list[str]:
    words = _parse_words(rest, escape)
    if not words:
        return []
    if "=" not in words[0]:
        parts = _WHITESPACE.split(rest, maxsplit=1)
        if len(parts) < 2:
            raise WordError(f"{key} must have two arguments")
        return [parts[0], parts[1]]
    out: list[str] = []
    for word in words:
        if "=" not in word:
            raise WordError(f"Syntax error - can't find = in {word!r}. "
                            "Must be of the form: name=value")
        out += word.split("=", 1)
    return out


def _values(cmd: str, rest: str, escape: str) -> tuple[list[str], bool]:
    """The values of one instruction and whether it is in JSON form."""
    if cmd in {"run", "cmd", "entrypoint", "shell"}:
        if not rest:
            return [], False
        js = _json(rest)
        return (js, True) if js is not None else ([rest], False)
    if cmd in {"add", "copy", "volume"}:
        js = _json(rest)
        if js is not None:
            return js, True
        return (_WHITESPACE.split(rest) if rest else []), False
    if cmd in {"expose", "from"}:
        return (_WHITESPACE.split(rest) if rest else []), False
    if cmd in {"env", "label"}:
        return _name_val(rest, cmd.upper(), escape), False
    if cmd == "arg":
        return _parse_words(rest, escape), False
    if cmd in {"maintainer", "stopsignal", "user", "workdir"}:
        return ([rest] if rest else []), False
    if cmd == "healthcheck":
        return _health(rest, escape)
    return [""], False  # parseIgnore: an unknown instruction


def _health(rest: str, escape: str) -> tuple[list[str], bool]:
    parts = rest.split(None, 1)
    if not parts or rest[:1].isspace():
        return [], False
    values, js = _values("cmd", parts[1] if len(parts) > 1 else "", escape)
    return [parts[0], *values], js


def _split_command(line: str, escape: str) -> tuple[str, list[str], str]:
    cmdline = _WHITESPACE.split(line.strip(), maxsplit=1)
    args, flags = "", list[str]()
    if len(cmdline) == 2:
        args, flags = _builder_flags(cmdline[1], escape)
    return cmdline[0], flags, args.strip()


class _Node(NamedTuple):
    cmd: str
    sub_cmd: str | None
    flags: list[str]
    values: list[str]
    json: bool


def _node(line: str, escape: str, *, sub: bool = False) -> _Node:
    cmd, flags, rest = _split_command(line, escape)
    low = cmd.lower()
    if low == "onbuild" and not sub:
        if not rest:
            return _Node(cmd, None, flags, [], False)
        child = _node(rest, escape, sub=True)
        return _Node(cmd, child.cmd, flags, child.values, child.json)
    values, js = _values(low, rest, escape)
    return _Node(cmd, None, flags, values, js)


# -- heredocs ------------------------------------------------------------------------------


def heredoc_word(word: str) -> Heredoc | None:
    """ParseHeredoc: the heredoc one word of an instruction opens (``<<EOF``, ``<< EOF``,
    ``<<-'EOF'``, ``2<<EOF``), or None; WordError for an unterminated quote."""
    m = _HEREDOC.match(word)
    if m is None or not m.group(3):
        return None
    rest = m.group(3)
    cooked = _heredoc_lexer(rest, raw=False)
    words = cooked.stop_on("", False)[1]
    if len(words) != 1:
        return None
    raw_words = _heredoc_lexer(rest, raw=True).stop_on("", False)[1]
    quotes = words[0].count("'") + words[0].count('"')
    raw_quotes = raw_words[0].count("'") + raw_words[0].count('"') if raw_words else -1
    return Heredoc(words[0], "", expand=quotes == raw_quotes, chomp=m.group(2) == "-",
                   fd=int(m.group(1) or 0))


def _heredoc_lexer(text: str, *, raw: bool) -> _Lexer:
    lex = _Lexer(text, lambda _n: None, "\\", raw_quotes=raw, raw_escapes=False)
    lex.skip_unset = lex.want_words = True
    return lex


def _heredocs_of(line: str) -> list[Heredoc]:
    try:
        words = split_words(line, "\\")
    except WordError:  # BuildKit ignores the line's lexing error here
        return []
    out = []
    for word in words:
        h = heredoc_word(word)
        if h is not None:
            out.append(h)
    return out


def _chomp(text: str) -> str:
    return _LEADING_TABS.sub("", text)


def _directive_needs(r: _Reader) -> None:
    found = r.d.found
    check = next((d for d in found if d.name == "check"), None)
    later = [d for d in found if check is not None and d.line > check.line]
    if check is not None and later:
        r.needs.append((check.line, 8, f"# check= before # {later[0].name}="))


#: what an older frontend does instead, by the first version that reads the form
_INSTEAD = {8: "stops reading parser directives at # check= and ignores the ones after it",
            16: "runs the heredoc's body lines as instructions",
            19: "refuses the flag (unknown flag: --exclude)",
            20: "refuses the flag (unknown flag: --parents)"}
#: the flags of COPY/ADD a later frontend added, and the 1.x minor version that reads them
#: (both in the labs channel since 1.7-labs)
_NEW_FLAGS = {"--exclude": 19, "--parents": 20}
_LABS_SINCE = {19: 7, 20: 7}


def _labs(found: list[Directive]) -> bool:
    syntax = next((d.value for d in found if d.name == "syntax"), "")
    return syntax.split("@", 1)[0].strip().endswith("-labs")


def _frontend_minor(found: list[Directive]) -> int | None:
    """The Dockerfile frontend 1.x minor version a ``# syntax=docker/dockerfile:...``
    directive asks for (a large number for ``1``, ``latest`` and ``labs``: the newest), or
    None when the builder's own frontend reads the file."""
    syntax = next((d.value for d in found if d.name == "syntax"), "")
    m = _SYNTAX.match(syntax.split("@", 1)[0].strip())
    if m is None:
        return None
    tag = m.group(1) or "latest"
    if tag in {"1", "latest", "labs", "1-labs"}:
        return 1 << 30
    v = _SYNTAX_VERSION.match(tag)
    return int(v.group(1)) if v else None


def _notes(r: _Reader) -> list[tuple[int, str]]:
    minor = _frontend_minor(r.d.found)
    labs = _labs(r.d.found)
    out = []
    for line, needed, what in r.needs:
        if minor is not None and (minor >= needed or (
                labs and minor >= _LABS_SINCE.get(needed, needed))):
            continue
        out.append((line, f"{what}: read by the Dockerfile frontend 1.{needed} and later "
                          f"(or with # syntax=docker/dockerfile:1); an older builder "
                          f"{_INSTEAD[needed]}"))
    return out


# -- the file ------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("d", "i", "lines", "needs")

    def __init__(self, text: str) -> None:
        self.lines = _lines(text)
        if self.lines and self.lines[0].startswith("\ufeff"):
            self.lines[0] = self.lines[0][1:]
        self.i = 0
        self.d = _Directives()
        #: (line, Dockerfile frontend 1.x minor version that first reads it, what)
        self.needs: list[tuple[int, int, str]] = []

    def process(self, raw: str, *, strip: bool) -> str | None:
        """processLine: the line without its newline (and leading blanks), None for a
        comment; records a parser directive."""
        token = _trim_newline(raw)
        if strip:
            token = token.lstrip()
        self.d.line(token, self.i + 1)
        return None if _is_comment(token) else token

    def instruction(self) -> Command | None:
        start = self.i + 1
        token = self.process(self.lines[self.i], strip=True)
        self.i += 1
        text, end_of_line = _trim_continuation(token or "", self.d)
        if end_of_line and not text:
            return None
        buf = [text]
        while not end_of_line and self.i < len(self.lines):
            raw = self.lines[self.i]
            token = self.process(raw, strip=False)
            self.i += 1
            if _is_comment(raw) or not (token or "").strip():
                continue
            text, end_of_line = _trim_continuation(token or "", self.d)
            buf.append(text)
        line = "".join(buf)
        try:
            node = _node(line, self.d.escape)
        except WordError as e:
            raise FrontendError(str(e), start) from None
        heredocs: tuple[Heredoc, ...] = ()
        original = line
        kind = (node.sub_cmd or node.cmd).lower()
        if kind in _HEREDOC_CMDS and not node.json and "<<" in line:
            try:
                found = _heredocs_of(line)
            except WordError as e:
                raise FrontendError(str(e), start) from None
            heredocs = tuple(self._body(h, start) for h in found)
            original += "".join(f"\n{h.content}{h.name}" for h in heredocs) + (
                "\n" if heredocs else "")
            if heredocs and _BLANK_HEREDOC.search(line):
                self.needs.append((start, 16, "a heredoc with a blank after <<"))
        if kind in {"add", "copy"}:
            for flag in dict.fromkeys(f.split("=", 1)[0] for f in node.flags):
                if flag in _NEW_FLAGS:
                    self.needs.append((start, _NEW_FLAGS[flag], f"{kind.upper()} {flag}"))
        return Command(node.cmd.upper(), node.sub_cmd.upper() if node.sub_cmd else None,
                       node.json, original, start, self.i, tuple(node.flags),
                       tuple(node.values), heredocs)

    def _body(self, h: Heredoc, start: int) -> Heredoc:
        parts: list[str] = []
        while self.i < len(self.lines):
            raw = self.lines[self.i]
            self.i += 1
            end = _trim_newline(raw)
            if (end.lstrip("\t") if h.chomp else end) == h.name:
                body = "".join(parts)
                return h._replace(content=_chomp(body) if h.chomp else body)
            parts.append(raw)
        raise FrontendError("unterminated heredoc", start)


def directives(lines: list[str]) -> _Directives:
    """The parser directives at the top of *lines* (``.escape``, ``.found``); an invalid
    one ends them here (the parser itself reports it)."""
    d = _Directives()
    for n, raw in enumerate(lines, start=1):
        token = _trim_newline(raw).lstrip()
        if n == 1:
            token = token.removeprefix("\ufeff")
        try:
            if not d.line(token, n):
                break
        except FrontendError:
            break
    return d


def parse(text: str) -> Parsed:
    """Every instruction of *text*; FrontendError where BuildKit's parser stops."""
    r = _Reader(text)
    commands: list[Command] = []
    while r.i < len(r.lines):
        c = r.instruction()
        if c is not None:
            commands.append(c)
    if not commands:
        raise FrontendError("file with no instructions", len(r.lines))
    _directive_needs(r)
    return Parsed(commands, r.d.found, r.d.escape, _notes(r))
