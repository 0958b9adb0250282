"""Dockerfile words: quote removal and ``$VAR`` substitution as BuildKit does it.

The parser keeps ``ARG``/``ENV`` values and ``FROM`` references as written. This module is
a port of BuildKit's shell lexer (frontend/dockerfile/shell/lex.go): ``$NAME``, ``${NAME}``
and every word operator (``:-`` ``-`` ``:+`` ``+`` ``:?`` ``?`` ``#`` ``##`` ``%`` ``%%``
``/`` ``//``, with BuildKit's ``*`` and ``?`` patterns), single quotes that protect, double
quotes that do not, and the escape character (``\\`` or the ``escape`` directive's backtick).
A name with no value is reported, not guessed; a word BuildKit refuses is reported with
its message, never raised. See docs/lint.md#how-dockerfiles-are-read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Lookup = Callable[[str], "str | None"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPS = (":-", ":+", ":?", "-", "+", "?")

#: Build arguments BuildKit's frontend sets itself in the global scope (dockerfile2llb's
#: defaultArgs; the values of a linux/amd64 build).
PREDEFINED: dict[str, str] = {
    "TARGETPLATFORM": "linux/amd64",
    "TARGETOS": "linux",
    "TARGETARCH": "amd64",
    "TARGETVARIANT": "",
    "BUILDPLATFORM": "linux/amd64",
    "BUILDOS": "linux",
    "BUILDARCH": "amd64",
    "BUILDVARIANT": "",
    "BUILDOSVERSION": "",
    "TARGETOSVERSION": "",
    #: the --target stage, "default" without one (servelab judges the last stage)
    "TARGETSTAGE": "default",
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
    """The substituted text, the names that had no value, and BuildKit's error when it
    would fail the build on this word (``${V?msg}`` with V unset, a bad substitution)
    (a plain class: cheap to define at start-up)."""

    __slots__ = ("error", "unresolved", "value")

    def __init__(self, value: str, unresolved: list[str] | None = None,
                 error: str | None = None) -> None:
        self.value = value
        self.unresolved: list[str] = unresolved if unresolved is not None else []
        self.error = error


class WordError(Exception):
    """BuildKit refuses the word (its message)."""


_EOF = ""
_SPECIAL = frozenset("@*#?-$!0")
_BLANK = frozenset("\t\r ")


class _Lexer:
    """BuildKit's shell lexer (frontend/dockerfile/shell/lex.go), one word at a time.

    ``raw_quotes`` keeps quote characters (what is inside single quotes is still not
    substituted); ``raw_escapes`` keeps escape characters; ``keep_escaped_dollar`` is
    servelab's :func:`expand` mode: escapes kept except before ``$``.
    """

    __slots__ = ("escape", "i", "keep_dollar", "lookup", "n", "raw_escapes", "raw_quotes",
                 "skip_quotes", "skip_unset", "text", "unresolved", "want_words")

    def __init__(self, text: str, lookup: Lookup, escape: str, *, raw_quotes: bool,
                 raw_escapes: bool, keep_dollar: bool = False) -> None:
        self.text = text
        self.i = 0
        self.n = len(text)
        self.lookup = lookup
        self.escape = escape
        self.raw_quotes = raw_quotes
        self.raw_escapes = raw_escapes
        self.keep_dollar = keep_dollar
        #: SkipUnsetEnv: a name without a value stays as written
        self.skip_unset = False
        #: whether the blank-split words are wanted (ProcessWords), not only the text
        self.want_words = False
        #: SkipProcessQuotes: quotes are plain characters (``$`` inside them substituted)
        self.skip_quotes = False
        self.unresolved: list[str] = []

    def peek(self) -> str:
        return self.text[self.i] if self.i < self.n else _EOF

    def next(self) -> str:
        if self.i >= self.n:
            return _EOF
        self.i += 1
        return self.text[self.i - 1]

    # -- words -----------------------------------------------------------------------
    def stop_on(self, stop: str, raw_escapes: bool) -> tuple[str, list[str]]:
        """processStopOn: the text up to *stop* (consumed), and its blank-split words."""
        saved, self.raw_escapes = self.raw_escapes, raw_escapes
        try:
            return self._stop_on(stop)
        finally:
            self.raw_escapes = saved

    def _stop_on(self, stop: str) -> tuple[str, list[str]]:
        result: list[str] = []
        w = _Words() if self.want_words else _NO_WORDS
        plain = None if self.want_words else _plain_run(self.escape, stop)
        while self.i < self.n:
            if plain is not None:  # copy text without special characters in one piece
                m = plain.match(self.text, self.i)
                if m is not None and m.end() > self.i:
                    result.append(m.group())
                    self.i = m.end()
                    continue
            ch = self.text[self.i]
            if stop and ch == stop:
                self.i += 1
                return "".join(result), w.done()
            if ch in "'\"" and self.skip_quotes:
                self.i += 1
                w.add_char(ch)
                result.append(ch)
                continue
            if ch in "$<'\"":
                tmp = self._special(ch)
                result.append(tmp)
                if ch == "$":
                    w.add_string(tmp)
                else:
                    w.add_raw(tmp)
                continue
            self.i += 1
            if ch != self.escape:
                w.add_char(ch)
                result.append(ch)
            elif not self._escaped(ch, w, result):
                break
        if stop:
            raise WordError(f"unexpected end of statement while looking for matching {stop}")
        return "".join(result), w.done()

    def _special(self, ch: str) -> str:
        if ch == "$":
            return self.dollar()
        if ch == "<":
            return self.heredoc()
        return self.single() if ch == "'" else self.double()

    def _escaped(self, escape: str, w: _Words, result: list[str]) -> bool:
        """The character an escape protects, added to *w* and *result* (the escape too in
        raw mode); False at the end of the text."""
        if self.raw_escapes and not (self.keep_dollar and self.peek() == "$"):
            w.add_raw(escape)
            result.append(escape)
        ch = self.next()
        if ch == _EOF:
            return False
        w.add_raw(ch)
        result.append(ch)
        return True

    def single(self) -> str:
        start = self.i
        end = self.text.find("'", start + 1)
        if end < 0:
            raise WordError("unexpected end of statement while looking for matching "
                            "single-quote")
        self.i = end + 1
        return self.text[start:end + 1] if self.raw_quotes else self.text[start + 1:end]

    def double(self) -> str:
        out = [self.next()] if self.raw_quotes else []
        if not self.raw_quotes:
            self.next()
        while True:
            ch = self.peek()
            if ch == _EOF:
                raise WordError("unexpected end of statement while looking for matching "
                                "double-quote")
            if ch == '"':
                self.next()
                if self.raw_quotes:
                    out.append(ch)
                return "".join(out)
            if ch == "$":
                out.append(self.dollar())
                continue
            ch = self.next()
            if ch == self.escape:
                if self.raw_escapes and not (self.keep_dollar and self.peek() == "$"):
                    out.append(ch)
                nxt = self.peek()
                if nxt == _EOF:
                    continue
                if nxt in {'"', "$", self.escape}:
                    ch = self.next()
            out.append(ch)

    def heredoc(self) -> str:
        self.next()
        if self.peek() != "<":
            return "<"
        self.next()
        start = self.i
        while self.peek() in _BLANK and self.peek() != _EOF:
            self.i += 1
        return "<<" + self.text[start:self.i]

    # -- substitution ----------------------------------------------------------------
    def name(self) -> str:
        start = self.i
        if self.i < self.n and self.text[self.i].isdecimal():
            while self.i < self.n and self.text[self.i].isdecimal():
                self.i += 1
            return self.text[start:self.i]
        if self.i < self.n and self.text[self.i] in _SPECIAL:
            self.i += 1
            return self.text[start:self.i]
        while self.i < self.n and (self.text[self.i].isalnum() or self.text[self.i] == "_"):
            self.i += 1
        return self.text[start:self.i]

    def get(self, name: str) -> str | None:
        return self.lookup(name)

    def dollar(self) -> str:
        self.next()
        if self.peek() != "{":
            name = self.name()
            if not name:
                return "$"
            value = self.get(name)
            if value is None:
                if self.skip_unset:
                    return "$" + name
                self.unresolved.append(name)
            return value or ""
        self.next()
        if self.peek() == _EOF:
            raise WordError("syntax error: missing '}'")
        if self.peek() in "{}:":
            raise WordError("syntax error: bad substitution")
        name = self.name()
        ch = self.next()
        if ch == "}":
            value = self.get(name)
            if value is None:
                if self.skip_unset:
                    return "${" + name + "}"
                self.unresolved.append(name)
            return value or ""
        if ch == "/":
            return self._replace(name)
        colon = ch == ":"
        op = ch + self.next() if colon else ch
        if op[-1:] not in {"+", "-", "?", "#", "%"} or (colon and op[-1] in "#%"):
            raise WordError(f"unsupported modifier ({op or 'end of text'}) in substitution")
        return self._modifier(name, op)

    def _word(self, stop: str, raw_escapes: bool, what: str) -> str:
        try:
            return self.stop_on(stop, raw_escapes)[0]
        except WordError:
            if self.peek() == _EOF:
                raise WordError(f"syntax error: missing {what}") from None
            raise

    def _modifier(self, name: str, op: str) -> str:
        mark = len(self.unresolved)
        word = self._word("}", op[-1] in "#%", "'}'")
        used_word = word
        value = self.get(name)
        if value is None and self.skip_unset:
            return "${" + name + op + word + "}"
        null_unset = op.startswith(":")
        empty = value is None or (null_unset and value == "")
        kind = op[-1]
        if kind == "-":
            keep = empty
            out = word if empty else value or ""
        elif kind == "+":
            keep = not empty
            out = "" if empty else used_word
        elif kind == "?":
            del self.unresolved[mark:]
            if empty:
                self.unresolved.append(name)
                unset = "unset" if value is None else "empty"
                raise WordError(f"{name}: {word or 'is not allowed to be ' + unset}")
            return value or ""
        else:  # % and #: trim a suffix or prefix
            del self.unresolved[mark:]
            if value is None:
                self.unresolved.append(name)
            greedy = word[:1] == kind
            pattern = word[1:] if greedy else word
            trim = _trim_suffix if kind == "%" else _trim_prefix
            return trim(pattern, value or "", greedy)
        if not keep:
            del self.unresolved[mark:]
        return out

    def _replace(self, name: str) -> str:
        every = self.peek() == "/"
        if every:
            self.next()
        mark = len(self.unresolved)
        pattern = self._word("/", True, "'/' in ${}")
        replacement = self._word("}", True, "'}'")
        del self.unresolved[mark:]  # BuildKit substitutes both, a missing one is ""
        value = self.get(name)
        if value is None:
            if self.skip_unset:
                return "${" + name + "/" + pattern + "/" + replacement + "}"
            self.unresolved.append(name)
            return ""
        regex = _glob_regex(pattern, greedy=True, anchored=False)
        if every:
            return regex.sub(lambda _m: replacement, value)
        m = regex.search(value)
        return value if m is None else value[:m.start()] + replacement + value[m.end():]


class _Words:
    """BuildKit's wordsStruct: blank-split words, quotes and escapes kept together."""

    __slots__ = ("buf", "in_word", "words")

    def __init__(self) -> None:
        self.buf: list[str] = []
        self.words: list[str] = []
        self.in_word = False

    def add_char(self, ch: str) -> None:
        if ch.isspace():
            if self.in_word and self.buf:
                self.words.append("".join(self.buf))
                self.buf.clear()
                self.in_word = False
        else:
            self.add_raw(ch)

    def add_raw(self, text: str) -> None:
        self.buf.append(text)
        self.in_word = True

    def add_string(self, text: str) -> None:
        for ch in text:
            self.add_char(ch)

    def done(self) -> list[str]:
        if self.buf and "".join(self.buf):
            self.words.append("".join(self.buf))
            self.buf.clear()
        return self.words


class _NoWords(_Words):
    """Words not wanted (ProcessWord): nothing kept."""

    def add_char(self, ch: str) -> None:
        pass

    def add_raw(self, text: str) -> None:
        pass

    def add_string(self, text: str) -> None:
        pass


_NO_WORDS = _NoWords()
_PLAIN_RUNS: dict[tuple[str, str], re.Pattern[str]] = {}


def _plain_run(escape: str, stop: str) -> re.Pattern[str]:
    """Characters the lexer copies as they are (no substitution, quote, escape or stop)."""
    key = (escape, stop)
    if key not in _PLAIN_RUNS:
        _PLAIN_RUNS[key] = re.compile("[^" + re.escape("$<'\"" + escape + stop) + "]+")
    return _PLAIN_RUNS[key]


def _glob_regex(pattern: str, *, greedy: bool, anchored: bool) -> re.Pattern[str]:
    """convertShellPatternToRegex: ``*`` and ``?`` are wildcards, ``\\*``, ``\\?`` and
    ``\\\\`` literal; ``[`` is literal (BuildKit has no bracket expressions); any other
    escaped character is an error."""
    out = ["^"] if anchored else []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*" if greedy else ".*?")
        elif c == "?":
            out.append(".")
        elif c == "\\":
            if i < n and pattern[i] in "}/":
                continue
            nxt = pattern[i] if i < n else ""
            i += 1
            if nxt not in {"*", "?", "\\"}:
                raise WordError(f"invalid pattern ({pattern}) in substitution: "
                                f"invalid escape '\\{nxt}'")
            out.append(re.escape(nxt))
        else:
            out.append(re.escape(c))
    return re.compile("".join(out))  # as Go's regexp: "." does not match a newline


def _trim_prefix(pattern: str, value: str, greedy: bool) -> str:
    m = _glob_regex(pattern, greedy=greedy, anchored=True).search(value)
    return value if m is None else value[m.end():]


def _reverse_pattern(pattern: str) -> str:
    """A pattern read backwards, an escape kept before the character it escapes."""
    out: list[str] = []
    i, last = 0, len(pattern) - 1
    while i <= last:
        if pattern[i] == "\\" and i != last:
            out.append(pattern[i:i + 2])
            i += 2
        else:
            out.append(pattern[i])
            i += 1
    return "".join(reversed(out))


def _trim_suffix(pattern: str, value: str, greedy: bool) -> str:
    return _trim_prefix(_reverse_pattern(pattern), value[::-1], greedy)[::-1]


_PLAIN = re.compile(r"[^$'\"<`\\]*")


def _run(text: str, lookup: Lookup, escape: str, *, raw: bool) -> Expansion:
    if _PLAIN.fullmatch(text):
        return Expansion(text)
    lex = _Lexer(text, lookup, escape, raw_quotes=raw, raw_escapes=raw, keep_dollar=raw)
    try:
        value = lex.stop_on(_EOF, raw)[0]
    except WordError as e:
        return Expansion("", lex.unresolved, str(e))
    return Expansion(value, lex.unresolved)


def expand(text: str, lookup: Lookup, escape: str = "\\") -> Expansion:
    """Substitute variables in *text* with all of BuildKit's forms (``$V``, ``${V}``,
    ``${V:-w}`` ``${V-w}`` ``${V:+w}`` ``${V+w}`` ``${V:?w}`` ``${V?w}`` ``${V#p}``
    ``${V##p}`` ``${V%p}`` ``${V%%p}`` ``${V/p/r}`` ``${V//p/r}``), keeping quotes and
    escapes (but not an escape before ``$``) for :func:`unquote`; nothing inside single
    quotes is substituted. Names without a value that decide the result land in
    ``unresolved``; a word BuildKit refuses sets ``error``."""
    return _run(text, lookup, escape, raw=True)


def process_word(text: str, lookup: Lookup, escape: str = "\\") -> Expansion:
    """BuildKit's ProcessWord: *text* substituted, quotes removed and escapes applied, as
    ``FROM``, ``ARG``, ``ENV``, ``WORKDIR``... values are."""
    return _run(text, lookup, escape, raw=False)


def expand_heredoc(text: str, lookup: Lookup) -> Expansion:
    """A ``COPY``/``ADD`` heredoc's body as BuildKit writes it when its terminator is not
    quoted (ExpandRaw): ``$`` substituted everywhere, quotes included (SkipProcessQuotes),
    the ``\\`` escape applied whatever ``# escape=`` says, a name without a value empty."""
    if _PLAIN.fullmatch(text):
        return Expansion(text)
    lex = _Lexer(text, lookup, "\\", raw_quotes=False, raw_escapes=False)
    lex.skip_quotes = True
    try:
        value = lex.stop_on(_EOF, False)[0]
    except WordError as e:
        return Expansion("", lex.unresolved, str(e))
    return Expansion(value, lex.unresolved)


def split_words(text: str, escape: str = "\\") -> list[str]:
    """BuildKit's ProcessWords with raw quotes and escapes and no substitution (what the
    parser uses to find heredoc words): blank-separated words, quotes kept."""
    lex = _Lexer(text, _unset, escape, raw_quotes=True, raw_escapes=True)
    lex.skip_unset = lex.want_words = True
    return lex.stop_on(_EOF, True)[1]


def _unset(_name: str) -> str | None:
    return None


def references(text: str, name: str) -> bool:
    """Whether *text* refers to variable *name* (``$NAME`` or ``${NAME...}``)."""
    return (
        re.search(r"\$(\{" + re.escape(name) + r"\b|" + re.escape(name) + r"\b)", text) is not None
    )
