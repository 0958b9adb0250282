"""A build's BuildKit records that its prune must not leave behind: those whose layers an
image in the engine shares (BuildKit skips them unless told ``--all``), and those it could not
prune at once (``prune_left`` tries them again later)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.build import cache

pytestmark = [pytest.mark.docker]

STEP = "[2/2] COPY blob /blob"


def _build(ctx: Path, *args: str) -> None:
    proc = subprocess.run(["docker", "buildx", "build", "-q", "--no-cache", *args, str(ctx)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _new(before: set[str], description: str) -> list[str]:
    now = cache.cache_records([])
    assert now is not None
    return [i for i, d in now.items() if i not in before and d == description]


@pytest.fixture
def ctx(tmp_path: Path, base_image: str) -> Path:
    (tmp_path / "blob").write_bytes(uuid.uuid4().bytes * 65536)
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nCOPY blob /blob\n")
    return tmp_path


@pytest.fixture
def loaded(ctx: Path, docker_client: Any) -> Iterator[str]:
    """The same image in the engine (the previous repeat's, or the warm-base pull's)."""
    tag = f"servelab-test/shared:{uuid.uuid4().hex[:8]}"
    before = cache.cache_ids([]) or set()
    _build(ctx, "--load", "-t", tag)
    cache.prune_ids(set(_new(before, STEP)), [])
    yield tag
    docker_client.api.remove_image(tag, force=True)


def test_a_record_whose_layers_an_engine_image_shares_is_pruned(ctx: Path, loaded: str
                                                                ) -> None:
    before = cache.cache_ids([])
    assert before is not None
    _build(ctx, "--output", "type=cacheonly")
    ids = _new(before, STEP)
    assert len(ids) == 1
    done = cache.prune_new(before, [], [STEP])
    assert done.left == 0 and done.records == 1 and done.bytes_freed > 0, done
    assert _new(before, STEP) == []


def test_a_record_the_prune_left_goes_later(ctx: Path, base_image: str) -> None:
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nCOPY blob /blob\nRUN true\n")
    step = "[2/3] COPY blob /blob"
    before = cache.cache_ids([])
    assert before is not None
    _build(ctx, "--output", "type=cacheonly")
    # the RUN's record is not named: its parent, the COPY's, cannot go while it is there
    done = cache.prune_new(before, [], [step])
    assert done.left == 1 and done.left_ids == set(_new(before, step)), done
    assert "tried again" in done.notes[-1]
    run = set(_new(before, "mount / from exec /bin/sh -c true"))
    assert len(run) == 1
    assert cache.prune_ids(run, []).records == 1
    later = cache.prune_left(done.left_ids, [])
    assert later.left == 0 and later.records == 1, later
    assert _new(before, step) == []


def test_the_builder_probe_leaves_no_record() -> None:
    """The probe (one per run) left its context's transfers, new on a fresh builder."""
    from servelab.build import builder

    # a fresh builder: no transfer the probe could reuse
    subprocess.run(["docker", "buildx", "prune", "--all", "--force", "--filter",
                    "type=source.local"], capture_output=True, timeout=300, check=True)
    before = cache.cache_records([])
    assert before is not None
    assert builder.probe(None).ok
    after = cache.cache_records([])
    assert after is not None
    assert {d for i, d in after.items() if i not in before} <= {""}, after
