"""Run a whole experiment: validate, lint, then for each repeat and arm (interleaved):
build, scan, smoke; then aggregate, judge and report.

Writes OUT/<arm>/repeat-<n>/ (result.json, build record, Trivy JSON, SARIF, SBOM, container
log, timeline), OUT/summary.json and OUT/summary.md (for GITHUB_STEP_SUMMARY). Under GitHub
Actions (GITHUB_ACTIONS=true) it also sets the step outputs, appends the job summary and
annotates lint and schema findings.

Verdicts: improved, regressed, trade-off (something better, something worse), no detectable
change, passed (no control arm), failed (a gate or check of the treatment failed), not
reproducible, invalid (a fixed factor differed between arms or repeats).

Exit codes: 0 ok (improved, trade-off, no detectable change, passed), 1 a gate or check of the
treatment failed, 2 bad input or an invalid run, 3 a missing tool, engine or capability.
The control arm's own failed checks are reported, not gated: it shows the common way.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servelab.run.options import RunOptions
    from servelab.spec import Experiment
    from servelab.textio import AllowedPath


def _min_layer_size(text: str) -> int:
    """argparse type of --lazy-min-layer-size: the spec's coldStart.lazyMinLayerSize check."""
    from servelab import textio
    from servelab.errors import InputError
    from servelab.node.lazypull import check_min_layer_size

    value = textio.ascii_int(text, max_digits=20)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number of bytes")
    try:
        check_min_layer_size(value)
    except InputError as e:
        raise argparse.ArgumentTypeError(e.message) from None
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import input_path
    from servelab.run.render import FORMATS

    add_run_options(parser)
    parser.add_argument("--calibration", metavar="FILE", type=input_path,
                        default=os.environ.get("SERVELAB_CALIBRATION") or None,
                        help="a calibration file (servelab calibrate) of this runner class: its "
                        "per-metric noise sets the verdict's thresholds; the summary names it "
                        "(default: $SERVELAB_CALIBRATION)")
    parser.add_argument("--shard", metavar="ARM:N",
                        help="run only that arm's repeat N (e.g. treatment:2), one job of a "
                        "matrix over arms x repeats for images too big for one runner's disk; "
                        "servelab report merges the shards' directories into the run's "
                        "verdict and summary (exit 0 unless the shard could not run)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="what to print at the end: a text verdict (default) or summary.json")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run (``run`` and ``calibrate``)."""
    from servelab.commands._common import (
        add_allow_path,
        add_fail_on,
        add_quiet,
        ascii_int,
        input_path,
    )

    add_quiet(parser)

    parser.add_argument("experiment", type=input_path, metavar="EXPERIMENT",
                        help="the experiment YAML file")
    parser.add_argument("--document", metavar="NAME",
                        help="metadata.name of the experiment in a multi-document file")
    add_allow_path(parser)
    parser.add_argument("--out", default="servelab-out", metavar="DIR",
                        help="artifact directory (default: servelab-out); must not hold a run")
    parser.add_argument("--repeats", type=ascii_int, metavar="N",
                        help="override the spec's repeats")
    parser.add_argument("--stages", default="lint,build,scan,smoke",
                        help="comma-separated stages to run (default: all of "
                        "lint,build,scan,smoke); the report says what was skipped")
    add_fail_on(parser, what="lint findings of the treatment at this severity fail the run")
    gpu = parser.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", dest="gpu", action="store_true", default=None,
                     help="require GPUs for the smoke stage (overrides the spec)")
    gpu.add_argument("--no-gpu", dest="gpu", action="store_false",
                     help="never start with GPUs (overrides the spec)")
    parser.add_argument("--trivy-cache-dir", metavar="DIR", help="Trivy cache directory")
    parser.add_argument("--db-repository", action="append", default=[], metavar="REPO",
                        help="Trivy DB mirror, repeatable, tried in order")
    parser.add_argument("--offline", action="store_true", default=None,
                        help="never download the Trivy DB")
    parser.add_argument("--run-name", metavar="NAME",
                        help="a name for this run (job, matrix key) recorded in the results")
    parser.add_argument("--keep", action="store_true",
                        help="keep the built images (prints their ref@sha256)")
    parser.add_argument("--cold-start-registry", metavar="private|HOST[:PORT][/PATH]",
                        default=os.environ.get("SERVELAB_COLDSTART_REGISTRY") or None,
                        help="push each tested image there once and, before every start, time "
                        "its pull cold and with the base held; 'private': a registry of the "
                        "run's own on loopback (needs docker-registry), removed with its blobs "
                        "at the end (default: $SERVELAB_COLDSTART_REGISTRY; unset: not "
                        "measured)")
    parser.add_argument("--node-has", action="append", default=[], metavar="IMAGE",
                        help="an image a node already holds (repeatable): what it would pull, "
                        "and held in the warm-base pull")
    parser.add_argument("--registry-data", metavar="DIR",
                        default=os.environ.get("SERVELAB_REGISTRY_DATA") or None,
                        help="the cold-start registry's storage root: its blob files are "
                        "evicted from the page cache before each cold pull (default: "
                        "$SERVELAB_REGISTRY_DATA)")
    parser.add_argument("--registry-log", type=input_path, metavar="FILE",
                        default=os.environ.get("SERVELAB_REGISTRY_LOG") or None,
                        help="the cold-start registry's access log: each cold pull checks it "
                        "served every blob in full (default: $SERVELAB_REGISTRY_LOG)")
    parser.add_argument("--drop-caches", action="store_true",
                        help="sync and drop the whole page cache before each cold pull (root; "
                        "it slows every other job on the machine)")
    parser.add_argument("--lazy", action="append", default=[], choices=["soci"],
                        help="also time a lazy pull (SOCI) of each image before every start: "
                        "its index built and pushed beside it, discovered as a node does it "
                        "(needs root, FUSE, soci-snapshotter and an HTTPS registry)")
    parser.add_argument("--lazy-registry", metavar="HOST[:PORT]",
                        default=os.environ.get("SERVELAB_LAZY_REGISTRY") or None,
                        help="the HTTPS registry the lazy pulls use, serving the same storage "
                        "as the cold-start registry (default: $SERVELAB_LAZY_REGISTRY; unset: "
                        "the cold-start registry itself)")
    parser.add_argument("--registry-ca", type=input_path, metavar="FILE",
                        default=os.environ.get("SERVELAB_REGISTRY_CA") or None,
                        help="the CA that signed the lazy registry's certificate (default: "
                        "$SERVELAB_REGISTRY_CA; unset: the system's CAs)")
    parser.add_argument("--lazy-registry-log", type=input_path, metavar="FILE",
                        default=os.environ.get("SERVELAB_LAZY_REGISTRY_LOG") or None,
                        help="the lazy registry's access log: each lazy pull checks it fetched "
                        "the indexed layers in parts, and counts the bytes fetched")
    parser.add_argument("--require-lazy", action="store_true",
                        help="exit 3 when the lazy pull cannot be measured here (without it: "
                        "recorded as 'lazy not measured: <reason>')")
    parser.add_argument("--lazy-min-layer-size", type=_min_layer_size, metavar="BYTES",
                        help="layers smaller than this get no SOCI zTOC and are fetched whole "
                        "(default: 10485760, SOCI's own)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.run.options import parse_shard
    from servelab.run.render import render_end
    from servelab.run.runner import run_experiment

    exp, opts = experiment_and_options(args)
    opts.calibration = Path(args.calibration) if args.calibration else None
    if args.shard is not None:
        opts.shard = parse_shard(args.shard, [a.name for a in exp.arms()],
                                 args.repeats or exp.repeats)
    result = run_experiment(exp, opts, progress)
    if opts.shard is None:  # a shard's verdict is the merge's (servelab report)
        _github(result.out_dir)
    from servelab.commands._common import emit  # the text verdict quotes failed steps' logs

    emit(render_end(result.summary, result.out_dir, fmt=args.format, kept=args.keep), None,
         args.format)
    return result.exit_code


def progress(msg: str) -> None:
    """A run's progress line on stderr (120 characters, short digests: logs.log_line)."""
    import sys

    from servelab.logs import log_line

    print(log_line(f"servelab: {msg}"), file=sys.stderr, flush=True)


def experiment_and_options(args: argparse.Namespace) -> tuple[Experiment, RunOptions]:
    """The experiment and the run's options from :func:`add_run_options`' arguments."""
    from pathlib import Path

    from servelab.errors import InputError, UsageError
    from servelab.run.options import RunOptions, parse_stages
    from servelab.spec import load_experiment

    if args.repeats is not None and not 1 <= args.repeats <= 50:
        raise UsageError("--repeats must be between 1 and 50")
    try:
        exp = load_experiment(Path(args.experiment), args.document, tuple(args.allow_path))
    except InputError:
        _annotate_spec(Path(args.experiment), args.document, tuple(args.allow_path))
        raise
    return exp, RunOptions(
        out_dir=Path(args.out), stages=parse_stages(args.stages), repeats=args.repeats,
        fail_on=args.fail_on, gpu=args.gpu,
        trivy_cache_dir=Path(args.trivy_cache_dir) if args.trivy_cache_dir else None,
        db_repositories=list(args.db_repository), offline=args.offline,
        run_name=args.run_name, keep=args.keep,
        cold_start_registry=args.cold_start_registry, node_has=list(args.node_has),
        registry_data=Path(args.registry_data) if args.registry_data else None,
        registry_log=Path(args.registry_log) if args.registry_log else None,
        drop_caches=args.drop_caches,
        lazy=tuple(args.lazy), lazy_registry=args.lazy_registry,
        registry_ca=Path(args.registry_ca) if args.registry_ca else None,
        lazy_registry_log=Path(args.lazy_registry_log) if args.lazy_registry_log else None,
        require_lazy=args.require_lazy, lazy_min_layer_size=args.lazy_min_layer_size,
    )

def _annotate_spec(path: object, document: str | None, allowed: tuple[AllowedPath, ...]) -> None:
    """Under GitHub Actions, every problem of an invalid experiment as an annotation."""
    import sys
    from pathlib import Path

    from servelab import github

    if not github.in_github_actions():
        return
    from servelab.report import get_reporter
    from servelab.spec import validate_files

    report = validate_files([Path(str(path))], document, allowed)
    sys.stdout.write(get_reporter("github").render(report))


def _github(out_dir: object) -> None:
    """Outputs, job summary and annotations, only when running under GitHub Actions."""
    from pathlib import Path

    from servelab import github

    if github.in_github_actions():
        github.publish_run(Path(str(out_dir)))
