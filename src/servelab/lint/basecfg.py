"""``servelab lint --resolve-base``: what the final image's base image itself sets (USER,
HEALTHCHECK, EXPOSE, start command), read from its config.

The local engine is asked first (``docker image inspect``, no pull); then the registry
(:class:`servelab.image.registry.RegistryClient`: the manifest, the linux/amd64 entry of an
index, the config blob). Off by default: without the flag lint reads nothing but files, so it
stays offline and deterministic (pre-commit). Everything heavy is imported only when asked.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

_MAX_CONFIG = 4 * 1024 * 1024
_PLATFORM = ("linux", "amd64")


class BaseFacts(NamedTuple):
    """What an image's config says about how it runs."""

    ref: str
    #: the config's User ("" when unset: root)
    user: str
    healthcheck: bool
    exposed: tuple[str, ...]
    start: tuple[str, ...]
    #: where the config was read: "the local engine" or "the registry"
    source: str


def facts_from_config(ref: str, config: dict[str, Any], source: str) -> BaseFacts:
    """BaseFacts from an image config's ``config`` object (the OCI/Docker ``Config``)."""
    health = config.get("Healthcheck") or {}
    test = (health.get("Test") or []) if isinstance(health, dict) else []
    start = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
    return BaseFacts(
        ref=ref,
        user=str(config.get("User") or ""),
        healthcheck=bool(test) and test[0] != "NONE",
        exposed=tuple(sorted(config.get("ExposedPorts") or {})),
        start=tuple(str(w) for w in start),
        source=source,
    )


class BaseResolver:
    """Reads base configs, each image once; failures become :attr:`notes`, not errors."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self._cache: dict[str, BaseFacts | None] = {}

    def __call__(self, ref: str) -> BaseFacts | None:
        if ref not in self._cache:
            self._cache[ref] = self._local(ref) or self._remote(ref)
        return self._cache[ref]

    def _local(self, ref: str) -> BaseFacts | None:
        from servelab import proc
        from servelab.errors import ServelabError

        if proc.which("docker") is None:
            return None
        try:
            done = proc.run(["docker", "image", "inspect", "--format", "{{json .Config}}", ref],
                            timeout=30, check=False)
        except ServelabError:
            return None
        if done.returncode != 0:
            return None
        try:
            config = json.loads(done.stdout or "null")
        except ValueError:
            return None
        return facts_from_config(ref, config or {}, "the local engine")

    def _remote(self, ref: str) -> BaseFacts | None:
        from servelab.errors import ServelabError

        try:
            config = _registry_config(ref)
        except (ServelabError, OSError, ValueError, KeyError) as e:
            self.notes.append(f"--resolve-base: could not read the config of {ref} from the "
                              f"local engine or its registry ({e}); its user is unknown")
            return None
        return facts_from_config(ref, config, "the registry")


def _registry_config(ref_text: str) -> dict[str, Any]:
    from servelab.image.ref import ImageRef
    from servelab.image.registry import RegistryClient

    client = RegistryClient(timeout=20)
    ref = ImageRef.parse(ref_text)
    doc = json.loads(client.get_manifest(ref).body)
    if "manifests" in doc:  # an index: the linux/amd64 image
        chosen = [m for m in doc["manifests"]
                  if (m.get("platform", {}).get("os"), m.get("platform", {}).get("architecture"))
                  == _PLATFORM]
        if not chosen:
            raise ValueError("the index has no linux/amd64 image")
        doc = json.loads(client.get_manifest(ref.with_digest(chosen[0]["digest"])).body)
    with client.open_blob(ref, doc["config"]["digest"]) as blob:
        raw = blob.read(_MAX_CONFIG + 1)
    if len(raw) > _MAX_CONFIG:
        raise ValueError("the image config is too large")
    config = json.loads(raw).get("config") or {}
    return config if isinstance(config, dict) else {}
