"""Report what this machine can do for servelab, trying each part for real.

Checks: the docker client, the engine (through the Docker SDK), the image store, buildx, an
actual tiny build exported as OCI with rewrite-timestamp=true (and that SOURCE_DATE_EPOCH
landed in the image config), Trivy and its DB, hadolint, git, and nvidia-smi with its GPUs.
Each missing part comes with a fix.

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
    import json
    import sys

    from servelab.doctor import run_doctor
    from servelab.errors import ExitCode

    result = run_doctor(gpu_required=args.gpu, build_probe=not args.no_build)
    if args.format == "json":
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        for c in result.checks:
            mark = "ok  " if c.ok else ("FAIL" if c.required else "warn")
            sys.stdout.write(f"[{mark}] {c.name}: {c.detail}\n")
            if not c.ok and c.fix:
                sys.stdout.write(f"       fix: {c.fix}\n")
        missing = result.missing_required
        sys.stdout.write(
            "doctor: all required parts work\n" if not missing
            else f"doctor: {len(missing)} required part(s) missing: "
            + ", ".join(c.name for c in missing) + "\n"
        )
    return int(ExitCode.MISSING_TOOL if result.missing_required else ExitCode.OK)
