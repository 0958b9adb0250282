"""``servelab gpu-probe``: exit codes, formats and the image-requirement options."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab.cli import main

DATA = Path(__file__).resolve().parent.parent / "data" / "gpu"
H200 = DATA / "hosts" / "synthetic-h200-driver580"
A100 = DATA / "hosts" / "synthetic-a100x8-driver535"


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_unavailable_is_stated_and_exits_0(no_smi: None, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    assert main(["gpu-probe", "--no-python-probe"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GPU unavailable: nvidia-smi not found")
    assert out.rstrip().endswith("gpu-probe: unavailable")


def test_require_gpu_exits_3_after_reporting(no_smi: None, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    assert main(["gpu-probe", "--no-python-probe", "--require-gpu", "-f", "json"]) == 3
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["status"] == "unavailable" and doc["gpu_required"] is True
    assert [f["severity"] for f in doc["findings"]] == ["error"]
    assert "a GPU is required but unavailable" in cap.err


def test_fail_on_warning_fails_when_unavailable(no_smi: None) -> None:
    assert main(["gpu-probe", "--no-python-probe", "--fail-on", "warning"]) == 1


def test_invalid_require_is_bad_input(no_smi: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpu-probe", "--no-python-probe", "--require", "cuda>=12.4 gpu=h100"]) == 2
    assert "unknown key 'gpu'" in capsys.readouterr().err


def test_missing_image_env_is_bad_input(no_smi: None, tmp_path: Path) -> None:
    assert main(["gpu-probe", "--no-python-probe", "--image-env",
                 str(tmp_path / "absent.env")]) == 2


def test_require_satisfied_on_h200(fake_smi: Callable[[Path], Path],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    fake_smi(H200)
    expr = "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471"
    assert main(["gpu-probe", "--no-python-probe", "-f", "json", "--require", expr]) == 0
    doc = _json(capsys)
    assert doc["status"] == "ok"
    assert doc["host"]["gpus"][0]["memory_total_mib"] == 143771
    res = doc["image"]["requirements"]["results"]
    assert [(r["source"], r["ok"], r["matched"]) for r in res] == [
        ("--require #1", True, "cuda>=12.4")]
    assert doc["image"]["driver"]["status"] == "ok"


def test_require_unsatisfied_says_which_condition(fake_smi: Callable[[Path], Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fake_smi(H200)
    rc = main(["gpu-probe", "--no-python-probe", "--require", "cuda>=13.1",
               "--require", "arch>=9.0"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "--require #1 on GPU 0: unsatisfied: 'cuda>=13.1' fails on cuda>=13.1: NOT met " \
           "(host has 13.0)" in out
    assert "--require #2 on GPU 0: satisfied by 'arch>=9.0'" in out
    assert "driver table: minor-compat" in out
    assert "error [gpu-require-unsatisfied]" in out


def test_image_env_from_docker_inspect_in_cdi_mode(
    fake_smi: Callable[[Path], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_smi(A100)
    env_file = DATA / "require" / "accepted" / "cuda-12.4-on-a100-driver535-minor-compat.env"
    env = [ln for ln in env_file.read_text().splitlines() if ln and not ln.startswith("#")]
    inspect = tmp_path / "inspect.json"
    inspect.write_text(json.dumps([{"Id": "sha256:0", "Config": {"Env": ["PATH=/bin", *env]}}]))
    rc = main(["gpu-probe", "--no-python-probe", "-f", "json", "--cdi", "--image-env",
               str(inspect)])
    doc = _json(capsys)
    assert rc == 0
    rules = {f["rule"] for f in doc["findings"]}
    assert rules == {"gpu-require-unchecked-cdi", "gpu-minor-version-compat"}
    results = doc["image"]["requirements"]["results"]
    assert len(results) == 8  # one per A100
    assert {r["matched"] for r in results} == {"brand=nvidia,driver>=535,driver<536"}
    assert any("only one" in n for n in doc["image"]["notes"])


def test_python_probe_included(fake_smi: Callable[[Path], Path], tmp_path: Path) -> None:
    fake_smi(H200)
    out = tmp_path / "report.json"
    assert main(["gpu-probe", "-f", "json", "-o", str(out),
                 "--python", sys.executable]) == 0
    doc = json.loads(out.read_text())
    assert doc["python_probe"]["status"] == "no-torch"
    assert "gpu-torch-missing" in {f["rule"] for f in doc["findings"]}


def test_module_entry_point_and_help() -> None:
    res = subprocess.run([sys.executable, "-m", "servelab", "gpu-probe", "--help"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0
    assert "Exit codes:" in res.stdout and "--require-gpu" in res.stdout


def test_gpu_check_script_without_gpu(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent.parent
    out = tmp_path / "capture"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHON": sys.executable}
    res = subprocess.run([str(root / "scripts" / "gpu-check"), str(out)], capture_output=True,
                         text=True, timeout=120, check=False, env=env)
    assert res.returncode == 0, res.stderr
    header = (out / "header.txt").read_text()
    assert header.startswith("# servelab gpu-check\ndate: 20")
    assert "hostname: " in header and "nvidia-smi not found on PATH" in header
    assert json.loads((out / "gpu-probe.json").read_text())["status"] == "unavailable"
    assert json.loads((out / "gpu-probe-py.json").read_text())["status"] == "no-torch"
    assert "gpu-probe      exit   0" in (out / "exit-codes.txt").read_text()


def test_gpu_check_script_needs_a_directory() -> None:
    root = Path(__file__).resolve().parent.parent.parent
    res = subprocess.run([str(root / "scripts" / "gpu-check")], capture_output=True, text=True,
                         timeout=30, check=False, env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 2 and "usage" in res.stderr
