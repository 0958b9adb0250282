"""`servelab run --lazy soci` end to end on the bundled example: the real engine, registry,
private containerd, soci-snapshotter, FUSE and the TLS registry over the same storage; the lazy
figures in result.json, summary.json and summary.md."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hoststate import host_state
from servelab import spec
from servelab.image.ref import ImageRef
from servelab.node.containerd import PREFIX, sweep
from servelab.node.soci import lazy_unavailable
from servelab.run.results import validate_result

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "experiment.yaml"
SETUP = Path("/var/tmp/servelab-setup")
TLS_REGISTRY = "127.0.0.1:5443"
MANIFESTS = ("application/vnd.oci.image.manifest.v1+json, "
             "application/vnd.docker.distribution.manifest.v2+json")

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.slow]


def lazy_run_args() -> tuple[list[str], str | None]:
    """``servelab run``'s lazy options with the TLS registry of scripts/bootstrap.sh (only
    setup_tls_registry), or ``([], why lazy pulling cannot be measured here)``."""
    why = lazy_unavailable()
    if why is not None:
        return [], f"lazy pulling cannot run here: {why}"
    ca, log = SETUP / "tls" / "ca.pem", SETUP / "registry-tls.log"
    try:
        urllib.request.urlopen(f"https://{TLS_REGISTRY}/v2/", timeout=5,
                               context=ssl.create_default_context(cafile=str(ca))).read()
    except (OSError, ssl.SSLError) as e:
        return [], (f"no TLS registry at {TLS_REGISTRY} (scripts/bootstrap.sh only "
                    f"setup_tls_registry): {e}")
    return ["--lazy", "soci", "--lazy-registry", TLS_REGISTRY, "--registry-ca", str(ca),
            "--lazy-registry-log", str(log)], None


def _lazy_args() -> list[str]:
    """The lazy options and the cold-start registry's files, or a skip naming why not."""
    args, why = lazy_run_args()
    if why is not None:
        pytest.skip(why)
    data = SETUP / "registry-data"
    return ["--registry-data", str(data), "--registry-log", str(SETUP / "registry.log"), *args]


def test_example_with_lazy_pulls(tmp_path: Path, base_image: str, registry: str) -> None:
    args = _lazy_args()
    out = tmp_path / "out"
    sweep()
    before = host_state()
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "run", str(EXAMPLE), "--out", str(out),
         "--repeats", "1", "--stages", "build,smoke", "--format", "json",
         "--cold-start-registry", registry, *args],
        capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    # every private containerd, FUSE mount and dir of this run removed (other runs on the
    # machine have instances of their own: only this run's id is looked for)
    run_id = json.loads(proc.stdout)["run"]["id"]
    mine = host_state(PREFIX + re.sub(r"[^a-z0-9]+", "-", run_id.lower())[:15])
    assert mine["processes"] == mine["mounts"] == mine["temp_dirs"] == [], mine
    for key in ("run_containerd", "opt_containerd", "soci_root"):
        assert mine[key] == before[key], key
    rows = {arm: json.loads((out / arm / "repeat-1" / "result.json").read_text())
            for arm in ("control", "treatment")}
    for arm, r in rows.items():
        assert validate_result(r) == [], arm
        cs = r["metrics"]["coldstart"]
        lazy = cs["lazy"]
        assert lazy["lazy"] is True and lazy["discovered"] is True, lazy["notes"]
        assert lazy["remote_layers"] == lazy["indexed_layers"] == 1  # the 66 MB base layer
        assert 0 < lazy["pull_s"] < cs["cold"]["pull_s"] + cs["cold"]["unpack_s"]
        fetched = lazy["bytes_fetched"]
        # the base layer only in parts, never whole; the zTOC and manifests apart
        assert fetched["layers_partial"] > 0 and fetched["other"] > 0
        assert fetched["total"] < cs["cold"]["bytes_pulled"]
        # the server started on the lazy node with the cold start's spec (snapshotter soci):
        # pull to ready laid end to end, and the bytes it read on demand before ready
        assert lazy["start_outcome"] == "ready", lazy["notes"]
        st = lazy["start"]
        assert cs["to_ready_s"]["lazy"] == pytest.approx(
            lazy["pull_s"] + st["create_s"] + st["start_call_s"] + st["start_to_ready_s"],
            abs=2e-3)
        assert cs["to_first_request_s"]["lazy"] > cs["to_ready_s"]["lazy"] > lazy["pull_s"]
        read = lazy["bytes_read"]["synchronous_bytes_served"]
        assert 0 < read < cs["cold"]["bytes_pulled"], lazy["bytes_read"]
        assert not any(n.startswith("pull only") for n in lazy["notes"]), lazy["notes"]
        # the index came from the build's OCI archive, and the index build did not warm the
        # lazy pull: the image's and SOCI's blob files were evicted before it
        assert lazy["index"]["source"] == "archive", lazy["index"]
        assert lazy["page_cache"].startswith("sync; the registry's blob files evicted (")
    # the control's 8 MiB weights layer is under the min size: fetched whole, as a node does
    control = rows["control"]["metrics"]["coldstart"]["lazy"]["bytes_fetched"]
    assert control["layers_full"] > 8 << 20
    assert rows["treatment"]["metrics"]["coldstart"]["lazy"]["bytes_fetched"][
        "layers_full"] < 64 << 10
    summary = spec.read_summary(out / "summary.json")
    for arm, r in rows.items():
        lazy = r["metrics"]["coldstart"]["lazy"]
        assert summary["lazy"][arm]["lazy_repeats"] == 1
        assert summary["lazy"][arm]["repeats"][0]["state"] == "lazy"
        medians = summary["coldstart"][arm]
        assert medians["pull_lazy_s"] == lazy["pull_s"]
        assert medians["fetched_lazy"] == lazy["bytes_fetched"]["total"]
    md = (out / "summary.md").read_text()
    full = rows["treatment"]["metrics"]["coldstart"]["image_bytes"]
    assert f"- **treatment**: pulled {full / 1e6:.1f} MB full; lazy fetched " in md
    assert "(1 of 1 repeats lazy)" in md and "%) before ready; lazy pull " in md
    gantt = md[md.index("```mermaid"):]
    pull_ms = round(rows["control"]["metrics"]["coldstart"]["lazy"]["pull_s"] * 1000)
    assert f"    section control r1 lazy\n    lazy pull :0, {pull_ms}\n" \
        f"    create + start call :{pull_ms}, " in gantt
    for arm in rows:
        assert summary["coldstart"][arm]["node_ready_lazy"] == \
            rows[arm]["metrics"]["coldstart"]["to_ready_s"]["lazy"]
    assert "section control r1 cold" in gantt
    # the registry keeps nothing of the run: each tested image's manifest and its SOCI index
    # deleted, and no tag left in the run's repositories (the referrers fallback tag included)
    for r in rows.values():
        cs = r["metrics"]["coldstart"]
        pushed = ImageRef.parse(cs["ref"])
        assert _status(pushed, pushed.digest) == 404, cs["ref"]
        assert _status(pushed, cs["lazy"]["index"]["digest"]) == 404, cs["lazy"]["index"]
        assert _tags(pushed) == [], cs["ref"]


def _status(ref: ImageRef, digest: str | None) -> int:
    """HTTP status of a HEAD of *digest*'s manifest in *ref*'s repository."""
    req = urllib.request.Request(f"http://{ref.registry}/v2/{ref.repository}/manifests/{digest}",
                                 method="HEAD", headers={"Accept": MANIFESTS})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _tags(ref: ImageRef) -> list[str]:
    try:
        with urllib.request.urlopen(
                f"http://{ref.registry}/v2/{ref.repository}/tags/list", timeout=10) as resp:
            return sorted(json.loads(resp.read()).get("tags") or [])
    except urllib.error.HTTPError as e:
        assert e.code == 404, e
        return []
