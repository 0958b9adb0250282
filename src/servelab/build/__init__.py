"""servelab.build: the build stage.

* :mod:`~servelab.build.stage`: N no-cache buildx builds per arm exported as OCI with rewritten
  timestamps, each recorded as a :class:`BuildRecord` (per-platform digests, sizes, layers,
  bases, builder); the reproducibility :func:`verdict` and its explanation.
* :mod:`~servelab.build.export`: the export path (compression, the registry-shaped archive that
  is reported, shipped and loaded) and the disk a build needs.
* :mod:`~servelab.build.builder`: whether the builder can export OCI with rewritten timestamps,
  and the pinned fallback builder when it cannot.
* :mod:`~servelab.build.buildargs`: the one ``KEY=VALUE`` parser (lint and build).
* :mod:`~servelab.build.render`: ``servelab build``'s report.

The repeats are looped over by the runner (:func:`servelab.run.runner.build_experiment`).
Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servelab import lazy_exports

if TYPE_CHECKING:
    from servelab.build.buildargs import parse_build_arg, parse_build_args_file
    from servelab.build.stage import (
        BuildFailed,
        BuildRecord,
        Builds,
        ExperimentBuilds,
        Reproducibility,
        verdict,
    )

_WHERE = {
    "BuildFailed": "stage", "BuildRecord": "stage", "Builds": "stage",
    "ExperimentBuilds": "stage", "Reproducibility": "stage", "verdict": "stage",
    "parse_build_arg": "buildargs", "parse_build_args_file": "buildargs",
}
__all__ = [
    "BuildFailed",
    "BuildRecord",
    "Builds",
    "ExperimentBuilds",
    "Reproducibility",
    "parse_build_arg",
    "parse_build_args_file",
    "verdict",
]
__getattr__ = lazy_exports(__name__, _WHERE)
