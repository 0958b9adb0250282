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


def test_a_server_that_answers_before_ctr_returns_starts_at_its_first_answer() -> None:
    """ctr returns when its own process exits, a fast server may answer before that: the
    phases stay end to end and never negative (found on the example: -0.03 s)."""
    from servelab.node.ctrstart import CtrStart, _take
    from servelab.smoke.prober import ProbeEvent

    rec = CtrStart("overlayfs", "serve-x", create_s=0.2)
    rec.marks = {"create_called": 10.0, "created": 10.2, "started": 10.5}
    rec.start_call_s = 0.3
    spec = CtrStartSpec(8000, "/health", 30.0)
    for kind, mono in (("accept", 10.46), ("health", 10.47)):
        assert _take(ProbeEvent(kind, mono, 0.0), rec, spec) is False
    assert rec.start_call_s == pytest.approx(0.26)
    assert rec.start_to_tcp_accept_s == 0.0
    assert rec.start_to_ready_s == pytest.approx(0.01)
    # create + start call + start -> ready is still the time from the create call to ready
    assert rec.create_s + rec.start_call_s + rec.start_to_ready_s == pytest.approx(10.47 - 10.0)
    assert any("before `ctr tasks start` returned" in n for n in rec.notes)
    # an ordinary server, answering after the return: nothing moves
    late = CtrStart("overlayfs", "serve-y", create_s=0.2)
    late.marks = {"create_called": 10.0, "created": 10.2, "started": 10.5}
    late.start_call_s = 0.3
    _take(ProbeEvent("accept", 11.0, 0.0), late, spec)
    assert late.start_to_tcp_accept_s == pytest.approx(0.5) and late.start_call_s == 0.3
    assert late.notes == []
