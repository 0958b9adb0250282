"""spec.quick_valid, the one-pass check of servelab's own documents, never accepts what
jsonschema refuses: on the fixtures, and on every mutation Hypothesis makes of them (a value
replaced anywhere by any JSON value). It accepts the valid fixtures (else it would be no
quicker), and a schema keyword it does not read sends the document to jsonschema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab import spec

DATA = Path(__file__).resolve().parents[1] / "data"
HISTORY = [json.loads(x) for x in (DATA / "history" / "positive" / "carried" /
                                   "history.jsonl").read_text().splitlines()]
RESULT = json.loads((DATA / "hostile" / "good" / "result.json").read_text())
DOCS: list[tuple[str, Any]] = [("history", d) for d in HISTORY] + [("result", RESULT)]

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=6)


def _jsonschema_ok(name: str, data: Any) -> bool:
    return not list(spec.validator(name).iter_errors(data))


@pytest.mark.parametrize(("name", "doc"), DOCS)
def test_the_valid_fixtures_are_accepted_quickly(name: str, doc: Any) -> None:
    assert spec.quick_valid(name, doc) and _jsonschema_ok(name, doc)


def _paths(d: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, (*at, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += _paths(v, (*at, i))
    return out


def _replace(d: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(d))
    node = copy
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return copy


@given(which=st.integers(0, len(DOCS) - 1), pick=st.integers(0, 10**6), value=JSON,
       extra=st.booleans(), key=st.text(max_size=6))
def test_quick_never_accepts_what_jsonschema_refuses(which: int, pick: int, value: Any,
                                                     extra: bool, key: str) -> None:
    name, doc = DOCS[which]
    paths = _paths(doc)
    path = paths[pick % len(paths)]
    mutated = _replace(doc, path, value)
    if extra and isinstance(mutated, dict):
        mutated[key] = value
    if spec.quick_valid(name, mutated):
        assert _jsonschema_ok(name, mutated), (path, value)


def test_an_unknown_keyword_falls_back() -> None:
    schema = {"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}}
    with pytest.raises(spec._Unknown):
        spec._quick(schema, {"a": 1}, schema)
