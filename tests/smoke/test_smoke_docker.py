"""Real containers on the real engine: each fixture image gets its own verdict."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from servelab.errors import InputError
from servelab.smoke.model import digest_path
from servelab.smoke.stage import SmokeResult

from .conftest import settings

pytestmark = [pytest.mark.docker, pytest.mark.registry]

Images = Callable[[str], str]
Runner = Callable[..., SmokeResult]


def test_good_image_passes_hardened(fixture_images: Images, run_smoke: Runner,
                                    model_dir: Path) -> None:
    sha, _ = digest_path(model_dir)
    res = run_smoke(fixture_images("good"), settings(model_dir, sha256=sha))
    assert res.verdict == "pass", res.message
    assert res.exit_code == 0
    d = res.to_dict()
    names = [e["name"] for e in d["timeline"]["events"]]
    for n in ("created", "started", "first_tcp_accept", "first_health_2xx",
              "first_good_request"):
        assert n in names
    t = {e["name"]: e["monotonic"] for e in d["timeline"]["events"]}
    assert t["created"] <= t["started"] <= t["first_tcp_accept"] <= t["first_health_2xx"]
    assert t["first_health_2xx"] <= t["first_good_request"]
    assert d["requests"]["ok"] == 3 and d["requests"]["latency_ms"]["p95"] is not None
    assert d["user"]["euid_when_ready"] == 10001 and d["user"]["root"] is False
    assert d["model"]["match"] is True and d["model"]["sha256"] == sha
    assert d["probe"]["mode"] == "netns"
    assert d["properties"]["no_network_needed"] == "pass"
    assert d["properties"]["read_only_rootfs"] == "pass"
    assert json.loads(Path(d["files"]["result"]).read_text())["verdict"] == "pass"
    assert "model loaded" in Path(d["files"]["log"]).read_text()


def test_container_is_hardened(fixture_images: Images, docker_client: Any,
                               model_dir: Path, tmp_path: Path) -> None:
    from servelab.smoke.stage import smoke_image

    s = settings(model_dir, writable_paths=["/tmp"], shm_size="256m")
    s.keep = True
    rid = f"test-hardened-{secrets.token_hex(3)}"
    res = smoke_image(fixture_images("good"), s, run_id=rid, out_dir=tmp_path,
                      client=docker_client)
    try:
        hc = docker_client.api.inspect_container(res.container.id)["HostConfig"]
        assert hc["ReadonlyRootfs"] is True
        assert hc["NetworkMode"] == "none"
        assert hc["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in hc["SecurityOpt"]
        assert hc["ShmSize"] == 256 * 1024 * 1024
        assert set(hc["Tmpfs"]) == {"/tmp"}
        mounts = docker_client.api.inspect_container(res.container.id)["Mounts"]
        assert [(m["Destination"], m["RW"]) for m in mounts] == [("/models", False)]
        labels = docker_client.api.inspect_container(res.container.id)["Config"]["Labels"]
        assert labels["servelab.run-id"] == rid
        assert labels["servelab.keep"] == "true"
    finally:
        docker_client.api.remove_container(res.container.id, force=True)


def test_root_image_fails_as_root(fixture_images: Images, run_smoke: Runner,
                                  model_dir: Path) -> None:
    res = run_smoke(fixture_images("root"), settings(model_dir))
    assert res.verdict == "runs-as-root"
    assert res.exit_code == 1
    assert res.user is not None and res.user.euid == 0 and res.user.config_uid == 0
    assert res.requests is not None and res.requests.ok == 3  # it works, but as root


def test_write_to_read_only_rootfs(fixture_images: Images, run_smoke: Runner,
                                   model_dir: Path) -> None:
    res = run_smoke(fixture_images("rofs"), settings(model_dir))
    assert res.verdict == "crashed"
    assert res.cause is not None and res.cause.cause == "read-only-write"
    assert "/app/cache" in (res.cause.evidence or "")
    assert res.properties["read_only_rootfs"] == "fail"
    assert res.container is not None and res.container.exit_code == 1


def test_download_attempt_at_start(fixture_images: Images, run_smoke: Runner,
                                   model_dir: Path) -> None:
    res = run_smoke(fixture_images("download"), settings(model_dir))
    assert res.verdict == "crashed"
    assert res.cause is not None and res.cause.cause == "download-attempt", res.cause
    assert res.properties["no_network_needed"] == "fail"


def test_never_ready_times_out(fixture_images: Images, run_smoke: Runner,
                               model_dir: Path) -> None:
    res = run_smoke(fixture_images("never-ready"), settings(model_dir, timeout=2.0))
    assert res.verdict == "not-ready"
    assert "HTTP 503" in res.message
    assert res.timeline is not None and "first_tcp_accept" in res.timeline.marks
    assert "first_health_2xx" not in res.timeline.marks
    assert res.container is not None and res.container.running


def test_crash_reports_exit_code_and_logs(fixture_images: Images, run_smoke: Runner,
                                          model_dir: Path) -> None:
    res = run_smoke(fixture_images("crash"), settings(model_dir))
    assert res.verdict == "crashed"
    assert res.container is not None and res.container.exit_code == 3
    assert res.container.oom_killed is False
    assert any("crashes on purpose" in line for line in res.container.log_tail)
    assert "code 3" in res.message


@pytest.mark.parametrize("probe", ["auto", "helper"])
def test_a_server_that_exits_at_start_is_a_crash_with_its_status_and_log_tail(
        fixture_images: Images, run_smoke: Runner, model_dir: Path, probe: str) -> None:
    """A server that exits at start (often before it can be probed) is a failed smoke (exit 1)
    whose reason names the exit status and the log's last lines, never a missing capability
    (exit 3, "run as root"), whichever way it is probed."""
    res = run_smoke(fixture_images("crash"), settings(model_dir, probe=probe))
    assert (res.verdict, res.exit_code) == ("crashed", 1)
    assert res.container is not None and res.container.exit_code == 3
    assert "code 3" in res.message
    assert "log tail: 'fixture mode crash, uid 10001' / 'fatal: the fixture crashes on " \
           "purpose'" in res.message


def test_model_sha256_mismatch_is_not_started(fixture_images: Images, run_smoke: Runner,
                                              model_dir: Path) -> None:
    res = run_smoke(fixture_images("good"), settings(model_dir, sha256="0" * 64))
    assert res.verdict == "model-mismatch"
    assert res.container is None and res.timeline is None
    assert res.properties == {} or res.properties.get("model_sha256") != "pass"


def test_model_missing(fixture_images: Images, run_smoke: Runner) -> None:
    res = run_smoke(fixture_images("good"), settings(None))
    assert res.verdict == "crashed"
    assert res.cause is not None and res.cause.cause == "model-missing"


def test_wrong_answer_is_request_failed(fixture_images: Images, run_smoke: Runner,
                                        model_dir: Path) -> None:
    from servelab.smoke.stage import SmokeSettings

    s: SmokeSettings = settings(model_dir)
    assert s.request is not None
    s.request.expect_json = {"prediction": 42}
    res = run_smoke(fixture_images("good"), s)
    assert res.verdict == "request-failed"
    assert res.requests is not None and res.requests.failed == 3
    assert "does not contain" in res.message
    s.request.expect_json = {"model": "tiny-linear", "prediction": 3.1}


def test_helper_probe_mode(fixture_images: Images, run_smoke: Runner, model_dir: Path) -> None:
    res = run_smoke(fixture_images("good"), settings(model_dir, probe="helper"))
    assert res.verdict == "pass", res.message
    assert res.probe["mode"] == "helper"
    assert res.timeline is not None
    # the helper was polling before the server started: the accept time is a measurement
    assert "first_tcp_accept" not in res.timeline.notes


def test_baked_model_is_reported(docker_client: Any, base_image: str, tmp_path: Path,
                                 run_smoke: Runner, model_dir: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "model").mkdir(parents=True)
    (ctx / "model" / "model.json").write_bytes((model_dir / "model.json").read_bytes())
    (ctx / "model" / "extra.safetensors").write_bytes(b"\0" * (2 << 20))
    (ctx / "Dockerfile").write_text(
        f"FROM {base_image}\nCOPY model/ /opt/model/\nRUN rm /opt/model/extra.safetensors\n"
        "USER 10001\nCMD [\"sleep\", \"60\"]\n")
    from servelab import proc

    tag = "servelab-test/smoke-baked:1"
    proc.run(["docker", "build", "-q", "--network", "none", "--label", "servelab.test=smoke",
              "-t", tag, str(ctx)], timeout=300)
    try:
        from servelab.smoke.weights import scan_image

        rep = scan_image(docker_client, tag, model_files=[("model.json", 91)])
        found = {w.path: w for w in rep.files}
        assert set(found) == {"/opt/model/model.json", "/opt/model/extra.safetensors"}
        assert found["/opt/model/model.json"].reason.startswith("same name and size")
        st = found["/opt/model/extra.safetensors"]
        assert st.size == 2 << 20 and st.deleted_later is True
        assert st.created_by is not None and "COPY" in st.created_by
        assert st.layer_index == 1
    finally:
        docker_client.api.remove_image(tag, force=True)


def test_missing_image_is_bad_input(run_smoke: Runner, model_dir: Path) -> None:
    with pytest.raises(InputError):
        run_smoke("servelab-test/no-such-image:0", settings(model_dir))


def test_gpu_required_without_gpu(fixture_images: Images, run_smoke: Runner,
                                  model_dir: Path) -> None:
    from servelab.spec import GpuNeeds

    res = run_smoke(fixture_images("good"), settings(model_dir, gpu=GpuNeeds(required=True)))
    assert res.verdict == "gpu-unavailable"
    assert res.exit_code == 3 and not res.passed
    assert res.container is None
    assert res.gpu is not None and res.gpu["host"]["state"] == "unavailable"


H200 = Path(__file__).resolve().parents[1] / "data" / "gpu" / "hosts" / "synthetic-h200-driver580"


@pytest.mark.parametrize(("require", "verdict"), [
    ("cuda>=14.0", "gpu-incompatible"),
    ("cuda>=12.4 brand=tesla,driver>=470,driver<471", "start-failed"),
], ids=["needs-cuda-14", "nvidia-example"])
def test_gpu_requirements_checked_before_start(
    *, fixture_images: Images, run_smoke: Runner, model_dir: Path, tmp_path: Path,
    fake_smi: Callable[[Path], Path], docker_client: Any, require: str, verdict: str,
) -> None:
    """A synthetic H200 host (driver 580, CUDA 13.0) through a stand-in nvidia-smi: the
    image's NVIDIA_REQUIRE_CUDA is judged before the start; when it fits, the container is
    started with a GPU device request, which this GPU-less engine refuses."""
    from servelab import proc
    from servelab.spec import GpuNeeds

    fake_smi(H200)
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f'FROM {fixture_images("good")}\n'
                                    f'ENV NVIDIA_REQUIRE_CUDA="{require}"\n')
    tag = f"servelab-test/smoke-cuda:{abs(hash(require)) % 10**8}"
    proc.run(["docker", "build", "-q", "--network", "none", "--label", "servelab.test=smoke",
              "-t", tag, str(ctx)], timeout=300)
    try:
        res = run_smoke(tag, settings(model_dir, gpu=GpuNeeds(required=True, mode="legacy")))
    finally:
        docker_client.api.remove_image(tag, force=True)
    assert res.verdict == verdict, res.message
    assert res.gpu is not None and res.gpu["host"]["state"] == "available"
    assert res.gpu["image"] is not None
    if verdict == "gpu-incompatible":
        assert res.container is None and "14.0" in res.message
    else:
        assert res.gpu["image"]["ok"] is True
        assert res.container is not None and res.container.error
        # the engine's own refusal (no NVIDIA runtime here), and what it means
        assert 'could not select device driver "" with capabilities: [[gpu]]' in res.message
        assert res.cause is not None and res.cause.cause == "gpu-runtime-missing"


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("arm", ["treatment", "control"])
def test_example_images(arm: str, base_image: str, docker_client: Any, run_smoke: Runner) -> None:
    """The bundled example: the treatment passes; the control runs as root with its model baked
    in (reported with its layer)."""
    from servelab import proc

    tag = f"servelab-test/smoke-example-{arm}:1"
    dockerfile = "Dockerfile" if arm == "treatment" else "Dockerfile.control"
    proc.run(["docker", "build", "-q", "--network", "none", "-f", str(EXAMPLES / dockerfile),
              "--build-arg", f"BASE_IMAGE={base_image}", "--label", "servelab.test=smoke",
              "-t", tag, str(EXAMPLES)], timeout=300)
    try:
        res = run_smoke(tag, settings(EXAMPLES / "model", scan_weights=True))
    finally:
        docker_client.api.remove_image(tag, force=True)
    assert res.requests is not None and res.requests.ok == 3, res.message
    assert res.weights is not None and res.weights.scanned
    baked = [w.path for w in res.weights.files]
    if arm == "treatment":
        assert res.verdict == "pass", res.message
        assert baked == []
    else:
        assert res.verdict == "runs-as-root"
        # every file of examples/model/ (model.json, and the weights set-up makes) is baked
        model_dir = Path(__file__).resolve().parents[2] / "examples" / "model"
        assert sorted(baked) == sorted(f"/models/{p.name}" for p in model_dir.iterdir())
        assert "COPY model/" in str(res.weights.files[0].created_by)


def test_netns_fallback_to_inspected_pid(fixture_images: Images, run_smoke: Runner,
                                         model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the container's cgroup is not where servelab looks (a custom cgroup parent), the
    prober enters the namespace of the PID from docker inspect instead."""
    import servelab.smoke.stage

    monkeypatch.setattr(servelab.smoke.stage, "cgroup_procs", lambda cid: ["/nonexistent/procs"])
    res = run_smoke(fixture_images("good"), settings(model_dir))
    assert res.verdict == "pass", res.message
    assert res.timeline is not None
    t = res.timeline.marks
    assert t["prober_started"] >= t["started"]  # it waited for the PID
    go = next(e for e in Path(res.files["probe_events"]).read_text().splitlines()
              if '"go"' in e)
    assert json.loads(go)["netns_pid"] > 1
