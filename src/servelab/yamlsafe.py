"""A careful YAML reader: positions for every value, and clear errors for hostile input.

* every mapping key and value gets its 1-based line and column, keyed by JSON path;
* duplicate keys are errors (PyYAML silently keeps the last one);
* alias expansion is capped, per document (:data:`MAX_VALUES`) and per file across all its
  documents (:data:`MAX_ALIAS_VALUES`), so a "billion laughs" document, or a file of many
  documents each just under the first cap, fails fast, at the line where the cap is crossed;
* nesting is capped (:data:`MAX_DEPTH`), so a deeply nested document fails fast too;
* a value its tag cannot take (``!!int abc``, ``!!bool maybe``, a 5000-digit integer) and
  NaN/infinity (``.nan``, ``.inf``: JSON Schema and Kubernetes know no such numbers) are
  errors with the line and column;
* files are read by :mod:`servelab.textio` (regular files or ``-`` only, a size cap, UTF-8);
  non-UTF-8 bytes, oversized files, empty and comment-only files are reported with a fix;
* an unrendered Helm template (``{{ ... }}``) that fails to parse gets a hint to render it;
* timestamps stay strings (JSON Schema knows no dates).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servelab.errors import InputError
from servelab.textio import TEXT_BYTES, Limit, decode
from servelab.textio import read_text as _read_text

__all__ = ["MAX_ALIAS_VALUES", "MAX_DEPTH", "MAX_VALUES", "Document", "JsonPath", "Position",
           "decode", "embedded_documents", "load_documents", "load_file", "read_text"]

MAX_BYTES = TEXT_BYTES.default
#: Values built from one document, aliases expanded. A billion-laughs bomb blows past it.
MAX_VALUES = 200_000
#: Values that aliases add (beyond the values written) in one file, all its documents
#: together: a file of many documents, each a bomb just under MAX_VALUES, stops here.
MAX_ALIAS_VALUES = 200_000
#: Nesting of mappings and sequences (Kubernetes objects nest about 20 deep).
MAX_DEPTH = 100
HELM_HINT = (
    "this looks like an unrendered Helm template ({{ ... }}): render it first, e.g. "
    "helm template RELEASE CHART | servelab k8s-check -"
)

JsonPath = tuple[str | int, ...]


@dataclass
class Position:
    line: int
    column: int


@dataclass
class Document:
    """One YAML document with the positions of its values."""

    data: Any
    index: int
    line: int
    #: JSON path -> position of the value; for mapping entries also the key, under ("key",)+path
    positions: dict[JsonPath, Position] = field(default_factory=dict)
    key_positions: dict[JsonPath, Position] = field(default_factory=dict)
    #: the text the document was read from (for :meth:`string_line`)
    text: str = field(default="", repr=False)
    #: what aliases may still add in the file the document is of (shared by its documents
    #: and the YAML embedded in their strings)
    budget: list[int] = field(default_factory=lambda: [MAX_ALIAS_VALUES], repr=False)
    #: the YAML documents read from its strings (:func:`embedded_documents`), or why not
    embedded: dict[JsonPath, list[Document] | InputError] = field(default_factory=dict,
                                                                   repr=False)
    _lines: list[str] | None = field(default=None, repr=False)
    _starts: dict[JsonPath, tuple[list[int], dict[int, int]]] = field(default_factory=dict,
                                                                       repr=False)
    #: JSON path -> where a scalar that is not one plain line is written (block, folded,
    #: quoted or plain over several lines): its style, first and last (line, column), 0-based
    scalars: dict[JsonPath, _Scalar] = field(default_factory=dict, repr=False)

    def string_line(self, path: JsonPath, offset: int) -> int | None:
        """The file line (1-based) where line *offset* (1-based) of the string at *path* is
        written: a literal block (``|``) line by line, a folded block (``>``) and quoted or
        plain scalars over several lines as YAML folds them (one line break a space, each
        empty line a line break; in double quotes ``\\n`` a line break on the same line).
        A one-line scalar holds all its lines on its own line. None when *path* is no
        value of the document."""
        path = tuple(path)
        scalar = self.scalars.get(path)
        if scalar is None:
            return self.positions[path].line if path in self.positions else None
        if path not in self._starts:  # once per string: a script asks for every command
            if self._lines is None:
                self._lines = self.text.splitlines()
            starts = _line_starts(self._lines, scalar)
            self._starts[path] = (sorted(starts), starts)
        keys, starts = self._starts[path]
        k = bisect.bisect_right(keys, max(offset, 1)) - 1
        return starts[keys[k]] + 1 if k >= 0 else scalar.start[0] + 1

    def position(self, path: JsonPath) -> Position:
        """The position of *path*, or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self.positions:
                return self.positions[p]
            p = p[:-1]
        return self.positions.get((), Position(self.line, 1))

    def key_position(self, path: JsonPath) -> Position:
        return self.key_positions.get(tuple(path)) or self.position(path)


class _Scalar(NamedTuple):
    style: str | None
    start: tuple[int, int]
    end: tuple[int, int]


#: escapes of a double-quoted scalar that put a line break in its value (YAML, and so an
#: embedded document, counts CR LF as one, and NEL, LS and PS as breaks too)
_BREAK_ESCAPE = re.compile(r"\\(r\\n|x0[aAdD]|u000[aAdD]|u20(?:28|29)|x85|.)")
_BREAK_ESCAPES = frozenset({"n", "r", "N", "L", "P", "r\\n", "x0a", "x0A", "x0d", "x0D",
                            "u000a", "u000A", "u000d", "u000D", "u2028", "u2029", "x85"})


def _line_starts(lines: list[str], s: _Scalar) -> dict[int, int]:
    """{line k of the scalar's value: the 0-based file line where it starts}."""
    (l0, c0), (l1, c1) = s.start, s.end
    last = min(l1 if c1 else l1 - 1, len(lines) - 1)
    if s.style == "|":
        return {k: l0 + k for k in range(1, max(last - l0, 0) + 1)} or {1: l0}
    starts = {1: l0 + 1 if s.style == ">" else l0}
    cur, blanks, base, first, prev_more = 1, 0, -1, True, False
    for i in range(l0 + 1 if s.style == ">" else l0, last + 1):
        line = lines[i]
        seg = line[c0 if i == l0 else 0:c1 if i == l1 else len(line)]
        if s.style == ">":
            if not seg.strip():
                blanks += 1
                continue
            indent = len(seg) - len(seg.lstrip(" "))
            base = indent if base < 0 else base
            more = indent > base
            cur += blanks if first else blanks + (1 if more or prev_more else 0)
            first, prev_more, blanks = False, more, 0
            starts.setdefault(cur, i)
            continue
        if i > l0:
            if not seg.strip():
                blanks += 1
                continue
            cur, blanks = cur + blanks, 0
            starts.setdefault(cur, i)
        if s.style == '"':
            for m in _BREAK_ESCAPE.finditer(seg):
                if m.group(1) in _BREAK_ESCAPES:
                    cur += 1
                    starts.setdefault(cur, i)
    return starts


def read_text(path: Path, *, max_bytes: int | Limit = TEXT_BYTES, what: str = "file",
              stdin_ok: bool = False) -> str:
    """Read *path* (or ``-`` when *stdin_ok*) as UTF-8 text with :mod:`servelab.textio`'s
    checks: a regular file, under the size cap, UTF-8."""
    return _read_text(path, max_bytes=max_bytes, what=what, stdin_ok=stdin_ok)


class _Builder:
    def __init__(self, name: str, doc: Document) -> None:
        self.name = name
        self.doc = doc
        self.count = 0
        self.scalars = yaml.constructor.SafeConstructor()

    def _tick(self, node: Node) -> None:
        self.count += 1
        if self.count > MAX_VALUES:
            raise InputError(
                f"document expands to more than {MAX_VALUES} values "
                "(aliases nested like a 'billion laughs' bomb?)",
                file=self.name,
                line=node.start_mark.line + 1,
                hint="remove the nested anchors/aliases; servelab caps alias expansion",
            )

    def build(self, node: Node, path: JsonPath, record: bool = True) -> Any:
        self._tick(node)
        if len(path) > MAX_DEPTH:
            raise InputError(
                f"YAML nested more than {MAX_DEPTH} levels deep", file=self.name,
                line=node.start_mark.line + 1, column=node.start_mark.column + 1,
                hint="flatten the document; servelab caps nesting",
            )
        if record and path not in self.doc.positions:
            mark = node.start_mark
            self.doc.positions[path] = Position(mark.line + 1, mark.column + 1)
            if isinstance(node, ScalarNode) and (node.style in ("|", ">")
                                                 or node.end_mark.line != mark.line):
                end = node.end_mark
                self.doc.scalars[path] = _Scalar(node.style, (mark.line, mark.column),
                                                 (end.line, end.column))
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if node.tag not in _COLLECTION_TAGS:
            raise InputError(
                f"unknown YAML tag {node.tag!r}", file=self.name,
                line=node.start_mark.line + 1, column=node.start_mark.column + 1,
                hint="drop the tag: servelab reads plain YAML (the safe schema)",
            )
        if isinstance(node, SequenceNode):
            return [self.build(n, (*path, i), record) for i, n in enumerate(node.value)]
        if isinstance(node, MappingNode):
            return self._mapping(node, path, record)
        raise InputError("unsupported YAML node", file=self.name)  # pragma: no cover

    def _scalar(self, node: ScalarNode) -> Any:
        if node.tag in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"):
            return node.value
        try:
            value = self.scalars.construct_object(node)
        except yaml.constructor.ConstructorError as e:
            raise self._bad_value(node, str(e.problem)) from e
        except (ValueError, KeyError, IndexError, TypeError, OverflowError,
                AttributeError) as e:
            # a tag on a value it cannot take (!!int abc, !!bool maybe, !!float x), or an
            # integer longer than Python converts (4300 digits)
            raise self._bad_value(node, _why(node, e)) from e
        if isinstance(value, float) and not math.isfinite(value):
            raise self._bad_value(node, "NaN and infinity are not numbers servelab accepts",
                                  hint="write a finite number, or quote the value if you "
                                  "mean the text")
        return value

    def _bad_value(self, node: ScalarNode, why: str, hint: str | None = None) -> InputError:
        shown = node.value if len(node.value) <= 40 else node.value[:40] + "..."
        return InputError(
            f"cannot read value {shown!r}: {why}",
            file=self.name,
            line=node.start_mark.line + 1,
            column=node.start_mark.column + 1,
            hint=hint or "write a value of the type its tag names, or drop the tag "
            "(quote it to keep it text)",
        )

    def _mapping(self, node: MappingNode, path: JsonPath, record: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged.update(self._merge_source(value_node, path))
                continue
            key = self.build(key_node, (*path, "<key>"), record=False)
            if isinstance(key, (dict, list)):
                raise InputError(
                    "a mapping key must be a plain value",
                    file=self.name,
                    line=key_node.start_mark.line + 1,
                    column=key_node.start_mark.column + 1,
                )
            skey = str(key).lower() if isinstance(key, bool) else str(key)
            if skey in out:
                first = self.doc.key_positions.get((*path, skey))
                seen = f" (first at line {first.line})" if first else ""
                raise InputError(
                    f"duplicate key {skey!r}{seen}",
                    file=self.name,
                    line=key_node.start_mark.line + 1,
                    column=key_node.start_mark.column + 1,
                    hint="keep one of them: YAML parsers disagree on which one wins",
                )
            if record:
                self.doc.key_positions[(*path, skey)] = Position(
                    key_node.start_mark.line + 1, key_node.start_mark.column + 1
                )
            out[skey] = self.build(value_node, (*path, skey), record)
        for k, v in merged.items():
            out.setdefault(k, v)
        return out

    def _merge_source(self, node: Node, path: JsonPath) -> dict[str, Any]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        result: dict[str, Any] = {}
        for src in sources:
            value = self.build(src, path, record=False)
            if not isinstance(value, dict):
                raise InputError(
                    "a merge key (<<) must refer to a mapping",
                    file=self.name,
                    line=src.start_mark.line + 1,
                )
            for k, v in value.items():
                result.setdefault(k, v)
        return result


def _expanded(node: Node, memo: dict[int, int]) -> int:
    """How many values *node* becomes once aliases are expanded (each distinct node is
    counted once, so a billion-laughs document is measured without being expanded)."""
    key = id(node)
    if key not in memo:
        memo[key] = 0  # a node that contains itself (a recursive alias) counts once
        if isinstance(node, SequenceNode):
            total = 1 + sum(_expanded(n, memo) for n in node.value)
        elif isinstance(node, MappingNode):
            total = 1 + sum(_expanded(k, memo) + _expanded(v, memo) for k, v in node.value)
        else:
            total = 1
        memo[key] = min(total, MAX_VALUES + 1)
    return memo[key]


class _Crossing:
    """Where, in document order, the values of a document (*values*) or those its aliases add
    (*extra*) first pass a budget: the line of the alias that crosses it. The walk meets a
    node again exactly where the document holds an alias, in the order of *aliases* (the
    lines of the document's alias events)."""

    def __init__(self, values: int, extra: int, aliases: list[int]) -> None:
        self.values, self.extra = values, extra
        self.memo: dict[int, int] = {}
        self.seen: set[int] = set()
        self.aliases = iter(aliases)

    def line(self, node: Node) -> int | None:
        if id(node) in self.seen:  # an alias: all it expands to is added here
            at = next(self.aliases, None)
            n = _expanded(node, self.memo)
            self.values -= n
            self.extra -= n
            return at if self.values < 0 or self.extra < 0 else None
        self.seen.add(id(node))
        self.values -= 1
        if self.values < 0:
            return node.start_mark.line + 1
        children: list[Node] = []
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        for child in children:
            where = self.line(child)
            if where is not None:
                return where
        return None


def _alias_lines(text: str, index: int) -> list[int]:
    """The lines of the aliases (``*name``) of document *index* of *text*, in order."""
    lines: list[int] = []
    doc = -1
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.DocumentStartEvent):
            doc += 1
            if doc > index:
                break
        elif doc == index and isinstance(event, yaml.AliasEvent) and event.start_mark:
            lines.append(event.start_mark.line + 1)
    return lines


_BOMB_HINT = ("remove the nested anchors/aliases (or split the file); servelab caps alias "
              "expansion")


def _check_expansion(node: Node, name: str, extra_left: int, text: str, index: int) -> int:
    """The values *node*'s aliases add beyond those written; InputError at the line of the
    alias that crosses a cap when the document expands to more than MAX_VALUES values or its
    aliases add more than *extra_left*."""
    memo: dict[int, int] = {}
    total = _expanded(node, memo)
    extra = total - len(memo)
    if total <= MAX_VALUES and extra <= extra_left:
        return extra
    start = node.start_mark.line + 1
    crossing = _Crossing(MAX_VALUES, extra_left, _alias_lines(text, index))
    line = crossing.line(node) or start
    if total > MAX_VALUES:
        message = (f"document expands to more than {MAX_VALUES} values "
                   "(aliases nested like a 'billion laughs' bomb?)")
    else:
        message = (f"the file's YAML aliases expand to more than {MAX_ALIAS_VALUES} values "
                   f"across its documents (the document at line {start} crosses the cap; "
                   "aliases nested like a 'billion laughs' bomb?)")
    raise InputError(message, file=name, line=line, hint=_BOMB_HINT)


def _why(node: ScalarNode, e: Exception) -> str:
    kind = node.tag.rsplit(":", 1)[-1]
    if isinstance(e, ValueError) and "digits" in str(e):
        return f"an integer of {len(node.value)} digits (at most 4300 are read)"
    return f"not a valid {kind}"


def _looks_like_helm(text: str) -> bool:
    return "{{" in text and "}}" in text


def _mark_error(name: str, e: yaml.MarkedYAMLError, text: str) -> InputError:
    mark = e.problem_mark or e.context_mark
    problem = e.problem or "invalid YAML"
    if e.context:
        problem = f"{problem} ({e.context})"
    return InputError(
        f"malformed YAML: {problem}",
        file=name,
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        hint=HELM_HINT if _looks_like_helm(text) else
        "fix the YAML syntax at that position (indentation, quotes, a missing ':')",
    )


def _reader_error(name: str, e: yaml.reader.ReaderError, text: str) -> InputError:
    """A character YAML does not allow (a control character but tab and line breaks, U+FFFE,
    U+FFFF, ...) at its line and column. Every occurrence of such a character is refused, so
    its first one in *text* is the one the reader met (libyaml counts bytes, PyYAML code
    points: neither position is used)."""
    char = chr(e.character) if isinstance(e.character, int) else str(e.character or "")
    at = text.find(char) if char else -1
    line = column = None
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
    code = f"U+{ord(char):04X}" if len(char) == 1 else "a character"
    return InputError(
        f"{code} is not allowed in YAML (a YAML file holds no control character but tab and "
        "line breaks, and no noncharacter, not even quoted)",
        file=name, line=line, column=column,
        hint=f"remove it, or write it as an escape inside double quotes (\"\\u{ord(char):04x}\")"
        if len(char) == 1 else "remove it",
    )


_COLLECTION_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("map", "seq", "set", "omap", "pairs")
)
#: libyaml's parser when PyYAML has it (several times faster than the pure-Python one, with
#: its own nesting cap); the same nodes, marks and errors either way.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FLOW = re.compile(r"[\[\]{}\"'#\n]")


def _check_flow_depth(text: str, name: str) -> None:
    """InputError when ``[``/``{`` nest deeper than MAX_DEPTH (quoted text and comments
    skipped). PyYAML's scanner takes quadratic time on deep flow nesting: 3000 levels cost
    it seconds before any check of ours could run, so this linear look comes first."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth, quote, comment, line = 0, "", False, 1
    for m in _FLOW.finditer(text):
        c = m.group()
        if c == "\n":
            quote, comment, line = "", False, line + 1
        elif comment:
            continue
        elif quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == "#":
            comment = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(f"YAML nested more than {MAX_DEPTH} levels deep", file=name,
                                 line=line, hint="flatten the document; servelab caps nesting")
        else:
            depth = max(depth - 1, 0)


def load_documents(text: str, name: str, *, budget: list[int] | None = None
                   ) -> list[Document]:
    """All documents of *text* with positions. Empty documents (``---`` alone) are dropped.
    *budget* (one number, the values aliases may still add; MAX_ALIAS_VALUES when not
    given) is shared with the documents made, so YAML embedded in their strings
    (:func:`embedded_documents`) counts against the same file's cap."""
    docs: list[Document] = []
    _check_flow_depth(text, name)
    left = [MAX_ALIAS_VALUES] if budget is None else budget
    try:
        for i, node in enumerate(yaml.compose_all(text, Loader=_LOADER)):
            doc = Document(data=None, index=i, line=node.start_mark.line + 1, text=text,
                           budget=left)
            left[0] -= _check_expansion(node, name, left[0], text, i)
            doc.data = _Builder(name, doc).build(node, ())
            if doc.data is None:
                continue
            docs.append(doc)
    except yaml.MarkedYAMLError as e:
        raise _mark_error(name, e, text) from e
    except yaml.reader.ReaderError as e:
        raise _reader_error(name, e, text) from e
    except yaml.YAMLError as e:
        raise InputError(f"malformed YAML: {e}", file=name,
                         hint=HELM_HINT if _looks_like_helm(text) else None) from e
    except RecursionError as e:
        raise InputError(
            "YAML nested too deeply", file=name, hint="flatten the document"
        ) from e
    return docs


def embedded_documents(doc: Document, path: JsonPath, name: str) -> list[Document]:
    """The YAML documents in the string at *path* of *doc* (a ConfigMap's ``spec.yaml``, a
    RayService's ``serveConfigV2``), read once and kept: their aliases count against the
    cap of the file *doc* is of, so a file of many objects, each with a bomb in a string
    just under the cap, stops too. InputError (the same one each time) when the string is
    not YAML, or not a string."""
    path = tuple(path)
    if path not in doc.embedded:
        value: Any = doc.data
        for part in path:
            if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
                value = value[part]
            else:
                value = value.get(str(part)) if isinstance(value, dict) else None
        try:
            if not isinstance(value, str):
                raise InputError("not a string", file=name)
            doc.embedded[path] = load_documents(value, name, budget=doc.budget)
        except InputError as e:
            doc.embedded[path] = e
    got = doc.embedded[path]
    if isinstance(got, InputError):
        raise got
    return got


def load_file(path: Path, *, max_bytes: int | Limit = TEXT_BYTES,
              what: str = "YAML file") -> list[Document]:
    """Read and parse *path* (*what* names it in errors: "binary file, not a YAML experiment
    file"); an empty or comment-only file is an error."""
    text = read_text(path, max_bytes=max_bytes, what=what)
    docs = load_documents(text, str(path))
    if not docs:
        raise InputError(
            "empty file: no YAML document (only comments or whitespace)",
            file=str(path),
            line=1,
            hint="write the experiment document; see examples/experiment.yaml",
        )
    return docs
