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


# ------------------------------------------------------------------ alias expansion caps

#: one document whose aliases add about 130 000 values: under both caps alone
_NEAR_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: [*e]\n"
)


def test_one_document_under_the_caps_is_read() -> None:
    [doc] = load_documents(_NEAR_BOMB, "f.yaml")
    assert len(doc.data["f"][0]) == 9


def test_many_documents_each_under_the_cap_are_refused_per_file() -> None:
    """300 documents, each just under the per-document cap, would build 20 million values
    (gigabytes); the file's cap stops the second one, at the alias that crosses it."""
    text = "---\n".join([_NEAR_BOMB] * 300)
    with pytest.raises(InputError) as e:
        load_documents(text, "f.yaml")
    assert e.value.file == "f.yaml"
    assert "across its documents" in e.value.message
    assert "document at line 8" in e.value.message
    assert e.value.line == 12  # the second document's "e: &e [*d, ...]"
    assert e.value.hint and "aliases" in e.value.hint


def test_documents_with_few_aliases_are_not_counted_against_the_file() -> None:
    """What is written counts nowhere: only the values aliases add do."""
    doc = "k: &k {a: 1, b: 2}\nl: *k\n" + "".join(f"v{i}: {i}\n" for i in range(200))
    docs = load_documents("---\n".join([doc] * 500), "f.yaml")
    assert len(docs) == 500


def test_a_bomb_names_the_line_of_the_alias_that_crosses_the_cap() -> None:
    text = "".join(f"- &{n} [{', '.join([f'*{p}'] * 10)}]\n"
                   for p, n in zip("abcd", "bcde", strict=True))
    text = "- &a [x, x, x, x, x, x, x, x, x, x]\n" + text + "- *e\n- *e\n"
    with pytest.raises(InputError) as e:
        load_documents(text, "f.yaml")
    assert "billion laughs" in e.value.message and "across" not in e.value.message
    assert e.value.line == 6  # the first "- *e": 123 000 written before it, 234 000 after


# ------------------------------------------------------------ characters YAML refuses

@pytest.mark.parametrize(("text", "code", "line", "column"), [
    ("a: 1\nb: x\x07y\n", "U+0007", 2, 5),
    ("a: 1\nb: 'é\x1b[31m'\n", "U+001B", 2, 6),
    ("a: 1\nb: ok\nc: \"\ufffe\"\n", "U+FFFE", 3, 5),
])
def test_a_character_yaml_refuses_is_named_at_its_line(
        text: str, code: str, line: int, column: int) -> None:
    with pytest.raises(InputError) as e:
        load_documents(text, "f.yaml")
    assert f"f.yaml:{line}:{column}: {code} is not allowed in YAML" in e.value.message
    assert (e.value.file, e.value.line, e.value.column) == ("f.yaml", line, column)
    assert "in \"<unicode string>\"" not in e.value.message
    assert e.value.hint and "escape" in e.value.hint


def test_the_same_characters_written_as_escapes_are_text() -> None:
    [doc] = load_documents('a: "x\\u0007y\\x1b"\nb: "tab\tok"\n', "f.yaml")
    assert doc.data == {"a": "x\x07y\x1b", "b": "tab\tok"}


# ---------------------------------------------- lines of strings written over several lines

#: the same three-line value ("alpha 1", "bravo 2", "charlie 3") written in each style
_STYLES = {
    "literal": "x: 0\nv: |\n  alpha 1\n  bravo 2\n  charlie 3\n",
    "literal indicator below its key": "x: 0\nv:\n  |\n  alpha 1\n  bravo 2\n  charlie 3\n",
    "folded": "x: 0\nv: >\n  alpha 1\n\n  bravo 2\n\n  charlie 3\n",
    "folded more-indented": "x: 0\nv: >\n  alpha 1\n   bravo 2\n  charlie\n  3\n",
    "double-quoted escapes": 'x: 0\nv: "alpha 1\\nbravo 2\\ncharlie 3"\n',
    "double-quoted on the next line": 'x: 0\nv:\n  "alpha 1\\nbravo 2\\ncharlie 3"\n',
    "double-quoted folded": 'x: 0\nv: "alpha 1\n\n  bravo\n  2\n\n  charlie 3"\n',
    "double-quoted mixed": 'x: 0\nv: "alpha 1\\nbravo\n  2\n\n  charlie \\\n  3"\n',
    "single-quoted folded": "x: 0\nv: 'alpha 1\n\n  bravo 2\n\n\n  charlie 3'\n",
    "plain folded": "x: 0\nv: alpha 1\n\n  bravo 2\n\n  charlie 3\n",
}


@pytest.mark.parametrize("style", list(_STYLES))
def test_each_line_of_a_string_is_found_where_it_is_written(style: str) -> None:
    text = _STYLES[style]
    [doc] = load_documents(text, "f.yaml")
    value = doc.data["v"].rstrip("\n")
    words = [line.split()[0] for line in value.split("\n") if line.strip()]
    assert words == ["alpha", "bravo", "charlie"], value
    file_lines = text.splitlines()
    for k, line in enumerate(value.split("\n"), 1):
        if not line.strip():
            continue
        at = doc.string_line(("v",), k)
        assert at is not None and line.split()[0] in file_lines[at - 1], (k, at, value)


def test_a_one_line_string_holds_every_line_on_its_own_line() -> None:
    [doc] = load_documents("a: 1\nb: one line\n", "f.yaml")
    assert doc.string_line(("b",), 1) == 2
    assert doc.string_line(("b",), 5) == 2
    assert doc.string_line(("nope",), 1) is None
