"""Report what this machine can do for servelab, trying each part for real.

Checks: the docker client, the engine (through the Docker SDK), the image store, buildx, an
actual tiny build exported as OCI as servelab's builds export (zstd; and that
SOURCE_DATE_EPOCH landed in the image config), Trivy and its DB, hadolint, git, and
nvidia-smi with its GPUs. Each missing part comes with a fix.

Exit codes: 0 every required part works, 3 a required part is missing (GPU is required only
with --gpu).
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", action="store_true", help="treat a missing GPU as a failure")
    parser.add_argument(
        "--no-build", action="store_true",
        help="skip the test build (faster; OCI export is then not checked)",
    )
    parser.add_argument("-f", "--format", choices=["text", "json"], default="text",
                        help="output format (default: text)")


def run(args: argparse.Namespace) -> int:
    import sys

    from servelab.errors import ExitCode
    from servelab.run.doctor import render, run_doctor

    result = run_doctor(gpu_required=args.gpu, build_probe=not args.no_build)
    sys.stdout.write(render(result, args.format))
    return int(ExitCode.MISSING_TOOL if result.missing_required else ExitCode.OK)
