"""The smoke stage's GPU start on the real engine, through a synthetic CDI device.

There is no GPU here, but the engine is real and has CDI on (scripts/bootstrap.sh gives its
dockerd a CDI spec directory). A test writes a CDI spec for ``nvidia.com/gpu`` whose devices
inject what the NVIDIA toolkit's would, minus the hardware: NVIDIA_VISIBLE_DEVICES and an
``nvidia-smi`` that prints one synthetic H200. The host's nvidia-smi is the replay stand-in
(tests/conftest.py ``fake_smi``) of the synthetic H200 host. So servelab's own code runs for
real: auto-detecting CDI mode from the engine's spec directories, the CDI device request,
``nvidia-smi -L`` and the Python probe inside the started container, GPU memory after ready,
and the engine's own refusals.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.smoke.stage import SmokeResult
from servelab.spec import GpuNeeds

from .conftest import settings

pytestmark = [pytest.mark.docker, pytest.mark.registry]

H200 = Path(__file__).resolve().parents[1] / "data" / "gpu" / "hosts" / "synthetic-h200-driver580"
INSIDE_SMI = """#!/bin/sh
# synthetic: nvidia-smi inside a container given servelab's test CDI device {name}
echo "GPU 0: NVIDIA H200 (UUID: GPU-6f3c2a1e-8d4b-4c7a-9e21-5b0d7f9a3c11) synthetic device {name}"
"""


#: a device whose driver is not reachable from the container: nvidia-smi's own failure
BROKEN_SMI = """#!/bin/sh
# synthetic: nvidia-smi failing inside the container, as it prints it (exit 9)
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
exit 9
"""


def _device(name: str, tmp: Path, script: str = INSIDE_SMI, site: Path | None = None) -> str:
    """A CDI device: its nvidia-smi, and optionally a site-packages folder for the image's
    Python (/usr/local/lib/python3.11/dist-packages of the Debian 12 base)."""
    smi = tmp / f"inside-nvidia-smi-{name}"
    smi.write_text(script.format(name=name))
    smi.chmod(0o755)
    extra = (f"        - hostPath: {site}\n"
             "          containerPath: /usr/local/lib/python3.11/dist-packages\n"
             "          options: [ro, nosuid, nodev, rbind]\n") if site else ""
    return (f"  - name: \"{name}\"\n    containerEdits:\n"
            f"      env: [\"NVIDIA_VISIBLE_DEVICES={name}\"]\n"
            f"      mounts:\n        - hostPath: {smi}\n"
            "          containerPath: /usr/local/bin/nvidia-smi\n"
            "          options: [ro, nosuid, nodev, bind]\n" + extra)


@pytest.fixture
def cdi_dir(docker_client: Any) -> Iterator[Path]:
    """The engine's writable CDI spec directory, emptied of earlier test specs."""
    dirs = [Path(d) for d in docker_client.info().get("CDISpecDirs") or []]
    usable = [d for d in dirs if d.is_dir() and "servelab" in str(d)]
    if not usable:
        pytest.skip(f"the engine has no servelab CDI spec directory (CDISpecDirs={dirs}); "
                    "scripts/bootstrap.sh starts dockerd with one")
    for old in usable[0].glob("servelab-test-*.yaml"):
        old.unlink()
    yield usable[0]
    for spec in usable[0].glob("servelab-test-*.yaml"):
        spec.unlink()


H200_UUID = "GPU-6f3c2a1e-8d4b-4c7a-9e21-5b0d7f9a3c11"


@pytest.fixture(autouse=True)
def gpu_lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The GPU locks of this test's runs, apart from a real runner's."""
    d = tmp_path / "locks"
    monkeypatch.setenv("SERVELAB_GPU_LOCK_DIR", str(d))
    return d


@pytest.fixture
def synthetic_gpu(cdi_dir: Path, tmp_path: Path,
                  fake_smi: Callable[[Path], Path]) -> Path:
    """A synthetic nvidia.com/gpu CDI device (all and 0) and a synthetic H200 host."""
    fake_smi(H200)
    spec = cdi_dir / f"servelab-test-{secrets.token_hex(3)}.yaml"
    spec.write_text('cdiVersion: "0.6.0"\nkind: nvidia.com/gpu\ndevices:\n'
                    + _device("all", tmp_path) + _device("0", tmp_path))
    return spec


@pytest.mark.parametrize("count", ["all", 1])
def test_cdi_gpu_start_runs_the_inside_checks(
        fixture_images: Callable[[str], str], run_smoke: Callable[..., SmokeResult],
        model_dir: Path, synthetic_gpu: Path, count: int | str) -> None:
    res = run_smoke(fixture_images("good"),
                    settings(model_dir, gpu=GpuNeeds(required=True, count=count)))
    assert res.verdict == "pass", res.message
    assert res.gpu is not None
    assert res.gpu["mode"] == "cdi"  # auto: the engine's CDI directory defines nvidia.com/gpu
    assert any("servelab's check was the only one" in n for n in res.notes), res.notes
    inside = res.gpu["inside"]
    assert inside["gpus_visible"] is True
    # the device asked for (gpu.count all -> nvidia.com/gpu=all, 1 -> nvidia.com/gpu=0) was
    # injected: its own nvidia-smi answered
    assert inside["nvidia_smi_l"].endswith(f"synthetic device {'all' if count == 'all' else 0}")
    probe = inside["python_probe"]
    assert probe["status"] == "no-torch"  # the fixture server has no torch
    assert [f["rule"] for f in inside["findings"]] == ["gpu-torch-missing"]
    # the host's view after ready (the synthetic host's query-index-memory.used.out)
    assert inside["memory_used"] == [{"index": 0, "memory_used_mib": 1024}]
    # and after cleanup (the synthetic host replays the same value: nothing freed)
    assert inside["memory_after_cleanup"] == [{"index": 0, "memory_used_mib": 1024}]
    assert inside["memory_freed"] == [{"index": 0, "after_ready_mib": 1024,
                                       "after_cleanup_mib": 1024, "freed_mib": 0}]
    # no torch: no CUDA init or first kernel to time
    assert inside["phases"] == {"torch_import_s": None, "cuda_init_s": None,
                                "first_kernel_s": None}
    # one run per GPU: the synthetic H200 was locked for the start
    assert res.gpu["lock"]["keys"] == [H200_UUID]
    assert res.gpu["lock"]["waited_s"] < 1.0


def test_a_gpu_another_run_holds_is_waited_for(
        fixture_images: Callable[[str], str], run_smoke: Callable[..., SmokeResult],
        model_dir: Path, synthetic_gpu: Path, gpu_lock_dir: Path) -> None:
    """Self-hosted GPU runners: while another servelab run holds the GPU's lock the start
    waits; past the timeout it is a missing capability (exit 3), and nothing was started."""
    from servelab.errors import CapabilityError
    from servelab.smoke.gpuphases import gpu_lock

    s = settings(model_dir, gpu=GpuNeeds(required=True))
    s.gpu_lock_timeout_s = 0.5
    with gpu_lock([H200_UUID], timeout_s=1, directory=gpu_lock_dir), \
            pytest.raises(CapabilityError, match="held by another run") as e:
        run_smoke(fixture_images("good"), s)
    assert e.value.exit_code == 3
    # released: the same start goes through
    res = run_smoke(fixture_images("good"), s)
    assert res.verdict == "pass", res.message


def test_cdi_device_missing_is_explained(
        fixture_images: Callable[[str], str], run_smoke: Callable[..., SmokeResult],
        model_dir: Path, cdi_dir: Path, fake_smi: Callable[[Path], Path]) -> None:
    fake_smi(H200)
    res = run_smoke(fixture_images("good"),
                    settings(model_dir, gpu=GpuNeeds(required=True, mode="cdi")))
    assert res.verdict == "start-failed", res.message
    assert "unresolvable CDI devices nvidia.com/gpu=all" in res.message
    assert res.cause is not None and res.cause.cause == "gpu-runtime-missing"
    assert "nvidia-ctk cdi generate" in (res.problems[0].fix or "")


def test_doctor_sees_the_cdi_gpu(synthetic_gpu: Path) -> None:
    from servelab.run import doctor

    check = doctor.check_gpu_containers(required=True)
    assert check.ok, check
    assert f"CDI: nvidia.com/gpu in {synthetic_gpu}" in check.detail


def test_doctor_says_when_no_gpu_can_reach_a_container(cdi_dir: Path) -> None:
    from servelab.run import doctor

    check = doctor.check_gpu_containers(required=False)
    if shutil.which("nvidia-container-runtime-hook"):  # a machine with the NVIDIA toolkit
        assert check.ok and "--gpus" in check.detail
        return
    assert not check.ok and not check.required
    assert str(cdi_dir) in check.detail and "nvidia-ctk" in check.fix


def test_gpus_not_visible_inside_is_gpu_failed(
        *, fixture_images: Callable[[str], str], run_smoke: Callable[..., SmokeResult],
        model_dir: Path, cdi_dir: Path, tmp_path: Path,
        fake_smi: Callable[[Path], Path]) -> None:
    """The engine starts the container with the device, the server gets ready, but nvidia-smi
    inside lists no GPU: not a pass."""
    fake_smi(H200)
    spec = cdi_dir / f"servelab-test-{secrets.token_hex(3)}.yaml"
    spec.write_text('cdiVersion: "0.6.0"\nkind: nvidia.com/gpu\ndevices:\n'
                    + _device("all", tmp_path, BROKEN_SMI))
    res = run_smoke(fixture_images("good"),
                    settings(model_dir, gpu=GpuNeeds(required=True)))
    assert res.verdict == "gpu-failed", res.message
    assert not res.passed and res.exit_code == 1
    assert "no GPU listed by nvidia-smi -L inside" in res.message
    inside = res.gpu["inside"] if res.gpu else {}
    assert inside["gpus_visible"] is False
    assert "couldn't communicate with the NVIDIA driver" in inside["nvidia_smi_l"]


def test_cpu_torch_in_a_gpu_image_is_gpu_failed(
        *, fixture_images: Callable[[str], str], run_smoke: Callable[..., SmokeResult],
        model_dir: Path, cdi_dir: Path, tmp_path: Path,
        fake_smi: Callable[[Path], Path]) -> None:
    """A real torch in the container, a CPU build (set-up installs one from a wheel on disk):
    the probe imports it, CUDA does not initialise, and the run says why: the common mistake
    of shipping the CPU wheel in a GPU image."""
    site = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup")) / "torch-cpu"
    if not (site / ".servelab-torch").is_file():
        pytest.skip(f"no CPU torch at {site}: scripts/bootstrap.sh installs one from a wheel "
                    "on disk (SERVELAB_TORCH_WHEEL)")
    fake_smi(H200)
    spec = cdi_dir / f"servelab-test-{secrets.token_hex(3)}.yaml"
    spec.write_text('cdiVersion: "0.6.0"\nkind: nvidia.com/gpu\ndevices:\n'
                    + _device("all", tmp_path, site=site))
    res = run_smoke(fixture_images("good"),
                    settings(model_dir, gpu=GpuNeeds(required=True)))
    assert res.verdict == "gpu-failed", res.message
    probe = res.gpu["inside"]["python_probe"] if res.gpu else {}
    assert probe["status"] == "no-cuda"
    torch = probe["torch"]
    assert torch["importable"] is True and torch["version"].endswith("+cpu")
    assert torch["cuda_available"] is False and torch["cuda_version"] is None
    assert "not compiled with CUDA" in (torch["cuda_error"] or "")
    rules = [f["rule"] for f in res.gpu["inside"]["findings"]] if res.gpu else []
    assert rules == ["gpu-torch-cuda-unavailable"]
    # the import of the real torch is timed; CUDA never initialised, so no init or kernel
    phases = res.gpu["inside"]["phases"] if res.gpu else {}
    assert phases["torch_import_s"] > 0
    assert phases["cuda_init_s"] is None and phases["first_kernel_s"] is None
    assert "cannot use the GPU" in res.message
