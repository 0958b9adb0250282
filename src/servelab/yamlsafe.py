"""A careful YAML reader: positions for every value, and clear errors for hostile input.

* every mapping key and value gets its 1-based line and column, keyed by JSON path;
* duplicate keys are errors (PyYAML silently keeps the last one);
* alias expansion is capped, so a "billion laughs" document fails fast;
* non-UTF-8 bytes, oversized files, empty and comment-only files are reported with a fix;
* timestamps stay strings (JSON Schema knows no dates).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servelab.errors import InputError
from servelab.textio import decode, read_bytes

MAX_BYTES = 1024 * 1024
#: Values built from one document, aliases expanded. A billion-laughs bomb blows past it.
MAX_VALUES = 200_000

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


def read_text(path: Path, *, max_bytes: int = MAX_BYTES, what: str = "file") -> str:
    """Read *path* as UTF-8 text with clear errors for missing, huge or non-UTF-8 files."""
    return decode(read_bytes(path, max_bytes=max_bytes, what=what), str(path))


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
        if record and path not in self.doc.positions:
            mark = node.start_mark
            self.doc.positions[path] = Position(mark.line + 1, mark.column + 1)
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if isinstance(node, SequenceNode):
            return [self.build(n, (*path, i), record) for i, n in enumerate(node.value)]
        if isinstance(node, MappingNode):
            return self._mapping(node, path, record)
        raise InputError("unsupported YAML node", file=self.name)  # pragma: no cover

    def _scalar(self, node: ScalarNode) -> Any:
        if node.tag == "tag:yaml.org,2002:timestamp":
            return node.value
        if node.tag == "tag:yaml.org,2002:binary":
            return node.value
        try:
            return self.scalars.construct_object(node)
        except yaml.constructor.ConstructorError as e:
            raise InputError(
                f"cannot read value {node.value!r}: {e.problem}",
                file=self.name,
                line=node.start_mark.line + 1,
                column=node.start_mark.column + 1,
            ) from e

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


def _mark_error(name: str, e: yaml.MarkedYAMLError) -> InputError:
    mark = e.problem_mark or e.context_mark
    problem = e.problem or "invalid YAML"
    if e.context:
        problem = f"{problem} ({e.context})"
    return InputError(
        f"malformed YAML: {problem}",
        file=name,
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        hint="fix the YAML syntax at that position (indentation, quotes, a missing ':')",
    )


def load_documents(text: str, name: str) -> list[Document]:
    """All documents of *text* with positions. Empty documents (``---`` alone) are dropped."""
    docs: list[Document] = []
    try:
        for i, node in enumerate(yaml.compose_all(text, Loader=yaml.SafeLoader)):
            doc = Document(data=None, index=i, line=node.start_mark.line + 1)
            doc.data = _Builder(name, doc).build(node, ())
            if doc.data is None:
                continue
            docs.append(doc)
    except yaml.MarkedYAMLError as e:
        raise _mark_error(name, e) from e
    except yaml.YAMLError as e:
        raise InputError(f"malformed YAML: {e}", file=name) from e
    except RecursionError as e:
        raise InputError(
            "YAML nested too deeply", file=name, hint="flatten the document"
        ) from e
    return docs


def load_file(path: Path, *, max_bytes: int = MAX_BYTES) -> list[Document]:
    """Read and parse *path*; an empty or comment-only file is an error."""
    text = read_text(path, max_bytes=max_bytes)
    docs = load_documents(text, str(path))
    if not docs:
        raise InputError(
            "empty file: no YAML document (only comments or whitespace)",
            file=str(path),
            line=1,
            hint="write the experiment document; see examples/experiment.yaml",
        )
    return docs
