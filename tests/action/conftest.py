"""Fixtures of the action's tests: a fixture Trivy DB for the real run under act."""

from __future__ import annotations

from pathlib import Path

import pytest

import trivydb


@pytest.fixture(scope="session")
def fixture_trivy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Trivy cache holding servelab's fixture advisories (see tests/trivydb.py)."""
    cache = tmp_path_factory.mktemp("trivy-cache")
    trivydb.write_db(cache, trivydb.FIXTURE_ADVISORIES)
    return cache
