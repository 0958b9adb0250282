"""What an experiment measured, read leniently from ``result.json`` or ``summary.json``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servelab.errors import InputError
from servelab.image.ref import DIGEST, is_digest
from servelab.k8s.model import as_int
from servelab.textio import JSON_BYTES, loads_json
from servelab.yamlsafe import read_text

#: Oldest driver branch for each CUDA major version (NVIDIA's compatibility table).
DRIVER_FLOOR: dict[int, int] = {11: 450, 12: 525, 13: 580}

MAX_RESULT_BYTES = JSON_BYTES.default
_REQUIRE_CUDA = re.compile(r"cuda>=(\d+(?:\.\d+)*)", re.ASCII)

KEYS_HINT = (
    "a result.json or summary.json of a servelab run, with at least one of image.digest, "
    "metrics.startup.ready_s, spec.serve.healthPath/port, host.gpus[0].name, image.cuda.version"
)


@dataclass
class Measured:
    sources: list[str]
    digests: frozenset[str] = frozenset()
    image_ref: str | None = None
    worst_startup_s: float | None = None
    health_path: str | None = None
    port: int | None = None
    gpu_name: str | None = None
    cuda_version: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def cuda_major(self) -> int | None:
        m = re.match(r"([0-9]{1,6})", self.cuda_version or "")
        return int(m.group(1)) if m else None

    @property
    def min_driver_major(self) -> int | None:
        major = self.cuda_major
        return DRIVER_FLOOR.get(major) if major is not None else None

    def summary(self) -> str:
        parts = [f"{len(self.sources)} file(s)"]
        if self.digests:
            parts.append("digest " + ", ".join(sorted(self.digests)))
        if self.worst_startup_s is not None:
            parts.append(f"worst startup {self.worst_startup_s:g}s")
        if self.health_path or self.port:
            parts.append(f"health {self.health_path or '?'} on port {self.port or '?'}")
        if self.gpu_name:
            parts.append(f"GPU {self.gpu_name}")
        if self.cuda_version:
            parts.append(f"CUDA {self.cuda_version}")
        return "measured: " + "; ".join(parts)


def _get(data: Any, *path: str | int) -> Any:
    for part in path:
        if isinstance(part, int):
            if not isinstance(data, list) or len(data) <= part:
                return None
        elif not isinstance(data, dict):
            return None
        data = data[part] if isinstance(part, int) else data.get(part)
    return data


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _results_of(data: Any, name: str) -> list[dict[str, Any]]:
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return [r for r in data["results"] if isinstance(r, dict)]
    if isinstance(data, dict):
        return [data]
    raise InputError("a result file must hold a JSON object", file=name, hint=KEYS_HINT)


def _treatment(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results of the treatment arm; a result without an arm key counts as treatment."""
    return [r for r in results if r.get("arm", "treatment") == "treatment"]


def _read(path: str) -> list[dict[str, Any]]:
    text = read_text(Path(path), max_bytes=JSON_BYTES, what="result file")
    return _results_of(loads_json(text, path, hint=KEYS_HINT, problem="not JSON"), path)


def _digest(r: dict[str, Any]) -> str | None:
    digest = _get(r, "image", "digest")
    if isinstance(digest, str) and is_digest(digest.strip()):
        return digest.strip()
    ref = _get(r, "image", "ref")
    m = DIGEST.search(ref) if isinstance(ref, str) and "@" in ref else None
    return m.group(0) if m else None


def _cuda(r: dict[str, Any]) -> str | None:
    version = _get(r, "image", "cuda", "version")
    if isinstance(version, (str, int, float)) and not isinstance(version, bool):
        return str(version)
    require = _get(r, "image", "cuda", "require")
    m = _REQUIRE_CUDA.search(require) if isinstance(require, str) else None
    return m.group(1) if m else None


def _first(values: Iterable[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def _serve(results: list[dict[str, Any]]) -> tuple[str | None, int | None]:
    path = _first(_get(r, "spec", "serve", "healthPath") for r in results)
    port = _first(as_int(_get(r, "spec", "serve", "port")) for r in results)
    return (str(path) if path else None), port


def _fill(m: Measured, results: list[dict[str, Any]]) -> None:
    m.digests = frozenset(d for d in (_digest(r) for r in results) if d)
    m.image_ref = _first(_get(r, "image", "ref") for r in results)
    ready = (_number(_get(r, "metrics", "startup", "ready_s")) for r in results)
    startups = [s for s in ready if s is not None]
    m.worst_startup_s = max(startups) if startups else None
    m.health_path, m.port = _serve(results)
    gpu = _first(_get(r, "host", "gpus", 0, "name") for r in results)
    m.gpu_name = str(gpu) if gpu else None
    m.cuda_version = _first(_cuda(r) for r in results)


def read_measured(paths: Iterable[str | Path]) -> Measured | None:
    """Merge the treatment results of every file; None when no file is given."""
    names = [str(p) for p in paths]
    if not names:
        return None
    results: list[dict[str, Any]] = []
    for name in names:
        found = _treatment(_read(name))
        if not found:
            raise InputError(
                "no result of the treatment arm in this file", file=name, hint=KEYS_HINT
            )
        results += found
    m = Measured(sources=names)
    _fill(m, results)
    if not (m.digests or m.worst_startup_s or m.health_path or m.port or m.gpu_name
            or m.cuda_version):
        raise InputError(
            "no measurement found in " + ", ".join(names),
            hint="pass " + KEYS_HINT,
        )
    if len(m.digests) > 1:
        m.notes.append(
            f"the results hold {len(m.digests)} different image digests; any of them is accepted"
        )
    if m.cuda_version and m.min_driver_major is None:
        m.notes.append(f"CUDA {m.cuda_version}: no driver floor known, driver-compat not checked")
    return m
