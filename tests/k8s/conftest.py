"""Fixtures of the k8s-check tests: the data folder and a fixture-header reader."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"

_HEADER = re.compile(
    r"^#\s*(expect|result|margin|container|only|error|wrong|missed|says|never-says|note):\s*(.+?)\s*$")
_EXPECT = re.compile(r"^([a-z0-9-]+)@(\d+)(?:\s+(error|warning|info))?$")
#: ``rule@line why``: a finding the tool gives and should not (wrong), or misses (missed)
_JUDGED = re.compile(r"^([a-z0-9-]+)@(\d+)\s+\S.*$")


@dataclass
class Fixture:
    """What a fixture file says about itself in its leading ``# key: value`` comments."""

    path: Path
    expect: Counter[tuple[str, int]] = field(default_factory=Counter)
    #: (rule, line, severity) for the expectations that name a severity
    severities: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    results: list[Path] = field(default_factory=list)
    margin: float = 1.5
    container: str | None = None
    only: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    #: Findings the tool gives that are wrong (false positives), each with why
    wrong: Counter[tuple[str, int]] = field(default_factory=Counter)
    #: Real problems the tool does not report (false negatives), each with why
    missed: Counter[tuple[str, int]] = field(default_factory=Counter)
    #: (rule, line, text): a finding of that rule at that line says this (its message)
    says: list[tuple[str, int, str]] = field(default_factory=list)
    #: Text no message may contain (what the input does not have: "Service", "not dropped")
    never_says: list[str] = field(default_factory=list)
    #: Text some note of the report must contain (what is said without a finding)
    notes: list[str] = field(default_factory=list)


def _read_message(fx: Fixture, key: str, value: str) -> None:
    """``# says: rule@line text``, ``# never-says: text`` and ``# note: text``."""
    if key in ("never-says", "note"):
        (fx.never_says if key == "never-says" else fx.notes).append(value)
        return
    j = re.match(r"^([a-z0-9-]+)@(\d+)\s+(\S.*)$", value)
    assert j, f"{fx.path.name}: bad says line {value!r} (rule@line text)"
    fx.says.append((j.group(1), int(j.group(2)), j.group(3)))


def read_fixture(path: Path) -> Fixture:
    fx = Fixture(path)
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("#"):
            break
        m = _HEADER.match(line)
        if not m:
            continue
        key, value = m.groups()
        if key == "expect":
            e = _EXPECT.match(value)
            assert e, f"{path.name}: bad expect line {value!r}"
            rule, lineno, severity = e.group(1), int(e.group(2)), e.group(3)
            fx.expect[(rule, lineno)] += 1
            if severity:
                fx.severities[(rule, lineno, severity)] += 1
        elif key == "result":
            fx.results.append(DATA / value)
        elif key == "margin":
            fx.margin = float(value)
        elif key == "container":
            fx.container = value
        elif key == "only":
            fx.only = {r.strip() for r in value.split(",")}
        elif key in ("says", "never-says", "note"):
            _read_message(fx, key, value)
        elif key == "error":
            fx.errors.append(value)
        elif key in ("wrong", "missed"):
            j = _JUDGED.match(value)
            assert j, f"{path.name}: bad {key} line {value!r} (rule@line why)"
            getattr(fx, key)[(j.group(1), int(j.group(2)))] += 1
    return fx


@pytest.fixture
def k8s_fixture() -> Callable[[Path], Fixture]:
    """The reader of a fixture's leading comments."""
    return read_fixture
