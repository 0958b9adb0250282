"""What a run is asked to do: the stages, the options and the progress callback.

These sit below :mod:`servelab.run.runner` and :mod:`servelab.run.stages`, which both import
them; neither imports the other's options back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from servelab.errors import InputError

STAGES = ("lint", "build", "scan", "smoke")

#: receives one progress line at a time (the CLI prints them to stderr; the core never prints)
Progress = Callable[[str], None]


@dataclass
class RunOptions:
    out_dir: Path
    stages: tuple[str, ...] = STAGES
    repeats: int | None = None
    fail_on: str = "error"
    gpu: bool | None = None
    trivy_cache_dir: Path | None = None
    db_repositories: list[str] = field(default_factory=list)
    offline: bool | None = None
    run_name: str | None = None
    keep: bool = False
    #: ``host[:port][/path]``: push each tested image there and time its pulls before each
    #: start (:mod:`servelab.node`); None: no cold-start measurement
    cold_start_registry: str | None = None
    #: images a node is assumed to hold, for what it would pull (``--node-has``)
    node_has: list[str] = field(default_factory=list)
    #: the cold-start registry's storage root and access log (``--registry-data``,
    #: ``--registry-log``): the cold pull evicts its blob files and checks what it served
    registry_data: Path | None = None
    registry_log: Path | None = None
    #: a global ``drop_caches`` before each cold pull (``--drop-caches``; opt-in)
    drop_caches: bool = False
    #: lazy pulling measured beside the cold pull (``--lazy soci``), its HTTPS registry and
    #: that registry's CA and access log, exit 3 when it cannot be measured
    #: (``--require-lazy``), the SOCI index's min layer size (:mod:`servelab.node.lazypull`)
    lazy: tuple[str, ...] = ()
    lazy_registry: str | None = None
    registry_ca: Path | None = None
    lazy_registry_log: Path | None = None
    require_lazy: bool = False
    lazy_min_layer_size: int | None = None
    #: where the lazy requirement came from (the CLI's flag or the spec's field), for errors
    require_lazy_from: str = "--require-lazy"
    #: a calibration file (``servelab calibrate``): its per-metric noise sets the thresholds
    calibration: Path | None = None
    #: ``servelab build``: a failed build or an unpinned base ends the command (exit 1)
    #: instead of becoming a failed build stage of the repeat
    stop_on_build_failure: bool = False
    #: ``--shard ARM:N``: only that arm's repeat N (one job of a matrix; ``servelab report``
    #: merges the shards into the run's verdict, :mod:`servelab.run.shards`)
    shard: tuple[str, int] | None = None


def parse_stages(text: str) -> tuple[str, ...]:
    """``lint,build`` -> the chosen stages in run order; InputError (exit 2) for unknown ones."""
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in chosen if s not in STAGES]
    if bad or not chosen:
        raise InputError(f"unknown stage(s): {', '.join(bad) or '(none)'}",
                         hint=f"choose from {', '.join(STAGES)}, comma-separated")
    return tuple(s for s in STAGES if s in chosen)


def parse_shard(text: str, arms: list[str], repeats: int) -> tuple[str, int]:
    """``treatment:2`` -> ("treatment", 2); InputError (exit 2) for anything else."""
    arm, sep, n = text.partition(":")
    if not sep or arm not in arms or not n.isascii() or not n.isdigit() \
            or not 1 <= int(n) <= repeats:
        raise InputError(f"--shard {text!r} is not ARM:N of this experiment",
                         hint=f"ARM is one of {', '.join(arms)} and N a repeat from 1 to "
                         f"{repeats}, e.g. --shard {arms[-1]}:1")
    return arm, int(n)
