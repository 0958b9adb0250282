"""Probe this machine's NVIDIA GPUs and CUDA stack directly, without Docker.

Runs nvidia-smi (--query-gpu and -q: GPUs, driver, the driver's CUDA version, each GPU's
product brand) and the Python probe (servelab.gpu.torch_probe: torch importable, torch's CUDA,
CUDA initialisation, torch.cuda.get_arch_list() against each GPU's compute capability, a
small matmul, GPU memory in use) with the chosen interpreter.

With --image-env FILE (KEY=VALUE lines, or `docker image inspect` JSON) and/or --require EXPR
it also evaluates an image's NVIDIA_REQUIRE_* / CUDA_VERSION against this host with
libnvidia-container's rules, and NVIDIA's minimum driver for the image's CUDA major
(11.x >= 450, 12.x >= 525, 13.x >= 580), saying which condition failed.

No nvidia-smi, no driver or no GPU is reported as "GPU unavailable": a distinct result,
never a pass.

Exit codes: 0 ok (also "GPU unavailable" without --require-gpu), 1 a finding at or above
--fail-on (e.g. an unsatisfied requirement, torch without kernels for the GPU),
2 bad input (an invalid --require expression, an unreadable --image-env file),
3 GPU unavailable with --require-gpu, or the Python interpreter not found.

Examples:
  servelab gpu-probe
  servelab gpu-probe --format json --require-gpu
  servelab gpu-probe --require "cuda>=12.4 brand=tesla,driver>=470,driver<471"
  docker image inspect IMG > img.json && servelab gpu-probe --image-env img.json --cdi
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from servelab.commands._common import input_path, output_path
    parser.add_argument(
        "--image-env", type=input_path, metavar="FILE",
        help="an image's environment: KEY=VALUE lines or `docker image inspect` JSON "
        "('-' reads standard input)",
    )
    parser.add_argument(
        "--require", metavar="EXPR", action="append", default=[],
        help="a requirement in NVIDIA_REQUIRE_* syntax to evaluate (repeatable; all must hold)",
    )
    parser.add_argument("--cdi", action="store_true",
                        help="report for CDI mode, where the NVIDIA stack skips NVIDIA_REQUIRE_*")
    parser.add_argument("--require-gpu", action="store_true",
                        help="exit 3 when no GPU is usable (default: report it and exit 0)")
    parser.add_argument("--python", type=input_path, metavar="PATH",
                        help="the interpreter to probe torch with (default: this one)")
    parser.add_argument("--no-python-probe", action="store_true",
                        help="skip the Python/torch probe")
    parser.add_argument("--no-matmul", action="store_true", help="skip the matmul check")
    parser.add_argument("--timeout", type=_timeout, default=180.0, metavar="SECONDS",
                        help="limit for the Python probe (default 180; CUDA init can hang)")
    parser.add_argument("-f", "--format", default="text", choices=["text", "json"],
                        help="output format (default: text)")
    parser.add_argument("-o", "--output", type=output_path, metavar="FILE",
                        help="write the report to FILE instead of standard output")
    from servelab.commands._common import add_fail_on

    add_fail_on(parser)


def _timeout(text: str) -> float:
    """argparse type of --timeout: a finite number of seconds above 0."""
    from servelab.textio import finite_float

    try:
        value = finite_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 86400 seconds")
    return value


def _read_env(path: str) -> dict[str, str]:
    from pathlib import Path

    from servelab.gpu import parse_env_text
    from servelab.textio import STDIN, read_text

    text = read_text(Path(path), what="image environment file", stdin_ok=True)
    return parse_env_text(text, source="<stdin>" if path == STDIN else path)


def run(args: argparse.Namespace) -> int:
    import sys

    from servelab.commands._common import emit
    from servelab.errors import CapabilityError
    from servelab.findings import reaches
    from servelab.gpu import probe_host
    from servelab.gpu.render import render

    env = _read_env(args.image_env) if args.image_env else None
    python = None if args.no_python_probe else (args.python or sys.executable)
    report = probe_host(
        python=python, env=env, requires=args.require, cdi=args.cdi,
        gpu_required=args.require_gpu, matmul=not args.no_matmul, probe_timeout=args.timeout,
    )
    emit(render(report, args.format), args.output, args.format)
    if args.require_gpu and not report.host.available:
        raise CapabilityError(
            f"a GPU is required but unavailable: {report.host.reason}",
            hint="run on a machine where nvidia-smi lists the GPU, or drop --require-gpu",
        )
    return 1 if any(reaches(f.severity, args.fail_on) for f in report.findings) else 0
