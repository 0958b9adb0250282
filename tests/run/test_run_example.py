"""`servelab run` end to end on the bundled example, with the real engine, registry and Trivy."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pagecheck
from hoststate import host_state
from servelab.node.containerd import PREFIX, sweep
from servelab.run.results import validate_result

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "experiment.yaml"

pytestmark = [pytest.mark.docker, pytest.mark.trivy, pytest.mark.registry]
#: the test registry's storage and access log (scripts/bootstrap.sh)
SETUP = Path("/var/tmp/servelab-setup")


def _registry_files() -> list[str]:
    """--registry-data/--registry-log where the bootstrap's registry keeps them."""
    data, log = SETUP / "registry-data", SETUP / "registry.log"
    if not data.is_dir() or not log.is_file():
        return []
    return ["--registry-data", str(data), "--registry-log", str(log)]


def _run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servelab", "run", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def _leftovers(docker_client: object, run_id: str) -> list[str]:
    client = docker_client
    found = [c.name for c in client.containers.list(  # type: ignore[attr-defined]
        all=True, filters={"label": f"servelab.run-id={run_id}"})]
    found += [i.tags for i in client.images.list(  # type: ignore[attr-defined]
        filters={"reference": f"servelab/{run_id.lower()}/*"})]
    return [str(x) for x in found if x]


def test_example_two_repeats(tmp_path: Path, docker_client: object, base_image: str,
                             registry: str, fixture_trivy_cache: Path) -> None:
    out = tmp_path / "out"
    sweep()
    before = host_state()
    files = _registry_files()
    proc = _run([str(EXAMPLE), "--out", str(out), "--repeats", "2", "--offline",
                 "--trivy-cache-dir", str(fixture_trivy_cache), "--format", "json",
                 "--cold-start-registry", registry, *files])
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    # no private containerd, mount or dir of this run left (other runs on the machine, whose
    # instances come and go meanwhile, are left out of the comparison)
    safe = re.sub(r"[^a-z0-9]+", "-", str(summary["run"]["id"]).lower()).strip("-")[:40]
    ours = host_state(PREFIX + safe)
    assert {k: ours[k] for k in ("processes", "mounts", "temp_dirs")} == {
        "processes": [], "mounts": [], "temp_dirs": []}, ours
    assert {k: ours[k] for k in ("run_containerd", "opt_containerd")} == {
        k: before[k] for k in ("run_containerd", "opt_containerd")}
    assert summary["repeats"] == 2
    assert summary["reproducible"] is True
    assert summary["digest"].startswith("sha256:")
    assert summary["verdict"] in ("improved", "trade-off")
    # one artifact directory per arm and repeat, each with a schema-valid result.json
    for arm in ("control", "treatment"):
        for n in (1, 2):
            d = out / arm / f"repeat-{n}"
            result = json.loads((d / "result.json").read_text())
            assert validate_result(result) == []
            assert result["metrics"]["digest"] == result["image"]["digest"]
            assert result["metrics"]["size"]["compressed_bytes"] > 1_000_000
    treat = json.loads((out / "treatment" / "repeat-1" / "result.json").read_text())
    assert treat["metrics"]["startup"]["ready_s"] > 0
    assert treat["metrics"]["latency"]["p95_ms"] is not None
    assert treat["stages"]["smoke"]["status"] == "ok"
    timeline = json.loads((out / "treatment" / "repeat-1" / "timeline.json").read_text())
    names = [e["name"] for e in timeline["events"]]
    assert names.index("created") < names.index("first_tcp_accept") < \
        names.index("first_health_2xx") < names.index("first_good_request")
    assert treat["environment"]["trivy"]["version"]
    control = json.loads((out / "control" / "repeat-1" / "result.json").read_text())
    failed = {v["check"] for v in control["verdicts"] if v["passed"] is False}
    assert "lint" in failed  # the control is the common way: tag-only base, root
    md = (out / "summary.md").read_text()
    assert md.startswith("# servelab:")
    assert "```mermaid\ngantt" in md
    assert "section treatment r2" in md
    assert "shared" in json.dumps(summary) or "shared" in md
    _check_node_figures(out, summary, md, base_image, checked=bool(files))
    assert _leftovers(docker_client, summary["run"]["id"]) == []
    _check_log(proc.stderr, repeats=2)
    _check_comparison(summary, md)
    why = pagecheck.available()
    if why:
        pytest.skip(f"the page check cannot run here: {why}")
    pagecheck.check(md, tmp_path)  # fits GitHub's page: nothing scrolls sideways


#: the example's log in CI mode (3 repeats) stays within about 100 lines
LOG_LINES = {3: 100, 2: 70}


def _check_log(stderr: str, repeats: int) -> None:
    """The run's log as CI shows it: lines of at most 120 characters, digests cut to 12 hex,
    one line a pull or push (none a layer), within the example's line budget."""
    lines = [x for x in stderr.splitlines() if x.startswith("servelab:")]
    assert all(len(x) <= 120 for x in lines), [x for x in lines if len(x) > 120]
    assert not [x for x in lines if re.search(r"[0-9a-f]{64}", x)]
    assert not [x for x in lines if re.search(r": (layer|blob) [0-9a-f]{12}", x)]
    assert len(lines) <= LOG_LINES[repeats], "\n".join(lines)


def _check_comparison(summary: dict[str, Any], md: str) -> None:
    """Every judged metric's Δ has an interval with its method and a reading."""
    comp = summary["comparison"]
    assert "Mann–Whitney" in comp["method"] and "Mann–Whitney" in md
    assert comp["metrics"] and all(m["interval"] is not None for m in comp["metrics"])
    for m in comp["metrics"]:
        iv = m["interval"]
        assert iv["low"] <= iv["estimate"] <= iv["high"]
        assert m["reading"] in ("better", "worse", "no detectable change", "inconclusive")


MODEL_BYTES = sum(p.stat().st_size for p in (ROOT / "examples" / "model").iterdir())


def _check_node_figures(out: Path, summary: dict[str, object], md: str, base: str, *,
                        checked: bool) -> None:
    """Per arm and repeat: pulled bytes and seconds, cold and with the base held, unpack,
    start, ready and first good request on one timeline; the control's baked weights are
    pulled bytes the treatment avoids."""
    rows = {(arm, n): json.loads((out / arm / f"repeat-{n}" / "result.json").read_text())
            for arm in ("control", "treatment") for n in (1, 2)}
    for (arm, n), r in rows.items():
        cs = r["metrics"]["coldstart"]
        assert cs["cold"]["bytes_pulled"] == cs["image_bytes"] > 60_000_000, (arm, n)
        assert cs["cold"]["layers_present"] == 0 and cs["cold"]["unpack_s"] > 0
        # a fresh private containerd per repeat (root here), its own check says cold
        assert cs["cold"]["method"] == "containerd pull (private instance)", (arm, n)
        assert cs["cold_runtime"] == {"private_containerd": True, "fallback_reason": None}
        check = cs["cold"]["cold_check"]
        assert check["cold"] is True and check["root_empty"] is True, check
        assert check["blobs_served_in_full"] is (True if checked else None), check
        assert cs["warm_base"]["method"] == "engine pull"
        assert cs["warm_base"]["holds"] == [base]
        for key in ("pull_s", "unpack_s"):
            assert cs["warm_base"][key] >= 0 and cs["cold"][key] > 0
        assert cs["to_ready_s"]["warm_base"] > r["metrics"]["startup"]["ready_s"]
        assert cs["to_first_request_s"]["cold"] > cs["to_ready_s"]["cold"]
        # the cold figures' start: the server started from the private containerd that
        # pulled it cold (one timeline on the node's runtime), not the Docker start
        start = cs["cold_start"]
        assert cs["cold_start_basis"] == "containerd" and start["outcome"] == "ready", start
        assert start["requests_ok"] == start["requests"] > 0 and start["pid"] > 1
        assert cs["to_ready_s"]["cold"] == pytest.approx(
            cs["cold"]["pull_s"] + cs["cold"]["unpack_s"] + start["create_s"]
            + start["start_call_s"] + start["start_to_ready_s"], abs=1e-5)
        # what an untimed second start read of the unpacked image before ready
        rb = cs["read_before_ready"]
        assert rb["measured"] is True and rb["bytes_pulled"] == cs["image_bytes"], rb
        assert 0 < rb["read_bytes"] < rb["unpacked_bytes"] and rb["top_dirs"], rb
        assert rb["line"] in md
        assert r["metrics"]["startup"]["first_start"] is True  # a fresh pull every repeat
        # what the server read before ready: the whole mounted model, by its own count
        load = r["metrics"]["model_load"]
        assert load["bytes_read"] == MODEL_BYTES and load["source"] == "server"
        assert load["page_cache"] == "evicted"
        timeline = json.loads((out / arm / f"repeat-{n}" / "timeline.json").read_text())
        names = [e["name"] for e in timeline["events"]]
        assert names[:4] == ["pull_started", "pull_downloaded", "pull_done", "created"]
    holding_base = {k: next(c["bytes"] for c in r["metrics"]["coldstart"]["node_holds"]
                            if c["holds"] == "base") for k, r in rows.items()}
    for n in (1, 2):
        # the control's baked 8 MiB of weights: pulled by every node holding the base
        assert holding_base[("control", n)] - holding_base[("treatment", n)] > 8 << 20
        assert holding_base[("treatment", n)] < 64 << 10
        warm = rows[("control", n)]["metrics"]["coldstart"]["warm_base"]
        assert warm["bytes_pulled"] > 8 << 20  # the engine really pulled them
    assert summary["pulled_bytes_warm_base"] < 64 << 10  # type: ignore[operator]
    assert summary["pulled_bytes_cold"] > 60_000_000  # type: ignore[operator]
    assert summary["model_bytes_read"] == MODEL_BYTES
    assert "## Start-up cost on a node" in md
    assert "section control r1 cold" in md and "    unpack :" in md


def test_refuses_to_overwrite_a_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "treatment").mkdir(parents=True)
    proc = _run([str(EXAMPLE), "--out", str(out), "--stages", "lint"])
    assert proc.returncode == 2
    assert "never overwrites" in proc.stderr


def test_not_reproducible_variant_is_explained(tmp_path: Path, docker_client: object,
                                               base_image: str) -> None:
    ctx = tmp_path / "ctx"
    shutil.copytree(ROOT / "examples", ctx, ignore=shutil.ignore_patterns("build-args.env"))
    (ctx / "build-args.env").write_text(f"BASE_IMAGE={base_image}\n")
    df = (ctx / "Dockerfile").read_text().replace(
        "USER 10001:10001", "RUN date +%s%N > /app/built-at\nUSER 10001:10001")
    (ctx / "Dockerfile").write_text(df)
    spec = (ctx / "experiment.yaml").read_text()
    spec = spec.split("\n  control:")[0] + "\n  treatment:" + spec.split("\n  treatment:")[1]
    spec += "  build:\n    sourceDateEpoch: 1700000000\n"
    (ctx / "experiment.yaml").write_text(spec)
    out = tmp_path / "out"
    proc = _run([str(ctx / "experiment.yaml"), "--out", str(out), "--repeats", "2",
                 "--stages", "lint,build", "--format", "json"])
    assert proc.returncode == 1, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["verdict"] == "not reproducible"
    assert summary["reproducible"] is False
    # the disk plan counts one image per build once the arm gave two digests
    assert any("treatment: its builds do not reproduce" in n for n in summary["notes"])
    assert summary["disk_plan"]["held_bytes"]["out"] == 2 * summary["disk_plan"][
        "compressed_bytes"]
    md = (out / "summary.md").read_text()
    assert "app/built-at" in md
    assert "content" in md


def test_missing_git_ref_names_the_fix(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    shutil.copytree(ROOT / "examples", ctx, ignore=shutil.ignore_patterns("build-args.env"))
    subprocess.run(["git", "init", "-q", str(ctx)], check=True)
    subprocess.run(["git", "-C", str(ctx), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    spec = (ctx / "experiment.yaml").read_text().replace(
        "    allowUnpinnedBase: true", "    allowUnpinnedBase: true\n    gitRef: origin/main")
    (ctx / "experiment.yaml").write_text(spec)
    (ctx / "build-args.env").write_text("BASE_IMAGE=x@sha256:" + "0" * 64 + "\n")
    proc = _run([str(ctx / "experiment.yaml"), "--out", str(tmp_path / "o"), "--stages", "lint"])
    assert proc.returncode == 2, proc.stderr
    assert "origin/main" in proc.stderr and "fetch-depth" in proc.stderr


def _git_copy_of_examples(tmp_path: Path, base_image: str) -> Path:
    ctx = tmp_path / "repo"
    shutil.copytree(ROOT / "examples", ctx, ignore=shutil.ignore_patterns("build-args.env"))
    (ctx / "build-args.env").write_text(f"BASE_IMAGE={base_image}\n")
    git = ["git", "-C", str(ctx), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(ctx)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    return ctx


def test_control_from_a_git_ref_builds_in_a_worktree(tmp_path: Path, docker_client: object,
                                                     base_image: str) -> None:
    ctx = _git_copy_of_examples(tmp_path, base_image)
    base = subprocess.run(["git", "-C", str(ctx), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    # the working tree moves on; the control is the committed base, built from a worktree
    (ctx / "server" / "app.py").write_text((ctx / "server" / "app.py").read_text() + "\n# new\n")
    spec = (ctx / "experiment.yaml").read_text().replace(
        "    dockerfile: Dockerfile.control\n    allowUnpinnedBase: true",
        f"    dockerfile: Dockerfile\n    buildArgsFile: build-args.env\n    gitRef: {base}")
    (ctx / "experiment.yaml").write_text(spec)
    out = tmp_path / "out"
    proc = _run([str(ctx / "experiment.yaml"), "--out", str(out), "--repeats", "1",
                 "--stages", "build", "--format", "json"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "from a temporary worktree" in proc.stderr
    control = json.loads((out / "control" / "repeat-1" / "result.json").read_text())
    treatment = json.loads((out / "treatment" / "repeat-1" / "result.json").read_text())
    assert control["inputs"]["git_ref"] == base
    # the uncommitted change reaches only the treatment's image
    assert control["image"]["digest"] != treatment["image"]["digest"]
    worktrees = subprocess.run(["git", "-C", str(ctx), "worktree", "list"], capture_output=True,
                               text=True, check=True).stdout.strip().splitlines()
    assert len(worktrees) == 1, "the temporary worktree must be removed"


def test_sigterm_mid_run_leaves_nothing(tmp_path: Path, docker_client: object,
                                        base_image: str) -> None:
    import signal
    import time

    out = tmp_path / "out"
    client = docker_client

    def servelab_images() -> set[str]:
        # the API's list carries the tags: no per-image inspect that races with another
        # process removing an image meanwhile
        return {t for i in client.api.images()  # type: ignore[attr-defined]
                for t in i.get("RepoTags") or [] if t.startswith("servelab/")}

    before = servelab_images()
    child = subprocess.Popen(
        [sys.executable, "-m", "servelab", "run", str(EXAMPLE), "--out", str(out),
         "--repeats", "1", "--stages", "build,smoke"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    seen = ""
    deadline = time.monotonic() + 300
    while "smoke ..." not in seen and time.monotonic() < deadline:
        line = child.stderr.readline()
        if not line:
            break
        seen += line
    assert "smoke ..." in seen, seen
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    left = [c.name for c in client.containers.list(  # type: ignore[attr-defined]
        all=True, filters={"label": "servelab.run-id"})]
    assert left == []
    assert servelab_images() - before == set()


def test_invalid_spec_is_annotated_under_github_actions(tmp_path: Path) -> None:
    import os

    bad = tmp_path / "exp.yaml"
    bad.write_text("apiVersion: servelab/v1\nkind: Experiment\nspec:\n  change: x\n"
                   "  repeats: 0\n  serve: {port: 99999}\n")
    env = {**os.environ, "GITHUB_ACTIONS": "true"}
    proc = subprocess.run([sys.executable, "-m", "servelab", "run", str(bad), "--out",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=60,
                          check=False, env=env)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error ")]
    assert len(lines) == 2
    assert ",line=5," in lines[0] + lines[1] and ",line=6," in lines[0] + lines[1]


def test_keep_keeps_the_tested_images_and_prints_them(tmp_path: Path, docker_client: object,
                                                      base_image: str) -> None:
    out = tmp_path / "o"
    proc = _run([str(EXAMPLE), "--out", str(out), "--repeats", "1", "--stages", "build",
                 "--keep"])
    client = docker_client
    run_id = json.loads((out / "summary.json").read_text())["run"]["id"].lower()
    try:
        assert proc.returncode == 0, proc.stderr[-2000:]
        refs = [ln.split(": ", 1)[1] for ln in proc.stdout.splitlines()
                if ln.startswith(("  control: ", "  treatment: "))]
        assert len(refs) == 2
        for ref in refs:
            name, digest = ref.split("@")
            assert name.startswith(f"servelab/{run_id}/")
            assert client.images.get(name).id == digest  # type: ignore[attr-defined]
    finally:
        for image in client.api.images():  # type: ignore[attr-defined]
            for tag in image.get("RepoTags") or []:
                if tag.startswith(f"servelab/{run_id}/"):
                    client.images.remove(tag, force=True)  # type: ignore[attr-defined]


def test_multi_platform_run_scans_the_platform_it_records(
        tmp_path: Path, docker_client: object, fixture_trivy_cache: Path) -> None:
    """build.platform with two platforms: the result's digest, the scanned platform and the
    scan's digest are one platform's (the first listed), and the others are named."""
    from ocitest import archive_platforms

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\nARG TARGETARCH\nCOPY ${TARGETARCH}.txt /a\n")
    for arch in ("amd64", "arm64"):
        (ctx / f"{arch}.txt").write_text(arch)
    spec = tmp_path / "multi.yaml"
    spec.write_text("apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: multi}\n"
                    "spec:\n  change: two platforms\n  repeats: 1\n"
                    "  treatment: {context: ctx, dockerfile: Dockerfile}\n"
                    "  build: {sourceDateEpoch: 1700000000, network: none,\n"
                    "          platform: 'linux/arm64,linux/amd64'}\n")
    out = tmp_path / "out"
    proc = _run([str(spec), "--out", str(out), "--stages", "build,scan", "--offline",
                 "--trivy-cache-dir", str(fixture_trivy_cache)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "treatment" / "repeat-1" / "result.json").read_text())
    assert validate_result(result) == []
    archive = Path(result["stages"]["build"]["record"]["archive"])
    arm64 = archive_platforms(archive)["linux/arm64"][0]
    scan = result["stages"]["scan"]["record"]
    assert result["image"]["digest"] == scan["digest"] == arm64  # the first platform listed
    assert scan["platform"] == "linux/arm64"
    assert sorted(scan["platforms"]) == ["linux/amd64", "linux/arm64"]
    assert any("scanned linux/arm64 only" in n for n in scan["notes"])
