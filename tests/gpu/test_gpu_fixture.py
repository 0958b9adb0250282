"""scripts/gpu-check + scripts/gpu_fixture.py: a capture becomes GPU test data.

The stand-in nvidia-smi (conftest.py) replays the synthetic hosts that also carry a
hand-written ``nvidia-smi -q -x`` (``q-xml.out``). gpu_fixture.py reads its expectations from
that XML and the raw CSV, never from servelab's text parser, so these tests also check that
the synthetic text and XML describe the same host, and that servelab's reading of the text
agrees with the XML.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab import gpu

ROOT = Path(__file__).resolve().parent.parent.parent
HOSTS = ROOT / "tests" / "data" / "gpu" / "hosts"
WITH_XML = sorted(p for p in HOSTS.iterdir() if (p / "q-xml.out").is_file())


def _gpu_check(out: Path, smi_dir: Path | None) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    env = {"PATH": f"{smi_dir}:{path}" if smi_dir else path, "PYTHON": sys.executable}
    for key in ("FAKE_SMI_DIR", "SERVELAB_NVIDIA_SMI"):
        if key in os.environ:
            env[key] = os.environ[key]
    return subprocess.run([str(ROOT / "scripts" / "gpu-check"), str(out)], capture_output=True,
                          text=True, timeout=120, check=False, env=env)


def _fixture(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_fixture.py"), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def _subset(got: list[dict[str, Any]], exp: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: g[k] for k in e} for g, e in zip(got, exp, strict=True)]


def test_synthetic_hosts_with_xml_exist() -> None:
    assert len(WITH_XML) >= 2


@pytest.mark.parametrize("host", WITH_XML, ids=[p.name for p in WITH_XML])
def test_capture_becomes_a_passing_test_case(
    host: Path, tmp_path: Path, fake_smi: Callable[[Path], Path]
) -> None:
    exe = fake_smi(host)
    capture, data = tmp_path / "capture", tmp_path / "data"
    res = _gpu_check(capture, exe.parent)
    assert res.returncode == 0, res.stderr
    assert "query-gpu      exit   0" in (capture / "exit-codes.txt").read_text()
    assert "GPU 0: NVIDIA" in (capture / "header.txt").read_text()

    res = _fixture(str(capture), "--data", str(data))
    assert res.returncode == 0, res.stderr
    [record] = [p for p in data.iterdir() if p.name != "hosts"]
    [case] = list((data / "hosts").iterdir())
    assert record.name == case.name and record.name.startswith("real-20")
    assert (record / "q-xml.xml").is_file() and (record / "header.txt").is_file()
    assert {p.name for p in case.iterdir()} >= {"query-gpu.out", "q.out", "expect.json"}

    derived = json.loads((case / "expect.json").read_text())
    assert derived["_comment"].startswith("captured on 20")
    synthetic = json.loads((host / "expect.json").read_text())
    # the hand-written XML and text agree on the host
    assert (derived["driver_version"], derived["cuda_version"]) == (
        synthetic["driver_version"], synthetic["cuda_version"])
    assert _subset(synthetic["gpus"], derived["gpus"]) == derived["gpus"]

    # servelab's reading of the replayed text matches the XML-derived expectations
    fake_smi(case)
    got = gpu.host_gpus(timeout=10.0).to_dict()
    assert (got["driver_version"], got["cuda_version"]) == (
        derived["driver_version"], derived["cuda_version"])
    assert _subset(got["gpus"], derived["gpus"]) == derived["gpus"]


def test_name_from_date_gpus_and_host(tmp_path: Path, fake_smi: Callable[[Path], Path]) -> None:
    exe = fake_smi(HOSTS / "synthetic-b200x2-driver610-kmd-umd")
    capture = tmp_path / "capture"
    assert _gpu_check(capture, exe.parent).returncode == 0
    header = (capture / "header.txt").read_text()
    date = header.split("date: ", 1)[1][:10]
    res = _fixture(str(capture), "--data", str(tmp_path / "data"))
    assert res.returncode == 0, res.stderr
    [case] = list((tmp_path / "data" / "hosts").iterdir())
    assert case.name.startswith(f"real-{date}-2xb200-")


def test_existing_destination_needs_force(tmp_path: Path, fake_smi: Callable[[Path], Path]) -> None:
    exe = fake_smi(HOSTS / "synthetic-h200-driver580")
    capture, data = tmp_path / "capture", tmp_path / "data"
    assert _gpu_check(capture, exe.parent).returncode == 0
    assert _fixture(str(capture), "--data", str(data), "--name", "real-x").returncode == 0
    marker = data / "real-x" / "kept.txt"
    marker.write_text("mine")
    res = _fixture(str(capture), "--data", str(data), "--name", "real-x")
    assert res.returncode == 2 and "--force" in res.stderr
    assert marker.read_text() == "mine"
    assert _fixture(str(capture), "--data", str(data), "--name", "real-x",
                    "--force").returncode == 0
    assert not marker.exists()


def test_capture_without_gpu_is_refused(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    assert _gpu_check(capture, None).returncode == 0
    res = _fixture(str(capture), "--data", str(tmp_path / "data"))
    assert res.returncode == 2
    assert "no GPU to make a test case of" in res.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("name", ["sample", "../real-escape"])
def test_bad_input_exits_2(tmp_path: Path, name: str) -> None:
    res = _fixture(str(tmp_path), "--data", str(tmp_path / "data"), "--name", name)
    assert res.returncode == 2
    assert "gpu_fixture:" in res.stderr and "Traceback" not in res.stderr
