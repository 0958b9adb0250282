"""The Hypothesis profiles of tests/hostile (derandomized in CI, no per-example deadline: the
machines are shared)."""

from __future__ import annotations

import hostile.conftest  # noqa: F401  (registers and loads the profiles)
