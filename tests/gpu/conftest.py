"""Fixtures of the GPU tests: fixture folders, and no nvidia-smi at all.

``fake_smi`` (the stand-in that replays a tests/data/gpu/hosts folder) is in tests/conftest.py,
shared with the smoke tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "gpu"
HOSTS = DATA / "hosts"
REQUIRE = DATA / "require"

@pytest.fixture
def no_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without nvidia-smi (the real situation of these machines, made certain)."""
    monkeypatch.delenv("SERVELAB_NVIDIA_SMI", raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
