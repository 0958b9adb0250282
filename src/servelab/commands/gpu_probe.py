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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the core is imported inside run(), to keep --help light
    from servelab.findings import Finding
    from servelab.gpu import GpuProbeReport, HostGpuInfo, ImageGpuAssessment


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--image-env", metavar="FILE",
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
    parser.add_argument("--python", metavar="PATH",
                        help="the interpreter to probe torch with (default: this one)")
    parser.add_argument("--no-python-probe", action="store_true",
                        help="skip the Python/torch probe")
    parser.add_argument("--no-matmul", action="store_true", help="skip the matmul check")
    parser.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS",
                        help="limit for the Python probe (default 180; CUDA init can hang)")
    parser.add_argument("-f", "--format", default="text", choices=["text", "json"],
                        help="output format (default: text)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write the report to FILE instead of standard output")
    parser.add_argument(
        "--fail-on", default="error", choices=["error", "warning", "info", "none"],
        help="exit 1 when a finding reaches this severity (default: error)",
    )


def _read_env(path: str) -> dict[str, str]:
    import sys
    from pathlib import Path

    from servelab.errors import InputError
    from servelab.gpu import parse_env_text

    if path == "-":
        return parse_env_text(sys.stdin.read(), source="<stdin>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the image environment: {e}", file=path) from e
    return parse_env_text(text, source=path)


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from servelab.commands._common import emit
    from servelab.errors import CapabilityError
    from servelab.findings import reaches
    from servelab.gpu import probe_host

    env = _read_env(args.image_env) if args.image_env else None
    python = None if args.no_python_probe else (args.python or sys.executable)
    report = probe_host(
        python=python, env=env, requires=args.require, cdi=args.cdi,
        gpu_required=args.require_gpu, matmul=not args.no_matmul, probe_timeout=args.timeout,
    )
    if args.format == "json":
        text = json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
    else:
        text = render_text(report)
    emit(text, args.output)
    if args.require_gpu and not report.host.available:
        raise CapabilityError(
            f"a GPU is required but unavailable: {report.host.reason}",
            hint="run on a machine where nvidia-smi lists the GPU, or drop --require-gpu",
        )
    return 1 if any(reaches(f.severity, args.fail_on) for f in report.findings) else 0


def render_text(report: GpuProbeReport) -> str:
    """The human-readable report of a :class:`servelab.gpu.GpuProbeReport`."""
    lines = _host_lines(report.host)
    if report.probe is not None:
        lines += _probe_lines(report.probe)
    if report.image is not None:
        lines += _image_lines(report.image)
    lines += _finding_lines(report.findings)
    lines.append(f"gpu-probe: {report.status}")
    return "\n".join(lines) + "\n"


def _host_lines(host: HostGpuInfo) -> list[str]:
    if not host.available:
        return [f"GPU unavailable: {host.reason}"]
    cuda = f"CUDA {host.cuda_version}" if host.cuda_version else "CUDA version unknown"
    out = [f"GPU available: {len(host.gpus)} GPU(s), driver {host.driver_version}, {cuda} "
           "(the newest CUDA this driver supports)"]
    for g in host.gpus:
        brand = f"brand {g.product_brand} (brand={g.brand})" if g.product_brand else "brand unknown"
        mem = f"{g.memory_total_mib} MiB" if g.memory_total_mib is not None else "memory unknown"
        cap = f"compute capability {g.compute_cap} ({g.sm})" if g.compute_cap else "capability ?"
        out.append(f"  GPU {g.index}: {g.name}, {brand}, {cap}, {mem}, {g.uuid}")
    out += [f"  note: {n}" for n in host.notes]
    return out


def _probe_lines(probe: dict[str, Any]) -> list[str]:
    if probe.get("status") == "error":
        return [f"python probe: failed: {probe.get('error')}"]
    py = probe.get("python") or {}
    head = f"python probe: {py.get('executable')} (Python {py.get('version')}): "
    torch = probe.get("torch") or {}
    if not torch.get("importable"):
        return [head + f"torch not importable ({torch.get('error')})"]
    head += f"torch {torch.get('version')} (CUDA {torch.get('cuda_version')}), "
    if not torch.get("cuda_available"):
        return [head + f"CUDA not available: {torch.get('cuda_error')}"]
    out = [head + f"CUDA available, {torch.get('device_count')} device(s), arch list "
           + " ".join(torch.get("arch_list") or [])]
    out += [_device_line(d) for d in torch.get("devices") or []]
    return out


def _device_line(dev: dict[str, Any]) -> str:
    if dev.get("error"):
        return f"  device {dev.get('index')}: error: {dev['error']}"
    cov = dev.get("arch_coverage") or {}
    how = {"sass": "SASS", "ptx": "PTX JIT only"}.get(cov.get("kind", ""), "NOT covered")
    text = f"  device {dev.get('index')}: {dev.get('name')} {dev.get('sm')}: {how}"
    if cov.get("via"):
        text += f" via {cov['via']}"
    mm = dev.get("matmul")
    if mm:
        text += "; matmul " + (f"ok (rel err {mm.get('rel_err'):.1e})" if mm.get("ok")
                               else f"FAILED ({mm.get('error')})")
    mem = dev.get("memory") or {}
    if "device_used_mib" in mem:
        text += f"; {mem['device_used_mib']} of {mem.get('device_total_mib')} MiB in use"
    return text


def _image_lines(image: ImageGpuAssessment) -> list[str]:
    out = ["image requirements:"]
    out += [f"  note: {n}" for n in image.notes]
    verdict = image.verdict
    if verdict is None:
        return [*out, "  not evaluated (GPU unavailable)"]
    if not verdict.declared.requirements and not verdict.declared.errors:
        out.append("  no NVIDIA_REQUIRE_* or CUDA_VERSION declared")
    out += [f"  {r.explain()}" for r in verdict.results]
    out += [f"  note: {n}" for n in verdict.notes]
    if image.driver is not None:
        out.append(f"  driver table: {image.driver.status}: {image.driver.message}")
    return out


def _finding_lines(findings: Sequence[Finding]) -> list[str]:
    return [
        f"{f.severity.value} [{f.rule_id}] {f.message}" + (f"\n    fix: {f.fix}" if f.fix else "")
        for f in findings
    ]
