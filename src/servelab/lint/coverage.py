"""Coverage notes of lint: what was not fully read, and why (docs/limits.md).

:class:`~servelab.findings.CoverageNote` is the one type (it lives with the finding model, so
that k8s-check and every output share it); this module gives lint's bounds their words, so
each bound reached reads the same wherever it is reached. A report holding a note is
"partly checked", never a silent pass.
"""

from __future__ import annotations

from servelab.findings import CoverageNote

__all__ = ["CoverageNote", "Notes", "bound"]


def bound(what: str, limit: str, value: int | str, unit: str, hint: str = "") -> CoverageNote:
    """The note of a bound reached: ``<what>, servelab stops at <value> <unit> (<limit>)``."""
    more = f"; {hint}" if hint else ""
    return CoverageNote(what, f"servelab stops at {value} {unit} ({limit}){more}")


class Notes:
    """A list of coverage notes that keeps each (what, why) once, in order."""

    __slots__ = ("_seen", "items")

    def __init__(self) -> None:
        self.items: list[CoverageNote] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, note: CoverageNote) -> None:
        key = (note.what, note.why)
        if key not in self._seen:
            self._seen.add(key)
            self.items.append(note)

    def __len__(self) -> int:
        return len(self.items)
