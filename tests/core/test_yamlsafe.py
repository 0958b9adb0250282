from __future__ import annotations

import pytest

from servelab.errors import InputError
from servelab.yamlsafe import decode, load_documents


def test_positions_of_nested_values() -> None:
    docs = load_documents("a:\n  b:\n    - x\n    - y: 1\n", "f")
    d = docs[0]
    assert d.positions[("a", "b", 1, "y")].line == 4
    assert d.key_positions[("a", "b")].line == 2


def test_duplicate_key_names_first_line() -> None:
    with pytest.raises(InputError) as e:
        load_documents("a: 1\nb: 2\na: 3\n", "f.yaml")
    assert e.value.line == 3
    assert "first at line 1" in e.value.message


def test_timestamps_stay_strings() -> None:
    assert load_documents("d: 2024-01-02\n", "f")[0].data == {"d": "2024-01-02"}


def test_non_utf8_position() -> None:
    with pytest.raises(InputError) as e:
        decode(b"a: 1\nb: \xff\n", "f")
    assert (e.value.line, e.value.column) == (2, 4)


def test_multiple_documents_keep_index_and_line() -> None:
    docs = load_documents("a: 1\n---\n---\nb: 2\n", "f")
    assert [d.index for d in docs] == [0, 2]
    assert docs[1].line == 4
