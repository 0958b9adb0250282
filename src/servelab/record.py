"""Mutable records for the classes ``servelab lint`` loads, without :mod:`dataclasses`.

On Python 3.11, importing :mod:`dataclasses` (it imports :mod:`inspect`, :mod:`ast`,
:mod:`dis`) and generating the methods of the eighteen classes a lint run loads took about
40 ms of its 200 ms start (bench/lint_speed.py). So the classes on that path are written out:
value types as :class:`typing.NamedTuple`, mutable ones as ``__slots__`` classes with an
explicit ``__init__`` that derive from :class:`Record`, which gives them what the dataclass
decorator gave: a field-by-field ``__repr__`` and ``__eq__`` (no hash: they are mutable), and
:meth:`Record.copy` in place of :func:`dataclasses.replace`.

Everywhere else (the build, scan, smoke and run stages) dataclasses stay.
"""

from __future__ import annotations

from typing import Any, TypeVar

R = TypeVar("R", bound="Record")


#: field names per class, worked out once: copy() runs for every RUN a lint reads
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in klass.__dict__.get("__slots__", ()):
            if name not in names:
                names.append(name)
    _FIELDS[cls] = tuple(names)
    return _FIELDS[cls]


class Record:
    """Base of a mutable ``__slots__`` record: fields are the slots, in declaration order."""

    __slots__ = ()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return _fields(cls)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.field_names())
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.field_names())

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq=True

    def copy(self: R, **changes: Any) -> R:
        """A shallow copy with *changes* applied (``dataclasses.replace``); TypeError names
        a field this record does not have."""
        names = self.field_names()
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field(s) {', '.join(unknown)}")
        out = object.__new__(type(self))
        for n in names:
            object.__setattr__(out, n, changes[n] if n in changes else getattr(self, n))
        return out
