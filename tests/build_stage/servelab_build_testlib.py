"""Paths and constants shared by the build tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data" / "build"
EPOCH = 1_700_000_000
