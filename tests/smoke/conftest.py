"""Fixtures of the smoke tests: fixture serving images built on the base image, a model."""

from __future__ import annotations

import contextlib
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab import proc
from servelab.smoke.stage import SmokeResult, SmokeSettings, smoke_image
from servelab.spec import Model, Request, Serve

DATA = Path(__file__).resolve().parent.parent / "data" / "smoke"
SERVER = DATA / "server"
MODEL_DIR = DATA / "model"
TEST_LABEL = "servelab.test"
#: (variant, Dockerfile, FIXTURE_MODE)
VARIANTS = {
    "good": ("Dockerfile", "good"),
    "root": ("Dockerfile.root", "good"),
    "rofs": ("Dockerfile", "rofs"),
    "download": ("Dockerfile", "download"),
    "never-ready": ("Dockerfile", "never-ready"),
    "crash": ("Dockerfile", "crash"),
    "bench": ("Dockerfile", "bench"),
}


def build_fixture(base_image: str, variant: str, tag: str) -> str:
    dockerfile, mode = VARIANTS[variant]
    proc.run(["docker", "build", "-q", "--network", "none", "-f", str(SERVER / dockerfile),
              "--build-arg", f"BASE_IMAGE={base_image}", "--build-arg", f"MODE={mode}",
              "--label", f"{TEST_LABEL}=smoke", "-t", tag, str(SERVER)], timeout=300)
    return tag


@pytest.fixture(scope="session")
def fixture_images(docker_client: Any, base_image: str) -> Iterator[Callable[[str], str]]:
    """variant -> tag of a fixture image, built once per session, removed at the end."""
    session = secrets.token_hex(3)
    built: dict[str, str] = {}

    def get(variant: str) -> str:
        if variant not in built:
            built[variant] = build_fixture(base_image, variant,
                                           f"servelab-test/smoke-{variant}:{session}")
        return built[variant]

    yield get
    for tag in built.values():
        with contextlib.suppress(Exception):  # best effort at session end
            docker_client.api.remove_image(tag, force=True)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    shutil.copytree(MODEL_DIR, d)
    return d


PREDICT = Request(path="/predict", body=b'{"inputs": [1, 2, 3]}',
                  headers={"Content-Type": "application/json"}, count=3,
                  expect_json={"model": "tiny-linear", "prediction": 3.1})


def settings(model: Path | None, *, timeout: float = 20.0, **kw: Any) -> SmokeSettings:
    serve_kw = {k: kw.pop(k) for k in list(kw) if k in Serve.__dataclass_fields__}
    return SmokeSettings(
        serve=Serve(readiness_timeout_s=timeout, **serve_kw),
        model=Model(path=model, sha256=kw.pop("sha256", None)) if model else None,
        request=kw.pop("request", PREDICT), scan_weights=kw.pop("scan_weights", False), **kw,
    )


@pytest.fixture
def run_smoke(tmp_path: Path, docker_client: Any) -> Callable[..., SmokeResult]:
    def go(image: str, s: SmokeSettings, run_id: str | None = None) -> SmokeResult:
        rid = run_id or f"test-{secrets.token_hex(4)}"
        res = smoke_image(image, s, run_id=rid, out_dir=tmp_path / rid, first_start=True,
                          client=docker_client)
        left = docker_client.api.containers(all=True,
                                            filters={"label": f"servelab.run-id={rid}"})
        assert left == [], f"containers left behind by run {rid}: {left}"
        return res

    return go
