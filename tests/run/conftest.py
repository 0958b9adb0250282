"""Fixtures of the end-to-end run tests: a fixture Trivy DB (see tests/trivydb.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import trivydb


@pytest.fixture(scope="session")
def fixture_trivy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Trivy cache holding servelab's fixture advisories (not a real vulnerability DB)."""
    cache = tmp_path_factory.mktemp("trivy-cache")
    trivydb.write_db(cache, trivydb.FIXTURE_ADVISORIES)
    return cache
