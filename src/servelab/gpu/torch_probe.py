"""Probe Python, PyTorch and CUDA on this machine; print one JSON object on one line.

Standalone: only the standard library, plus torch when it is importable. Runs with Python 3.7
or newer, so the smoke stage can pipe this file into an image's own interpreter
(``python3 - < torch_probe.py``); on the host, ``python -m servelab.gpu.torch_probe``.

It reports whether torch imports, its version and CUDA version, whether CUDA initialises (and
why not), each device's name, compute capability, memory in use, whether
``torch.cuda.get_arch_list()`` covers the capability (SASS ``sm_XY``, or PTX ``compute_XY``
that the driver JIT-compiles), and a small matmul checked against the CPU. Timed apart:
``import_s`` (import torch), ``cuda_init_s`` (the CUDA check up to a first allocation, when the
context exists) and each device's first kernel (``matmul.seconds``).
Without torch it says so (status "no-torch") and exits 0: the JSON carries the verdict.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
import warnings
from typing import Any

SCHEMA = "servelab.gpu-probe-py/1"
MATMUL_N = 256
#: relative tolerance of the matmul check (loose enough for TF32, tight enough for garbage)
MATMUL_RTOL = 1e-2
ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


def _arch_key(text: str) -> tuple[str, int, int, str] | None:
    m = re.match(r"^(sm|compute)_(\d+?)(\d)([af]?)$", text)
    if not m:
        return None
    return m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)


def arch_coverage(capability: tuple[int, int], arch_list: list[str]) -> dict[str, Any]:
    """How an arch list serves a compute capability: "sass", "ptx" (JIT) or "none".

    SASS ``sm_XY`` runs on capability X.Z for Z >= Y (``sm_XYa`` only on exactly X.Y, and
    ``sm_XYf`` on the same family); PTX ``compute_XY`` is JIT-compiled for any capability
    >= X.Y.
    """
    major, minor = capability
    sass: tuple[int, str] | None = None
    ptx: tuple[int, int, str] | None = None
    for a in arch_list:
        key = _arch_key(a)
        if key is None:
            continue
        kind, amaj, amin, suffix = key
        if kind == "sm":
            fits = (amaj, amin) == (major, minor) if suffix == "a" else (
                amaj == major and amin <= minor)
            if fits and (sass is None or amin > sass[0]):
                sass = (amin, a)
        elif not suffix and (amaj, amin) <= (major, minor) and (
                ptx is None or (amaj, amin) > ptx[:2]):
            ptx = (amaj, amin, a)
    if sass:
        return {"kind": "sass", "via": sass[1], "arch_list": list(arch_list)}
    if ptx:
        return {"kind": "ptx", "via": ptx[2], "arch_list": list(arch_list)}
    return {"kind": "none", "via": None, "arch_list": list(arch_list)}


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


def _import_torch() -> tuple[Any, str | None]:
    try:
        import importlib

        return importlib.import_module("torch"), None
    except Exception as e:  # ImportError, or a broken install raising anything
        return None, _short(e)


def _cuda_init(torch: Any) -> tuple[bool, str | None]:
    """Whether CUDA initialises, and the reason torch gives when it does not."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            available = bool(torch.cuda.is_available())
        except Exception as e:
            return False, _short(e)
    if available:
        return True, None
    try:
        torch.cuda.init()
    except Exception as e:
        return False, _short(e)
    msgs = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
    return False, (msgs[0][:300] if msgs else "torch.cuda.is_available() is False")


def _matmul(torch: Any, index: int) -> dict[str, Any]:
    try:
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
        b = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
        ref = a.double() @ b.double()
        dev = torch.device("cuda", index)
        start = time.perf_counter()
        c = a.to(dev) @ b.to(dev)
        torch.cuda.synchronize(dev)
        seconds = time.perf_counter() - start
        err = float((c.cpu().double() - ref).abs().max().item())
        scale = max(float(ref.abs().max().item()), 1.0)
    except Exception as e:
        return {"ok": False, "error": _short(e)}
    ok = err <= MATMUL_RTOL * scale
    return {
        "ok": ok, "n": MATMUL_N, "max_abs_err": err, "rel_err": err / scale,
        "seconds": round(seconds, 6), "error": None if ok else "result differs from the CPU's",
    }


def _memory(torch: Any, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        free, total = torch.cuda.mem_get_info(index)
        out["device_used_mib"] = (total - free) // (1024 * 1024)
        out["device_total_mib"] = total // (1024 * 1024)
    except Exception as e:
        out["error"] = _short(e)
    try:
        out["torch_allocated_mib"] = torch.cuda.memory_allocated(index) // (1024 * 1024)
        out["torch_reserved_mib"] = torch.cuda.memory_reserved(index) // (1024 * 1024)
    except Exception as e:
        out.setdefault("error", _short(e))
    return out


def _device(torch: Any, index: int, arch_list: list[str], matmul: bool) -> dict[str, Any]:
    dev: dict[str, Any] = {"index": index}
    try:
        props = torch.cuda.get_device_properties(index)
        cap = (int(props.major), int(props.minor))
        dev.update({
            "name": str(props.name),
            "capability": f"{cap[0]}.{cap[1]}",
            "sm": f"sm_{cap[0]}{cap[1]}",
            "total_memory_mib": int(props.total_memory) // (1024 * 1024),
            "arch_coverage": arch_coverage(cap, arch_list),
        })
    except Exception as e:
        dev["error"] = _short(e)
        return dev
    # Device-wide memory in use, measured after CUDA initialised: it includes this probe's
    # own context (a few hundred MiB) and every other process on the GPU.
    dev["memory"] = _memory(torch, index)
    if matmul:
        dev["matmul"] = _matmul(torch, index)
    return dev


def _first_context(torch: Any, start: float) -> float | None:
    """Seconds from the CUDA check to a first allocation on device 0 (the context exists
    then): the CUDA init a server pays before it can load weights onto the GPU."""
    try:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    except Exception:
        return None
    return round(time.perf_counter() - start, 6)


def _torch_report(torch: Any, matmul: bool) -> dict[str, Any]:
    version = getattr(torch, "version", None)
    rep: dict[str, Any] = {
        "importable": True,
        "version": str(getattr(torch, "__version__", "?")),
        "cuda_version": getattr(version, "cuda", None),
        "devices": [],
    }
    start = time.perf_counter()
    ok, why = _cuda_init(torch)
    rep["cuda_available"], rep["cuda_error"] = ok, why
    if not ok:
        return rep
    rep["cuda_init_s"] = _first_context(torch, start)
    try:
        rep["arch_list"] = list(torch.cuda.get_arch_list())
        rep["device_count"] = int(torch.cuda.device_count())
    except Exception as e:
        rep["cuda_error"] = _short(e)
        return rep
    rep["devices"] = [
        _device(torch, i, rep["arch_list"], matmul) for i in range(rep["device_count"])
    ]
    return rep


def _status(rep: dict[str, Any]) -> str:
    if not rep.get("importable"):
        return "no-torch"
    if not rep.get("cuda_available"):
        return "no-cuda"
    for dev in rep.get("devices") or []:
        if dev.get("error") or (dev.get("arch_coverage") or {}).get("kind") == "none":
            return "failed"
        if not (dev.get("matmul") or {"ok": True}).get("ok"):
            return "failed"
    return "ok"


def probe(matmul: bool = True) -> dict[str, Any]:
    """Everything this module reports, as a dict (what :func:`main` prints)."""
    start = time.perf_counter()
    torch, error = _import_torch()
    import_s = round(time.perf_counter() - start, 6)
    if torch is None:
        rep: dict[str, Any] = {"importable": False, "error": error}
    else:
        rep = _torch_report(torch, matmul)
        rep["import_s"] = import_s
    return {
        "schema": SCHEMA,
        "status": _status(rep),
        "python": {
            "version": platform.python_version(),
            "executable": sys.executable,
            "implementation": platform.python_implementation(),
        },
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "torch": rep,
    }


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        sys.stdout.write((__doc__ or "") + "\noptions: --no-matmul  skip the matmul check\n")
        return 0
    doc = probe(matmul="--no-matmul" not in args)
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
