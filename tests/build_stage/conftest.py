"""Session fixtures for the build tests: one Builds session (one builder probe, one store of
archives), shared build records, and removal of every loaded image at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servelab_build_testlib import DATA, EPOCH, ROOT


@pytest.fixture(scope="session")
def builds(docker_client: Any, base_image: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Builds session; loaded images are removed when the test session ends."""
    from servelab.build.stage import Builds
    from servelab.cleanup import Cleanup, new_run_id

    run_id = "test-" + new_run_id()
    store = tmp_path_factory.mktemp("build-store")
    with Cleanup(run_id) as cu, Builds(run_id, store_dir=store / "images", cleanup=cu) as b:
        yield b


def _arm(name: str, context: Path, dockerfile: Path, base_image: str) -> Any:
    from servelab.spec import Arm

    return Arm(name, context, dockerfile, {"BASE_IMAGE": base_image})


def _twice(builds: Any, arm: Any, out: Path, **kw: Any) -> list[Any]:
    from servelab.spec import BuildSettings

    settings = BuildSettings(source_date_epoch=EPOCH, network=kw.pop("network", "default"))
    return [builds.build(arm, settings, repeat=n, out_dir=out / f"repeat-{n}", **kw)
            for n in (1, 2)]


@pytest.fixture(scope="session")
def example_records(builds: Any, base_image: str,
                    tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Two no-cache builds of the bundled example's treatment (examples/Dockerfile)."""
    arm = _arm("treatment", ROOT / "examples", ROOT / "examples" / "Dockerfile", base_image)
    return _twice(builds, arm, tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="session")
def date_records(builds: Any, base_image: str,
                 tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Two builds of a Dockerfile that writes `date` into /build-date (network none)."""
    ctx = DATA / "nondeterministic"
    arm = _arm("date", ctx, ctx / "Dockerfile", base_image)
    return _twice(builds, arm, tmp_path_factory.mktemp("date"), network="none")


@pytest.fixture(scope="session")
def ts_records(builds: Any, base_image: str,
               tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Two builds with rewrite-timestamp off of a step whose output is always the same."""
    ctx = DATA / "timestamps"
    arm = _arm("timestamps", ctx, ctx / "Dockerfile", base_image)
    return _twice(builds, arm, tmp_path_factory.mktemp("ts"), rewrite_timestamp=False)
