"""The smoke stage's GPU part: the image's CUDA needs against the host before the start,
the GPU device request, and the checks inside the container once it is ready.

The logic (nvidia-smi parsing, NVIDIA_REQUIRE_* rules, driver table, the Python probe) is
:mod:`servelab.gpu`; this module applies it to one smoke run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servelab.errors import InputError
from servelab.smoke.result import Problem, SmokeResult, SmokeSettings, set_verdict


def _image_env(config: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in config.get("Env") or []:
        k, _, v = str(item).partition("=")
        out[k] = v
    return out


def cdi_gpu_specs(dirs: list[str]) -> list[Path]:
    """The CDI spec files in *dirs* (the engine's ``CDISpecDirs``) that define nvidia.com/gpu."""
    found: list[Path] = []
    for d in dirs:
        for spec in sorted(Path(d).glob("*")) if Path(d).is_dir() else []:
            try:
                if "nvidia.com/gpu" in spec.read_text(errors="replace"):
                    found.append(spec)
            except OSError:
                continue
    return found


def _gpu_mode(s: SmokeSettings, client: Any) -> str:
    """``legacy`` (--gpus, the runtime hook) or ``cdi`` (--device nvidia.com/gpu=...)."""
    if s.gpu.mode in ("legacy", "cdi"):
        return s.gpu.mode
    try:
        dirs = client.info().get("CDISpecDirs") or []
    except Exception:
        dirs = []
    return "cdi" if cdi_gpu_specs(list(dirs)) else "legacy"


def gpu_preflight(res: SmokeResult, s: SmokeSettings, client: Any, config: dict[str, Any]
                  ) -> bool:
    """The image's NVIDIA_REQUIRE_* against the host, before starting. True: verdict decided."""
    from servelab import gpu

    mode = _gpu_mode(s, client)
    host = gpu.host_gpus()
    res.gpu = {"required": True, "mode": mode, "host": host.to_dict(), "image": None,
               "inside": None}
    if not host.available:
        set_verdict(res, "gpu-unavailable", f"GPU unavailable: {host.reason}",
                    "run on a machine with an NVIDIA GPU and driver, or drop gpu.required / --gpu")
        return True
    assessment = gpu.assess_image(_image_env(config), host, cdi=mode == "cdi",
                                  gpu_required=True)
    res.gpu["image"] = assessment.to_dict()
    res.gpu["host_handle"] = host
    if mode == "cdi":
        res.notes.append("CDI mode: the NVIDIA container stack does not check the image's "
                         "NVIDIA_REQUIRE_*; servelab's check was the only one")
    if not assessment.ok:
        bad = [f for f in assessment.findings if f.severity.value == "error"]
        set_verdict(res, "gpu-incompatible", "; ".join(f.message for f in bad)[:1000],
                    bad[0].fix if bad else None)
        return True
    return False


def device_requests(s: SmokeSettings, mode: str) -> list[Any]:
    from docker.types import DeviceRequest

    count = s.gpu.count
    if mode == "cdi":
        ids = (["nvidia.com/gpu=all"] if count == "all"
               else [f"nvidia.com/gpu={i}" for i in range(int(count))])
        return [DeviceRequest(driver="cdi", device_ids=ids)]
    return [DeviceRequest(count=-1 if count == "all" else int(count), capabilities=[["gpu"]])]


def parse_memory_used(text: str) -> list[dict[str, int | None]]:
    """``index, memory.used`` rows (csv, noheader, nounits) -> [{index, memory_used_mib}];
    a value nvidia-smi cannot tell ("[N/A]") is None, a row that is not two fields is left out."""
    rows: list[dict[str, int | None]] = []
    for line in text.splitlines():
        index, sep, used = (x.strip() for x in line.partition(","))
        if sep and index.isdigit():
            rows.append({"index": int(index),
                         "memory_used_mib": int(used) if used.isdigit() else None})
    return rows


def gpu_inside(res: SmokeResult, cid: str) -> None:
    """After ready: GPUs visible inside, torch's CUDA, arch list and matmul, memory in use."""
    from servelab import gpu, proc
    from servelab.errors import CommandError

    if res.gpu is None:
        return
    host = res.gpu.pop("host_handle", None)
    inside: dict[str, Any] = {}
    smi = proc.run(["docker", "exec", cid, "nvidia-smi", "-L"], check=False, timeout=60)
    inside["nvidia_smi_l"] = (smi.stdout or smi.stderr).strip()[:2000]
    inside["gpus_visible"] = smi.returncode == 0 and "GPU " in smi.stdout
    try:
        out = proc.run(["docker", "exec", "-i", cid, "python3", "-"], check=False, timeout=180,
                       input_text=gpu.probe_script_text())
        probe = gpu.parse_probe_output(out.stdout)
    except (CommandError, InputError) as e:
        probe = {"status": "error", "error": e.message.splitlines()[0]}
    inside["python_probe"] = probe
    findings = gpu.assess_probe(probe, host) if host is not None else []
    inside["findings"] = [f.to_dict() for f in findings]
    mem = proc.run(["nvidia-smi", "--query-gpu=index,memory.used",
                    "--format=csv,noheader,nounits"], check=False, timeout=30)
    inside["memory_used"] = parse_memory_used(mem.stdout) if mem.returncode == 0 else None
    res.gpu["inside"] = inside
    errors = [f for f in findings if f.severity.value == "error"]
    if not inside["gpus_visible"] or errors:
        why = "no GPU listed by nvidia-smi -L inside" if not inside["gpus_visible"] else ""
        why = "; ".join([w for w in [why, *(f.message for f in errors)] if w])
        res.problems.append(Problem("gpu-failed", why[:1000]))


