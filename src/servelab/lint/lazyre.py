"""Regular expressions compiled on first use.

``servelab lint`` must start fast (bench/lint_speed.py): most of its patterns only matter
for some Dockerfiles (a RUN with curl, a git clone, a start script), so they are compiled
when first used rather than when the rule modules are imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator


class LazyPattern:
    """``re.compile(pattern, flags)``, done on the first search/match/finditer/sub."""

    __slots__ = ("_flags", "_pattern", "_rx")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern = pattern
        self._flags = flags
        self._rx: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._rx is None:
            self._rx = re.compile(self._pattern, self._flags)
        return self._rx

    def search(self, text: str, pos: int = 0, endpos: int = 2**31) -> re.Match[str] | None:
        return self.compiled.search(text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int = 2**31) -> re.Match[str] | None:
        return self.compiled.match(text, pos, endpos)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self.compiled.sub(repl, text)
