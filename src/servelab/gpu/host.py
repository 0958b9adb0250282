"""The Python probe (:mod:`servelab.gpu.torch_probe`), its JSON, and ``servelab gpu-probe``'s core.

:func:`assess_probe` turns the probe's JSON into findings; :func:`probe_host` runs nvidia-smi,
the probe and an image's requirements against this host.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servelab import proc
from servelab.errors import CommandError, InputError
from servelab.findings import Finding, Severity
from servelab.gpu.compat import ImageGpuAssessment, assess_image
from servelab.gpu.findings import finding
from servelab.gpu.require import parse_expression
from servelab.gpu.smi import HostGpuInfo, host_gpus


def probe_script_text() -> str:
    """The source of the standalone probe, to run with any Python (e.g. inside a container)."""
    from importlib import resources

    return resources.files("servelab.gpu").joinpath("torch_probe.py").read_text(encoding="utf-8")


def parse_probe_output(stdout: str) -> dict[str, Any]:
    """The probe's JSON document: the last stdout line that is a JSON object."""
    for raw in reversed(stdout.strip().splitlines()):
        line = raw.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict) and str(doc.get("schema", "")).startswith(
                "servelab.gpu-probe-py/"
            ):
                return doc
    raise InputError("the Python GPU probe printed no result JSON",
                     hint="run python -m servelab.gpu.torch_probe by hand to see what it prints")


def assess_probe(probe: Mapping[str, Any], host: HostGpuInfo) -> list[Finding]:
    """Findings from the probe's JSON: torch present, CUDA initialised, arch list, matmul."""
    if probe.get("status") == "error":
        sev = None if host.available else Severity.WARNING
        return [finding("gpu-probe-failed", f"the Python probe failed: {probe.get('error')}",
                        severity=sev)]
    torch = probe.get("torch") or {}
    if not torch.get("importable"):
        why = torch.get("error") or "not installed"
        return [finding("gpu-torch-missing", f"torch is not importable ({why}): CUDA "
                        "initialisation, arch list and matmul were not checked")]
    if not torch.get("cuda_available"):
        if not host.available:
            return []
        return [finding("gpu-torch-cuda-unavailable", f"torch {torch.get('version')} (CUDA "
                        f"{torch.get('cuda_version')}) cannot use the GPU: "
                        f"{torch.get('cuda_error') or 'torch.cuda.is_available() is False'}")]
    out: list[Finding] = []
    for dev in torch.get("devices") or []:
        out += _device_findings(dev)
    return out


def _device_findings(dev: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    idx = str(dev.get("index"))
    cover = dev.get("arch_coverage") or {}
    kind = cover.get("kind")
    if kind == "none":
        out.append(finding("gpu-arch-not-covered", f"GPU {idx} ({dev.get('name')}, "
                           f"{dev.get('sm')}) is not in torch's arch list {cover.get('arch_list')}",
                           context={"gpu": idx}))
    elif kind == "ptx":
        out.append(finding("gpu-arch-ptx-only", f"GPU {idx} ({dev.get('sm')}) only via PTX "
                           f"{cover.get('via')}", context={"gpu": idx}))
    mm = dev.get("matmul") or {}
    if mm and not mm.get("ok"):
        out.append(finding("gpu-matmul-failed", f"GPU {idx}: {mm.get('error') or 'wrong result'}",
                           context={"gpu": idx}))
    return out


def run_python_probe(
    python: str, *, matmul: bool = True, timeout: float = 180.0
) -> dict[str, Any]:
    """Run the probe with *python* (script on stdin, as inside a container) and parse its JSON.

    A probe that crashes, hangs or prints no JSON gives ``{"status": "error", "error": ...}``.
    """
    argv = [python, "-", *([] if matmul else ["--no-matmul"])]
    try:
        res = proc.run(argv, input_text=probe_script_text(), timeout=timeout, check=False)
    except CommandError as e:
        return {"status": "error", "error": e.message.splitlines()[0]}
    if res.returncode != 0:
        tail = " | ".join(ln for ln in res.stderr.strip().splitlines()[-3:])
        return {"status": "error", "error": f"exit code {res.returncode}: {tail[:400]}"}
    try:
        return parse_probe_output(res.stdout)
    except InputError as e:
        return {"status": "error", "error": e.message}


@dataclass(frozen=True)
class GpuProbeReport:
    """What ``servelab gpu-probe`` found: host, Python probe, and an image's requirements."""

    host: HostGpuInfo
    probe: dict[str, Any] | None
    image: ImageGpuAssessment | None
    findings: tuple[Finding, ...]
    gpu_required: bool = False

    @property
    def status(self) -> str:
        """``unavailable`` (no GPU), ``failed`` (an error finding) or ``ok``."""
        if not self.host.available:
            return "unavailable"
        if any(f.severity is Severity.ERROR for f in self.findings):
            return "failed"
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "gpu_required": self.gpu_required,
            "host": self.host.to_dict(),
            "python_probe": self.probe,
            "image": self.image.to_dict() if self.image else None,
            "findings": [f.to_dict() for f in self.findings],
        }


def _extra_requirements(exprs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    for e in exprs:
        parse_expression(e)  # a typo on the command line is bad input (exit 2), not a finding
    return tuple((f"--require #{n}", e) for n, e in enumerate(exprs, 1))


def probe_host(
    *, python: str | None, env: Mapping[str, str] | None = None, requires: Sequence[str] = (),
    cdi: bool = False, gpu_required: bool = False, matmul: bool = True,
    probe_timeout: float = 180.0, smi_timeout: float | None = None,
) -> GpuProbeReport:
    """``servelab gpu-probe``: nvidia-smi, the Python probe with *python* (None: skip it), and
    an image's requirements (*env* and/or *requires*) against this host."""
    extra = _extra_requirements(requires)  # bad input fails before anything runs
    host = host_gpus(timeout=smi_timeout)
    found: list[Finding] = []
    if not host.available:
        found.append(finding("gpu-unavailable", f"GPU unavailable: {host.reason}",
                             severity=Severity.ERROR if gpu_required else None))
    image = None
    if env is not None or extra:
        image = assess_image(env or {}, host, cdi=cdi, gpu_required=gpu_required, extra=extra)
        found += [f for f in image.findings if f.rule_id != "gpu-unavailable"]
    probe = run_python_probe(python, matmul=matmul, timeout=probe_timeout) if python else None
    if probe is not None:
        found += assess_probe(probe, host)
    return GpuProbeReport(host, probe, image, tuple(found), gpu_required)
