"""The one image-reference type and digest pattern (servelab.image.ref)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.image.ref import ImageRef, check_digest, is_digest, pinned_digest

D = "sha256:" + "ab" * 32
SRC = Path(__file__).resolve().parents[2] / "src" / "servelab"


@pytest.mark.parametrize(("text", "ok"), [
    (D, True), ("sha512:" + "0" * 128, True), ("sha256:" + "AB" * 32, False),
    ("sha256:" + "a" * 63, False), (" " + D, False), (D + "\n", False), ("md5:abc", False),
])
def test_is_digest(text: str, ok: bool) -> None:
    assert is_digest(text) is ok


@pytest.mark.parametrize(("ref", "digest"), [
    (f"python:3.11@{D}", D), (f"127.0.0.1:5000/a/b@{D}", D), ("python:3.11", None),
    (f"python@{D}x", None), (f"{D}", None),
])
def test_pinned_digest(ref: str, digest: str | None) -> None:
    assert pinned_digest(ref) == digest


def test_check_digest_names_where() -> None:
    with pytest.raises(InputError, match=r"index\.json: malformed digest"):
        check_digest("sha256:zz", "index.json")


@pytest.mark.parametrize(("ref", "parts"), [
    ("localhost:5000/app", ("localhost:5000/app", None, None)),
    ("${BASE}:latest", ("${BASE}", "latest", None)),
    (f"nvcr.io/nvidia/tritonserver:24.05-py3@{D}", ("nvcr.io/nvidia/tritonserver", "24.05-py3", D)),
])
def test_split_is_lenient(ref: str, parts: tuple[str, str | None, str | None]) -> None:
    assert ImageRef.split(ref) == parts


def test_parse_and_print_round_trip() -> None:
    r = ImageRef.parse(f"127.0.0.1:5000/team/app:1.0@{D}")
    assert (r.registry, r.repository, r.tag, r.digest) == ("127.0.0.1:5000", "team/app", "1.0", D)
    assert str(r) == f"127.0.0.1:5000/team/app:1.0@{D}"
    assert ImageRef.parse("python").repository == "library/python"


def test_no_other_module_spells_a_digest_pattern() -> None:
    """A digest-format fix goes in one place: no module but image/ref.py writes the pattern."""
    offenders = [
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
        if p.name != "ref.py" and re.search(r"sha(256|512):\[", p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
