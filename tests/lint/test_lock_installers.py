"""Lock-based Python installers run without their lock (unpinned-packages)."""

from __future__ import annotations

import pytest

from servelab.lint import packages as pkg
from servelab.lint.shell import commands


@pytest.mark.parametrize(("line", "lock"), [
    ("uv sync --no-dev", "uv.lock"),
    ("poetry install --no-root", "poetry.lock"),
    ("poetry sync", "poetry.lock"),
    ("pdm install --prod", "pdm.lock"),
    ("pipenv install --system", "Pipfile.lock"),
])
def test_lock_install(line: str, lock: str) -> None:
    found = pkg.lock_install(commands(line)[0])
    assert found is not None
    assert found.locks == (lock,)


@pytest.mark.parametrize("line", [
    "uv sync --frozen", "uv sync --locked", "UV_FROZEN=1 uv sync",
    "pipenv install --deploy --system", "pipenv install --ignore-pipfile",
    "pipenv install flask", "pdm install --frozen-lockfile", "uv pip install -r r.txt",
    "poetry lock", "pdm sync", "pipenv sync",
])
def test_not_a_lockless_install(line: str) -> None:
    assert pkg.lock_install(commands(line)[0]) is None


def test_copies_lock() -> None:
    def seen_without(_src: str, _lock: str) -> bool | None:
        return False

    def unseen(_src: str, _lock: str) -> bool | None:
        return None

    locks = ("uv.lock",)
    assert pkg.copies_lock(["pyproject.toml", "uv.lock"], locks, seen_without)
    assert pkg.copies_lock(["uv.lock*"], locks, seen_without)
    assert not pkg.copies_lock(["pyproject.toml"], locks, seen_without)
    assert not pkg.copies_lock(["."], locks, seen_without)  # the context shows no lock
    assert pkg.copies_lock(["."], locks, unseen)  # a context servelab cannot see
    assert not pkg.copies_lock(["Pipfile"], ("Pipfile.lock",), unseen)  # a file, no folder
