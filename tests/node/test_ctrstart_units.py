"""The start spec from the smoke settings (no root, no engine): sizes, the model mount, and the
namespace a swept instance's containers are found by."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.node import CtrStartSpec, PrivateContainerd
from servelab.node.containerd import namespace_of
from servelab.node.ctrstart import shm_bytes
from servelab.smoke.result import SmokeSettings
from servelab.spec import Model, Serve


@pytest.mark.parametrize(("text", "expected"), [
    ("64m", 64 << 20), ("1g", 1 << 30), ("2K", 2 << 10), ("100", 100), ("512b", 512)])
def test_shm_sizes_as_the_engine_reads_them(text: str, expected: int) -> None:
    assert shm_bytes(text) == expected


@pytest.mark.parametrize("text", ["1.5g", "m", "", "64mb"])
def test_a_bad_shm_size_names_the_field_and_the_fix(text: str) -> None:
    with pytest.raises(InputError) as e:
        shm_bytes(text)
    assert e.value.message == f"serve.shmSize {text!r} is not a size"
    assert e.value.hint is not None and "e.g. 1g" in e.value.hint


def test_the_spec_takes_the_smoke_settings(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    s = SmokeSettings(serve=Serve(port=9000, health_path="/ready", env={"A": "1"},
                                  args=["--x"], writable_paths=["/tmp", "/cache"],
                                  shm_size="1g", user="10001:10001"),
                      model=Model(path=tmp_path / "model", mount_path="/weights"))
    spec = CtrStartSpec.from_settings(s)
    assert spec.model == (str((tmp_path / "model").resolve()), "/weights")
    d = spec.to_dict()
    assert d["model"] == {"source": str((tmp_path / "model").resolve()),
                          "destination": "/weights", "read_only": True}
    assert (d["port"], d["health_path"], d["user"], d["env"], d["args"], d["shm_size"]) == (
        9000, "/ready", "10001:10001", ["A"], ["--x"], "1g")
    assert d["writable_paths"] == ["/tmp", "/cache"]


def test_a_model_file_is_mounted_under_its_name(tmp_path: Path) -> None:
    f = tmp_path / "w.safetensors"
    f.write_bytes(b"x")
    spec = CtrStartSpec.from_settings(SmokeSettings(model=Model(path=f, mount_path="/models")))
    assert spec.model == (str(f.resolve()), "/models/w.safetensors")


def test_a_model_volume_cannot_be_bind_mounted() -> None:
    with pytest.raises(InputError, match="the model volume 'weights' has no host directory"):
        CtrStartSpec.from_settings(SmokeSettings(model=Model(volume="weights")))
    assert CtrStartSpec.from_settings(SmokeSettings()).model is None


@pytest.mark.parametrize("run_id", ["20261202t004546-eee09dad", "Test CTR start", "x"])
def test_the_namespace_is_known_from_the_instance_dir(run_id: str) -> None:
    """The sweep of a killed run finds its containers' cgroups by this namespace."""
    pc = PrivateContainerd(run_id)
    try:
        assert namespace_of(pc.work) == pc.namespace
    finally:
        pc.stop()
    assert not pc.work.exists()
