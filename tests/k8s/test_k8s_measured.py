"""Reading --result: treatment arm only, worst startup, CUDA driver floor, lenient keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servelab.errors import InputError
from servelab.k8s.measured import DRIVER_FLOOR, read_measured

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s" / "results"
GOOD = "sha256:781e11251585a07e04025a4d33a12f1c77fd83541349952558d361c6956db0f8"


def _write(tmp_path: Path, doc: Any, name: str = "result.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_summary_uses_the_treatment_arm_only() -> None:
    m = read_measured([DATA / "summary.json"])
    assert m is not None
    assert m.digests == {GOOD}  # the control arm's digest is not accepted
    assert m.worst_startup_s == 95.2  # max over treatment repeats, not the control's 400
    assert (m.health_path, m.port) == ("/health", 8000)
    assert m.gpu_name == "NVIDIA H200"
    assert m.cuda_version == "12.4"
    assert m.min_driver_major == 525


def test_single_result() -> None:
    m = read_measured([DATA / "result-treatment.json"])
    assert m is not None and m.digests == {GOOD} and m.worst_startup_s == 95.2


def test_no_result_given() -> None:
    assert read_measured([]) is None


def test_results_without_arm_all_count(tmp_path: Path) -> None:
    path = _write(tmp_path, {"results": [
        {"metrics": {"startup": {"ready_s": 10}}},
        {"metrics": {"startup": {"ready_s": 31.5}}},
    ]})
    m = read_measured([path])
    assert m is not None and m.worst_startup_s == 31.5


def test_lenient_fallbacks(tmp_path: Path) -> None:
    path = _write(tmp_path, {
        "image": {"ref": f"r/x:1@{GOOD}", "cuda": {"require": "cuda>=11.8 brand=tesla"}},
        "spec": {"serve": {"port": "8080"}},
    })
    m = read_measured([path])
    assert m is not None
    assert m.digests == {GOOD}  # from image.ref
    assert m.cuda_version == "11.8" and m.min_driver_major == 450  # from the require string
    assert m.port == 8080 and m.health_path is None


def test_several_files_merge(tmp_path: Path) -> None:
    a = _write(tmp_path, {"metrics": {"startup": {"ready_s": 12.0}}}, "a.json")
    b = _write(tmp_path, {"metrics": {"startup": {"ready_s": 40.0}}}, "b.json")
    m = read_measured([a, b])
    assert m is not None and m.worst_startup_s == 40.0 and len(m.sources) == 2


def test_unknown_cuda_major_is_noted(tmp_path: Path) -> None:
    m = read_measured([_write(tmp_path, {"image": {"cuda": {"version": "10.2"}}})])
    assert m is not None and m.min_driver_major is None
    assert any("no driver floor" in n for n in m.notes)


def test_driver_table() -> None:
    assert DRIVER_FLOOR == {11: 450, 12: 525, 13: 580}


@pytest.mark.parametrize(
    "doc",
    [
        {"schemaVersion": 1},
        {"results": []},
        {"image": {"digest": "latest"}, "metrics": {"startup": {"ready_s": "slow"}}},
    ],
)
def test_no_known_key_is_bad_input(tmp_path: Path, doc: Any) -> None:
    with pytest.raises(InputError) as info:
        read_measured([_write(tmp_path, doc)])
    assert info.value.exit_code == 2
