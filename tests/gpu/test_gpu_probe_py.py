"""The standalone Python probe (servelab.gpu.torch_probe) and the findings drawn from its JSON.

torch is not installed on the test machines: the probe runs for real under the venv's Python
and must report torch absent without crashing. Two stand-in ``torch`` packages, written to a
temporary directory, cover a CPU-only build and a broken install; the CUDA paths (arch list,
matmul, memory) are checked on a GPU machine with scripts/gpu-check.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from servelab import gpu
from servelab.errors import InputError, ToolMissingError
from servelab.gpu.torch_probe import arch_coverage

H200 = gpu.HostGpuInfo(True, driver_version="580.65.06", cuda_version="13.0", gpus=(
    gpu.GpuInfo(0, "NVIDIA H200", "GPU-0", "580.65.06", 143771, "9.0", "NVIDIA"),))


def _run(argv: list[str], **kw: Any) -> dict[str, Any]:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, **kw)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1, res.stdout
    doc: dict[str, Any] = json.loads(lines[0])
    return doc


def test_probe_module_without_torch() -> None:
    doc = _run([sys.executable, "-m", "servelab.gpu.torch_probe"])
    assert doc["schema"] == "servelab.gpu-probe-py/1"
    assert doc["status"] == "no-torch"
    assert doc["torch"]["importable"] is False
    assert "torch" in doc["torch"]["error"]
    assert doc["python"]["executable"] == sys.executable
    assert gpu.parse_probe_output(json.dumps(doc)) == doc


def test_probe_script_on_stdin_as_in_a_container() -> None:
    doc = gpu.run_python_probe(sys.executable)
    assert doc["status"] == "no-torch"
    findings = gpu.assess_probe(doc, H200)
    assert [f.rule_id for f in findings] == ["gpu-torch-missing"]
    assert findings[0].severity.value == "info"


def _interpreter(version: str) -> str | None:
    """python<version> from PATH, else from pyenv's versions (its shims need PYENV_VERSION)."""
    found = [shutil.which(f"python{version}")]
    found += sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob(
        f"{version}.*/bin/python{version}"))
    for exe in filter(None, found):
        res = subprocess.run([exe, "-c", "pass"], capture_output=True, timeout=30, check=False)
        if res.returncode == 0:
            return exe
    return None


@pytest.mark.parametrize("version", ["3.7", "3.8", "3.9", "3.12", "3.13"])
def test_probe_runs_on_other_pythons(version: str) -> None:
    exe = _interpreter(version)
    if exe is None:
        pytest.skip(f"no runnable python{version} here")
    doc = _run([exe, "-"], input=gpu.probe_script_text())
    assert doc["status"] == "no-torch"
    assert doc["python"]["version"].startswith(version)


CPU_TORCH = '''
__version__ = "2.8.0+cpu"
class version:
    cuda = None
class cuda:
    @staticmethod
    def is_available():
        return False
    @staticmethod
    def init():
        raise AssertionError("Torch not compiled with CUDA enabled")
'''

BROKEN_TORCH = '''
raise OSError("libcudart.so.12: cannot open shared object file: No such file or directory")
'''


@pytest.mark.parametrize(
    ("source", "status", "field", "text"),
    [
        (CPU_TORCH, "no-cuda", "cuda_error", "Torch not compiled with CUDA enabled"),
        (BROKEN_TORCH, "no-torch", "error", "libcudart.so.12"),
    ],
    ids=["cpu-only-build", "broken-install"],
)
def test_probe_with_stand_in_torch(tmp_path: Path, source: str, status: str, field: str,
                                   text: str) -> None:
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(source)
    doc = _run([sys.executable, "-m", "servelab.gpu.torch_probe"],
               env={"PYTHONPATH": f"{tmp_path}:{Path(gpu.__file__).parents[2]}"})
    assert doc["status"] == status
    assert text in doc["torch"][field]
    findings = gpu.assess_probe(doc, H200)
    if status == "no-cuda":
        assert doc["torch"]["version"] == "2.8.0+cpu"
        assert doc["torch"]["cuda_version"] is None
        assert [f.rule_id for f in findings] == ["gpu-torch-cuda-unavailable"]
        assert findings[0].severity.value == "error"
        assert gpu.assess_probe(doc, gpu.unavailable("no GPU")) == []


@pytest.mark.parametrize(
    ("cap", "archs", "kind", "via"),
    [
        ((9, 0), ["sm_50", "sm_80", "sm_86", "sm_90"], "sass", "sm_90"),
        ((8, 9), ["sm_80", "sm_86", "sm_90"], "sass", "sm_86"),
        ((8, 6), ["sm_86", "sm_80"], "sass", "sm_86"),
        ((9, 0), ["sm_80", "sm_86"], "none", None),
        ((9, 0), ["sm_80", "compute_80"], "ptx", "compute_80"),
        ((12, 0), ["sm_90", "sm_100", "compute_90", "compute_100"], "ptx", "compute_100"),
        ((9, 0), ["sm_90a"], "sass", "sm_90a"),
        ((10, 0), ["sm_90a", "compute_90a"], "none", None),
        ((10, 3), ["sm_100f"], "sass", "sm_100f"),
        ((7, 5), ["compute_80"], "none", None),
        ((9, 0), [], "none", None),
    ],
)
def test_arch_coverage(cap: tuple[int, int], archs: list[str], kind: str,
                       via: str | None) -> None:
    got = arch_coverage(cap, archs)
    assert (got["kind"], got["via"]) == (kind, via)
    assert gpu.arch_coverage is arch_coverage


def _probe_doc(**device: Any) -> dict[str, Any]:
    dev = {"index": 0, "name": "NVIDIA H200", "capability": "9.0", "sm": "sm_90",
           "arch_coverage": arch_coverage((9, 0), ["sm_80", "sm_90"]),
           "matmul": {"ok": True, "rel_err": 1e-7}, "memory": {"device_used_mib": 530}}
    dev.update(device)
    return {"schema": "servelab.gpu-probe-py/1", "status": "ok", "torch": {
        "importable": True, "version": "2.8.0", "cuda_version": "12.8", "cuda_available": True,
        "arch_list": ["sm_80", "sm_90"], "device_count": 1, "devices": [dev]}}


@pytest.mark.parametrize(
    ("device", "rules"),
    [
        ({}, []),
        ({"arch_coverage": arch_coverage((9, 0), ["sm_80", "compute_80"])},
         ["gpu-arch-ptx-only"]),
        ({"arch_coverage": arch_coverage((9, 0), ["sm_80"])}, ["gpu-arch-not-covered"]),
        ({"matmul": {"ok": False, "error": "RuntimeError: CUDA error: no kernel image"}},
         ["gpu-matmul-failed"]),
    ],
    ids=["ok", "ptx-only", "not-covered", "matmul-failed"],
)
def test_assess_probe_synthetic(device: dict[str, Any], rules: list[str]) -> None:
    assert [f.rule_id for f in gpu.assess_probe(_probe_doc(**device), H200)] == rules


def test_failed_probe_is_reported() -> None:
    doc = {"status": "error", "error": "command timed out"}
    got = gpu.assess_probe(doc, H200)
    assert [(f.rule_id, f.severity.value) for f in got] == [("gpu-probe-failed", "error")]
    assert gpu.assess_probe(doc, gpu.unavailable("x"))[0].severity.value == "warning"


def test_probe_output_must_be_there() -> None:
    with pytest.raises(InputError, match="no result JSON"):
        gpu.parse_probe_output("Traceback (most recent call last):\n  ...\n")
    noisy = 'warning: something\n{"schema": "servelab.gpu-probe-py/1", "status": "ok"}\n'
    assert gpu.parse_probe_output(noisy)["status"] == "ok"


def test_missing_interpreter_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError):
        gpu.run_python_probe(str(tmp_path / "no-such-python"))
