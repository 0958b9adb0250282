"""The output of ``servelab gpu-probe``: a :class:`~servelab.gpu.host.GpuProbeReport` as text
or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from servelab.findings import Finding
from servelab.gpu.compat import ImageGpuAssessment
from servelab.gpu.host import GpuProbeReport
from servelab.gpu.smi import HostGpuInfo

FORMATS = ("text", "json")


def render(report: GpuProbeReport, fmt: str) -> str:
    """*report* as text or json."""
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
    return render_text(report)


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
