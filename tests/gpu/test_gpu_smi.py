"""nvidia-smi parsing and host_gpus() on the synthetic fixtures of tests/data/gpu/hosts."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab import gpu
from servelab.errors import CapabilityError

HOSTS = Path(__file__).resolve().parent.parent / "data" / "gpu" / "hosts"
CASES = sorted(p for p in HOSTS.iterdir() if p.is_dir())


def _expect(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "expect.json").read_text())
    return data


def test_every_fixture_is_labelled() -> None:
    assert CASES, "no host fixtures found"
    for folder in CASES:
        assert folder.name.startswith(("synthetic-", "real-")), folder
        comment = _expect(folder)["_comment"]
        assert comment.startswith("synthetic:") or "captured" in comment, folder


@pytest.mark.parametrize("folder", CASES, ids=[c.name for c in CASES])
def test_host_gpus_on_fixture(folder: Path, fake_smi: Callable[[Path], Path]) -> None:
    fake_smi(folder)
    exp = _expect(folder)
    started = time.monotonic()
    info = gpu.host_gpus(timeout=exp.get("timeout", 10.0))
    assert time.monotonic() - started < 15
    assert info.state == exp["state"]
    got = info.to_dict()
    if exp["state"] == "unavailable":
        assert exp["reason_contains"] in (info.reason or "")
        assert info.gpus == ()
        return
    assert info.reason is None
    assert got["driver_version"] == exp["driver_version"]
    assert got["cuda_version"] == exp["cuda_version"]
    if folder.name.startswith("real-"):  # expectations read from the capture's XML: a subset
        assert len(got["gpus"]) == len(exp["gpus"])
        pairs = zip(got["gpus"], exp["gpus"], strict=True)
        assert [{k: g[k] for k in e} for g, e in pairs] == exp["gpus"]
    else:
        assert got["gpus"] == exp["gpus"]
    if "notes" in exp:
        assert got["notes"] == exp["notes"]
    for part in exp.get("notes_contain", []):
        assert any(part in note for note in got["notes"]), got["notes"]


def test_h200_parsed_directly() -> None:
    folder = HOSTS / "synthetic-h200-driver580"
    gpus = gpu.parse_query_gpu((folder / "query-gpu.out").read_text())
    log = gpu.parse_smi_q((folder / "q.out").read_text())
    assert log.driver_version == "580.65.06"
    assert log.cuda_version == "13.0"
    assert [s.bus_id for s in log.gpus] == ["00000000:18:00.0"]
    sec = log.gpus[0]
    assert sec.get("Product Brand") == "NVIDIA"
    assert sec.get("FB Memory Usage/Total") == "143771 MiB"
    assert sec.get("PCI/GPU Link Info/PCIe Generation/Max") == "5"
    assert sec.get("Driver Model/Current") is None  # N/A
    merged = gpu.merge_smi(gpus, log)
    assert merged[0].memory_total_mib == 143771
    assert merged[0].compute_cap == "9.0"
    assert merged[0].sm == "sm_90"
    assert merged[0].brand == "nvidia"


def test_a100_host_has_eight_distinct_gpus() -> None:
    folder = HOSTS / "synthetic-a100x8-driver535"
    merged = gpu.merge_smi(
        gpu.parse_query_gpu((folder / "query-gpu.out").read_text()),
        gpu.parse_smi_q((folder / "q.out").read_text()),
    )
    assert [g.index for g in merged] == list(range(8))
    assert len({g.uuid for g in merged}) == 8
    assert len({g.bus_id for g in merged}) == 8
    assert {g.compute_cap for g in merged} == {"8.0"}


def test_merge_matches_by_uuid_not_order() -> None:
    folder = HOSTS / "synthetic-a100x8-driver535"
    gpus = gpu.parse_query_gpu((folder / "query-gpu.out").read_text())
    log = gpu.parse_smi_q((folder / "q.out").read_text())
    reversed_log = gpu.SmiLog(log.header, list(reversed(log.gpus)))
    merged = gpu.merge_smi(gpus, reversed_log)
    assert merged[0].bus_id == log.gpus[0].bus_id
    assert merged[7].bus_id == log.gpus[7].bus_id


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("0, NVIDIA H200, GPU-x, 580.65.06, 143771\n", "fields"),
        ("zero, NVIDIA H200, GPU-x, 580.65.06, 143771, 9.0\n", "index"),
    ],
)
def test_query_gpu_rejects_malformed_rows(text: str, why: str) -> None:
    with pytest.raises(gpu.SmiParseError, match=why):
        gpu.parse_query_gpu(text)


def test_query_gpu_not_available_values() -> None:
    rows = gpu.parse_query_gpu("0, NVIDIA H200, GPU-x, [N/A], [N/A], [N/A]\n")
    assert rows[0].driver_version is None
    assert rows[0].memory_total_mib is None
    assert rows[0].compute_cap is None
    assert rows[0].sm is None


def test_smi_q_rejects_other_text() -> None:
    with pytest.raises(gpu.SmiParseError, match="NVSMI LOG"):
        gpu.parse_smi_q("No devices were found\n")


@pytest.mark.parametrize(
    ("rc", "out", "expected"),
    [
        (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.", "not loaded"),
        (6, "No devices were found", "no NVIDIA GPU was found"),
        (18, "Failed to initialize NVML: Driver/library version mismatch", "module and the"),
        (4, "Insufficient Permissions", "permission"),
        (255, "something new", "exited with code 255: something new"),
    ],
)
def test_classify_smi_failure(rc: int, out: str, expected: str) -> None:
    assert expected in gpu.classify_smi_failure(rc, out, "")


@pytest.mark.parametrize(
    ("printed", "key"),
    [
        ("NVIDIA", "nvidia"), ("Tesla", "tesla"), ("GeForce", "geforce"),
        ("GeForce RTX", "geforcertx"), ("NVIDIA RTX", "nvidiartx"), ("Quadro RTX", "quadrortx"),
        ("Titan RTX", "titanrtx"), ("NVIDIA Virtual Compute Server", "vcs"),
        ("NVIDIA Virtual PC", "vpc"), ("NVIDIA Virtual Applications", "vapps"),
        ("NVIDIA RTX Virtual Workstation", "vws"), ("NVIDIA Cloud Gaming", "cloudgaming"),
        ("Grid", "grid"), ("Unknown", "unknown"), ("Some Future Brand", "somefuturebrand"),
        ("N/A", None),
    ],
)
def test_brand_keys_match_the_names_cuda_images_use(printed: str, key: str | None) -> None:
    assert gpu.brand_key(printed) == key


def test_missing_nvidia_smi_is_unavailable_not_a_pass(no_smi: None) -> None:
    info = gpu.host_gpus()
    assert not info.available
    assert info.state == "unavailable"
    assert "nvidia-smi not found" in (info.reason or "")
    assert info.facts().devices == ()


def test_missing_nvidia_smi_raises_only_when_required(no_smi: None) -> None:
    with pytest.raises(CapabilityError) as exc:
        gpu.host_gpus(require=True)
    assert exc.value.exit_code == 3
    assert "required" in exc.value.message


def test_no_devices_required_raises(fake_smi: Callable[[Path], Path]) -> None:
    fake_smi(HOSTS / "synthetic-no-devices")
    with pytest.raises(CapabilityError, match="No devices were found"):
        gpu.host_gpus(require=True)


def test_q_failure_keeps_gpus_but_notes_unknown_brand(
    tmp_path: Path, fake_smi: Callable[[Path], Path]
) -> None:
    folder = tmp_path / "synthetic-q-fails"
    folder.mkdir()
    (folder / "query-gpu.out").write_text(
        (HOSTS / "synthetic-h200-driver580" / "query-gpu.out").read_text())
    (folder / "q.out").write_text("Unable to determine the device handle for GPU0: Unknown Error\n")
    (folder / "q.rc").write_text("15\n")
    fake_smi(folder)
    info = gpu.host_gpus()
    assert info.available and info.driver_version == "580.65.06"
    assert info.cuda_version is None and info.gpus[0].brand is None
    assert any("nvidia-smi -q failed" in n for n in info.notes)
    # unknown brand and CUDA version: such conditions are assumed met, and listed as such
    res = gpu.evaluate_expression("cuda>=99.0,brand=tesla", info.facts(),
                                  info.facts().devices[0])
    assert res.ok and res.assumed == ("brand=tesla", "cuda>=99.0")


def test_empty_listing_is_unavailable(tmp_path: Path, fake_smi: Callable[[Path], Path]) -> None:
    folder = tmp_path / "synthetic-empty"
    folder.mkdir()
    (folder / "query-gpu.out").write_text("")
    fake_smi(folder)
    info = gpu.host_gpus()
    assert not info.available and info.reason == "nvidia-smi listed no GPU"


def _log(header: str) -> gpu.SmiLog:
    return gpu.parse_smi_q("\n==============NVSMI LOG==============\n\n" + header)


@pytest.mark.parametrize(
    ("header", "driver", "cuda"),
    [
        # driver R610 on: new names first; the old lines carry a remark that is dropped
        ("Driver Version    : 610.43.02 [Deprecated; will be removed in CUDA 14.0. Use KMD "
         "Version instead]\nCUDA Version      : 13.3 [Deprecated; will be removed in CUDA 14.0."
         " Use CUDA UMD Version instead]\nKMD Version       : 610.43.02\n"
         "CUDA UMD Version  : 13.3\n",
         "610.43.02", "13.3"),
        # the old lines alone, with the remark: still read, without it
        ("Driver Version : 610.43.02 [Deprecated; use KMD Version]\n"
         "CUDA Version : 13.3 [Deprecated]\n", "610.43.02", "13.3"),
        # before R610
        ("Driver Version : 535.104.05\nCUDA Version : 12.2\n", "535.104.05", "12.2"),
        # a new name that is not a version falls back to the old one
        ("KMD Version : N/A\nDriver Version : 580.65.06\nCUDA UMD Version : N/A\n"
         "CUDA Version : 13.0\n", "580.65.06", "13.0"),
        # not versions: unknown, never the words themselves
        ("Driver Version : 580.105.06\nCUDA Version : Not Found\n", "580.105.06", None),
        ("Driver Version : N/A\nCUDA Version : [Unknown Error]\n", None, None),
        # drivers before 410 print no CUDA line at all
        ("Driver Version : 396.54\n", "396.54", None),
    ],
)
def test_smi_q_header_versions(header: str, driver: str | None, cuda: str | None) -> None:
    log = _log(header)
    assert (log.driver_version, log.cuda_version) == (driver, cuda)
