"""An image of the bundled example built by the engine and pushed to the test registry, for
the tests that start it from a private containerd; removed from both afterwards."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from servelab import proc
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@contextlib.contextmanager
def pushed_example(docker_client: Any, registry: str, dockerfile: str, what: str,
                   build_args: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """(engine name, registry reference by digest) of ``examples/<dockerfile>`` built as
    ``servelab-test/<what>:<token>`` and pushed."""
    token = secrets.token_hex(3)
    name = f"servelab-test/{what}:{token}"
    pushed = f"{registry}/servelab-test/{what}:{token}"
    args = [a for k, v in (build_args or {}).items() for a in ("--build-arg", f"{k}={v}")]
    proc.run(["docker", "build", "-q", "--network", "none", "-f", str(EXAMPLES / dockerfile),
              *args, "-t", name, str(EXAMPLES)], timeout=600)
    proc.run(["docker", "tag", name, pushed])
    out = proc.run(["docker", "push", pushed], timeout=300).stdout
    digest = next(w for line in out.splitlines() for w in line.split()
                  if w.startswith("sha256:"))
    ref = f"{pushed}@{digest}"
    try:
        yield name, ref
    finally:
        with contextlib.suppress(Exception):
            RegistryClient().delete_manifest(ImageRef.parse(ref))
        for n in (name, pushed):
            with contextlib.suppress(Exception):
                docker_client.api.remove_image(n)
