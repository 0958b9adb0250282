"""Build each arm of an experiment N times and say whether the builds are bit-identical.

Every build is independent: docker buildx build --no-cache, exported as an OCI archive (its
timestamps clamped by servelab as it re-gzips the new layers), SOURCE_DATE_EPOCH from
build.sourceDateEpoch or the commit time of the build context's last commit, provenance and SBOM
attestations off, and the build network the spec asks for (build.network). Each result is loaded
into the engine (docker load) and recorded: per-platform manifest digest, config digest, layers
(digest, compressed and uncompressed size, the instruction that made it), image sizes, base
images and their digests, build time and the builder (engine, buildx, BuildKit, driver). An arm
is reproducible when every repeat has the same manifest digest; otherwise the first differing
pair is explained (what files or settings differ).
It is the loop of servelab run with only the build stage: an arm with gitRef is built from a
temporary git worktree of that ref, as there.

Before building: every FROM must be pinned by digest (rule base-unpinned; an arm with
allowUnpinnedBase may build anyway), the disk must have 3x the last image's size free (or
SERVELAB_MIN_FREE_BYTES, default 1 GiB), and the builder must be able to export OCI with
rewritten timestamps; when the current one cannot, a docker-container builder from a
digest-pinned moby/buildkit image is created for the run and removed afterwards.

Output: OUT/<arm>/repeat-<n>/{build.json,build.log}, OUT/images/<digest>.oci.tar (one
per distinct digest), OUT/build-summary.json, and a report on stdout. Loaded images are removed
at the end unless --keep-image, which keeps them and prints name@sha256 of each tested image.

Exit codes: 0 built (and the treatment reproducible when gates.reproducible), 1 the treatment is
not reproducible, a build failed, or a base is unpinned, 2 bad input (invalid experiment, no
commit for SOURCE_DATE_EPOCH), 3 no capable builder, no engine, or not enough disk.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.build.render import FORMATS
    from servelab.commands._common import (
        add_allow_path,
        add_quiet,
        ascii_int,
        input_path,
        output_path,
    )

    add_quiet(parser)

    parser.add_argument("experiment", type=input_path, metavar="EXPERIMENT",
                        help="the experiment YAML file")
    parser.add_argument("--document", metavar="NAME",
                        help="the metadata.name of the experiment in a multi-document file")
    add_allow_path(parser)
    parser.add_argument("--repeats", type=ascii_int, metavar="N",
                        help="builds per arm (default: the experiment's repeats)")
    parser.add_argument("--out", metavar="DIR", default="servelab-out",
                        help="output directory (default: servelab-out)")
    parser.add_argument("--keep-image", action="store_true",
                        help="keep the loaded images and print name@sha256 of each")
    parser.add_argument("-f", "--format", default="text", choices=FORMATS,
                        help="output format (default text)")
    parser.add_argument("-o", "--output", type=output_path, metavar="FILE",
                        help="write the report to FILE instead of standard output")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from servelab.build.render import render
    from servelab.commands._common import emit
    from servelab.errors import UsageError
    from servelab.run.options import RunOptions
    from servelab.run.runner import build_experiment
    from servelab.spec import load_experiment

    if args.repeats is not None and args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    exp = load_experiment(Path(args.experiment), args.document, tuple(args.allow_path))
    result = build_experiment(exp, RunOptions(out_dir=Path(args.out), repeats=args.repeats,
                                              keep=args.keep_image))
    kept = []
    if args.keep_image:
        kept = list(dict.fromkeys(r.tested_ref() or "" for a in result.arms
                                  for r in a.records if r.tested_ref()))
    emit(render(result, kept, args.format), args.output, args.format)
    return result.exit_code
