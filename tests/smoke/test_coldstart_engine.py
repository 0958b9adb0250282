"""Start-up cost on a node, on the real engine and the local registry: push once, the cold
fetch, the engine's own pull with the base held, the start on the same timeline; and the
model load of a multi-GB model mounted read-only from a volume.

Each test makes its own small image (the base plus one layer of fresh random bytes, built to an
OCI archive and loaded, as servelab build does), so that no other image in the engine shares
its layer, and removes it at the end.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab import proc
from servelab.cleanup import Cleanup
from servelab.errors import CapabilityError, InputError
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node import CtrStartSpec, NodeSettings, NodeStarts, read_layers
from servelab.smoke.stage import SmokeResult, smoke_image
from servelab.spec import Model, Request

from .conftest import settings

pytestmark = [pytest.mark.docker, pytest.mark.registry]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LAYER_BYTES = 3 << 20


#: the image serves /data over HTTP on port 8000 (so /health answers 200), as a non-root uid
SERVE = ['USER 10001:10001',
         'CMD ["python3", "-m", "http.server", "8000", "--directory", "/data"]']


def _build_loaded(base_image: str, ctx: Path, tag: str, files: dict[str, bytes],
                  extra: bytes | None = None) -> str:
    """An image FROM *base_image* with *files* in one layer under /data (and *extra* in a
    second layer), serving them; built to OCI and loaded, named *tag* (``name:tag``)."""
    ctx.mkdir(parents=True)
    (ctx / "data").mkdir()
    for name, data in files.items():
        (ctx / "data" / name).write_bytes(data)
    lines = ["ARG BASE_IMAGE", "FROM ${BASE_IMAGE}", "COPY data/ /data/"]
    if extra is not None:
        (ctx / "extra.bin").write_bytes(extra)
        lines.append("COPY extra.bin /extra/extra.bin")
    lines += SERVE
    (ctx / "Dockerfile").write_text("\n".join(lines) + "\n")
    archive = ctx.parent / f"{ctx.name}.oci.tar"
    proc.run(["docker", "buildx", "build", "--no-cache", "--network", "none",
              "--build-arg", f"BASE_IMAGE={base_image}",
              "--output", f"type=oci,dest={archive},rewrite-timestamp=true", str(ctx)],
             timeout=600, env={"SOURCE_DATE_EPOCH": "0"})
    out = proc.run(["docker", "load", "-i", str(archive)], timeout=600)
    loaded = out.stdout.strip().rpartition(" ")[2]
    proc.run(["docker", "tag", loaded, tag], timeout=60)
    return tag


@pytest.fixture
def own_image(base_image: str, tmp_path: Path, docker_client: Any) -> Iterator[str]:
    tag = f"servelab-test/coldstart:{secrets.token_hex(4)}"
    _build_loaded(base_image, tmp_path / "ctx", tag,
                  {"w.bin": os.urandom(LAYER_BYTES), "health": b"ok\n"})
    yield tag
    for ref in [tag, *_names(docker_client, tag)]:
        try:
            docker_client.api.remove_image(ref)
        except Exception:  # noqa: S112 (already gone)
            continue


@pytest.fixture
def own_archive(own_image: str, tmp_path: Path) -> Path:
    """The OCI archive *own_image* was loaded from."""
    return tmp_path / "ctx.oci.tar"


def _names(client: Any, ref: str) -> list[str]:
    try:
        attrs = client.api.inspect_image(ref)
    except Exception:
        return []
    return [*(attrs.get("RepoTags") or []), *(attrs.get("RepoDigests") or [])]


def _nodes(registry: str, cu: Cleanup, client: Any, **kw: Any) -> NodeStarts:
    return NodeStarts(NodeSettings(registry, **kw), run_id=cu.run_id, cleanup=cu,
                      client=client)


def test_cold_and_warm_base_pulls(own_image: str, own_archive: Path, base_image: str,
                                  registry: str, docker_client: Any) -> None:
    reg = RegistryClient()
    base_layers = read_layers(reg, ImageRef.parse(base_image))
    rid = f"test-cold-{secrets.token_hex(3)}"
    with Cleanup(rid, client=docker_client) as cu:
        nodes = _nodes(registry, cu, docker_client)
        # the build's own OCI archive is what is pushed (as servelab run does)
        digest = docker_client.api.inspect_image(own_image)["Id"]
        built = {"archive": own_archive, "digest": digest}
        node = nodes.measure("treatment", own_image, [base_image], **built)
        img = node.image
        assert img.manifest.digest == digest  # byte for byte: the tested digest
        pushed = img.ref
        # pushed once: the registry serves it, with the base's layers and one of ours
        assert pushed.startswith(f"{registry}/servelab-coldstart/")
        assert img.layer_digests >= base_layers.layer_digests
        ours = [b for b in img.layers if b.digest not in base_layers.layer_digests]
        assert len(ours) == 1 and ours[0].size > LAYER_BYTES  # random bytes do not compress
        # cold: every byte of the image, exact
        assert node.cold is not None
        assert node.cold.bytes_pulled == img.total_bytes
        assert all(x.pulled for x in node.cold.layers) and node.cold.notes == []
        # through a fresh private containerd (root here), checked cold
        assert node.cold.method == "containerd pull (private instance)"
        assert node.cold.check is not None and node.cold.check["root_empty"] is True
        assert node.cold_fallback is None and node.cold.max_concurrent_downloads == 3
        assert node.cold.download_s > 0 and (node.cold.unpack_s or 0) > 0
        # warm base: the engine pulled our layer and nothing of the base
        warm = node.warm
        assert warm is not None and warm.method == "engine pull"
        assert warm.holds == [base_image]
        pulled = [x.digest for x in warm.layers if x.pulled]
        assert pulled == [ours[0].digest]
        assert warm.bytes_pulled == img.manifest.size + img.config.size + ours[0].size
        assert warm.bytes_present == sum(b.size for b in base_layers.layers)
        # the one node note is the push's: all three blobs sent, none mounted (one arm)
        sent = img.config.size + sum(b.size for b in img.layers)
        assert node.notes == [
            f"pushed {digest[:19]}: 3 blob(s) sent ({sent} bytes), "
            "0 mounted from this run's other repositories, 0 already there"], node.notes
        assert warm.notes == []
        # what other nodes pull, exact from the layers
        holds = {c.holds: c for c in node.holds}
        assert holds["nothing"].bytes == img.total_bytes
        assert holds["base"].bytes == warm.bytes_pulled and holds["base"].layers == 1
        # the image is in the engine again under its name, as the pulled image
        assert docker_client.api.inspect_image(own_image)["Id"] == img.manifest.digest
        # a second repeat pushes nothing new and pulls the same bytes
        again = nodes.measure("treatment", own_image, [base_image], **built)
        assert again.image == img
        assert again.warm is not None and again.warm.bytes_pulled == warm.bytes_pulled
        # the repeat is done: the name the warm-base pull left goes (the build's name is the
        # build stage's to release), so the next build does not run beside a second copy
        assert pushed in _names(docker_client, own_image)
        assert nodes.release(digest) is True
        assert pushed not in _names(docker_client, own_image)
        assert docker_client.api.inspect_image(own_image)["Id"] == img.manifest.digest
        assert nodes.release(digest) is False  # once
    # the end of the run: the pushed manifest is deleted, the pulled name removed
    with pytest.raises(InputError, match="not found"):
        reg.get_manifest(ImageRef.parse(pushed))
    assert pushed not in _names(docker_client, own_image)
    assert docker_client.api.inspect_image(own_image)["Id"] == img.manifest.digest
    assert cu.errors == []


def test_the_start_after_the_pull_is_on_one_timeline(
        own_image: str, base_image: str, registry: str, docker_client: Any,
        tmp_path: Path) -> None:
    """smoke_image with the node: the warm-base pull's marks come before created, and the
    node's time to ready is the phases laid end to end. (The image is pushed from the engine's
    copy, as for a prebuilt image: docker save, then the same byte-for-byte push.)"""
    rid = f"test-cold-{secrets.token_hex(3)}"
    with Cleanup(rid, client=docker_client) as cu:
        node = _nodes(registry, cu, docker_client).measure("treatment", own_image, [base_image])
        res = smoke_image(own_image, settings(None, request=None), run_id=rid,
                          out_dir=tmp_path / "smoke", first_start=True, client=docker_client,
                          node=node)
    assert res.verdict == "pass", res.message
    tl = res.to_dict()["timeline"]
    order = [e["name"] for e in tl["events"]]
    assert order[:4] == ["pull_started", "pull_downloaded", "pull_done", "created"]
    assert tl["durations"]["pull_s"] > 0 and tl["durations"]["unpack_s"] >= 0
    d = res.node or {}
    assert d["to_ready_s"]["warm_base"] == pytest.approx(
        d["warm_base"]["pull_s"] + d["warm_base"]["unpack_s"] + d["start"]["create_s"]
        + d["start"]["start_call_s"] + d["start"]["start_to_ready_s"], abs=1e-5)
    assert d["to_ready_s"]["cold"] > d["cold"]["unpack_s"]
    assert [p["variant"] for p in d["pulls"]] == ["cold", "warm-base"]


def test_the_cold_figures_come_from_the_start_in_the_private_containerd(
        own_image: str, base_image: str, registry: str, docker_client: Any,
        tmp_path: Path) -> None:
    """With a start spec, the server is started from the private containerd that pulled it
    cold, before that instance stops: the cold to-ready is that pull plus that start's phases
    (one timeline on the node's runtime), the warm-base one stays the Docker start's."""
    s = settings(None, request=None)
    rid = f"test-cold-{secrets.token_hex(3)}"
    with Cleanup(rid, client=docker_client) as cu:
        node = _nodes(registry, cu, docker_client).measure(
            "treatment", own_image, [base_image], start=CtrStartSpec.from_settings(s))
        res = smoke_image(own_image, s, run_id=rid, out_dir=tmp_path / "smoke",
                          first_start=True, client=docker_client, node=node)
    assert res.verdict == "pass", res.message
    d = res.node or {}
    cs = d["cold_start"]
    assert d["cold_start_basis"] == "containerd" and cs["outcome"] == "ready", cs
    assert cs["snapshotter"] == "overlayfs" and cs["pid"] > 1
    assert d["to_ready_s"]["cold"] == pytest.approx(
        d["cold"]["pull_s"] + d["cold"]["unpack_s"] + cs["create_s"] + cs["start_call_s"]
        + cs["start_to_ready_s"], abs=1e-5)
    assert d["to_ready_s"]["warm_base"] == pytest.approx(
        d["warm_base"]["pull_s"] + d["warm_base"]["unpack_s"] + d["start"]["create_s"]
        + d["start"]["start_call_s"] + d["start"]["start_to_ready_s"], abs=1e-5)
    assert cs["start_to_ready_s"] != d["start"]["start_to_ready_s"]  # two starts, two figures
    assert not any(n.startswith("cold figures:") for n in d["notes"]), d["notes"]


def test_a_gpu_arm_keeps_the_docker_start_for_the_cold_figures(
        own_image: str, base_image: str, registry: str, docker_client: Any) -> None:
    rid = f"test-cold-{secrets.token_hex(3)}"
    with Cleanup(rid, client=docker_client) as cu:
        node = _nodes(registry, cu, docker_client).measure(
            "treatment", own_image, [base_image], no_start="not measured on this path: a GPU "
            "arm")
    d = node.with_start({"create_s": 0.1, "start_call_s": 0.2, "start_to_ready_s": 0.3,
                         "start_to_first_good_request_s": 0.4}).to_dict()
    assert d["cold_start"] is None and d["cold_start_basis"] == "docker"
    assert any("GPU arm" in n and n.startswith("cold figures:") for n in d["notes"])
    assert d["to_ready_s"]["cold"] == pytest.approx(
        d["cold"]["pull_s"] + d["cold"]["unpack_s"] + 0.6, abs=1e-5)


def test_without_a_private_containerd_the_fetch_stays_and_says_why(
        own_image: str, base_image: str, registry: str, docker_client: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVELAB_CONTAINERD", "/nonexistent/containerd")
    rid = f"test-cold-{secrets.token_hex(3)}"
    with Cleanup(rid, client=docker_client) as cu:
        node = _nodes(registry, cu, docker_client).measure("treatment", own_image,
                                                           [base_image])
    assert node.cold is not None and node.cold.method == "servelab fetch + tar"
    assert node.cold.check is None and node.cold.bytes_pulled == node.image.total_bytes
    assert node.cold.notes == ["page cache before the fetch: sync; registry blobs not evicted "
                               "(no --registry-data)"]
    cs = node.to_dict()
    assert cs["cold_runtime"]["private_containerd"] is False
    assert "`containerd` is not installed" in cs["cold_runtime"]["fallback_reason"]
    assert any("not a private containerd" in n for n in cs["notes"])


def test_an_unreachable_registry_is_a_missing_capability(own_image: str, docker_client: Any
                                                         ) -> None:
    rid = f"test-cold-{secrets.token_hex(3)}"
    before = sorted(_names(docker_client, own_image))
    with Cleanup(rid, client=docker_client) as cu:
        nodes = _nodes("127.0.0.1:1", cu, docker_client)
        with pytest.raises(CapabilityError, match=r"127\.0\.0\.1:1 is not reachable") as e:
            nodes.measure("treatment", own_image, [])
    assert e.value.exit_code == 3
    # the image keeps its names
    assert sorted(_names(docker_client, own_image)) == before


def test_layers_another_image_holds_show_as_present(own_image: str, base_image: str,
                                                   registry: str, docker_client: Any) -> None:
    """A second name (another run's, another arm's image) keeps the layers in the engine: the
    pull cannot be cold for them, and the record says so instead of counting them pulled."""
    other = f"servelab-test/coldstart-other:{secrets.token_hex(4)}"
    repo, _, tag = other.rpartition(":")
    docker_client.api.tag(own_image, repo, tag)
    rid = f"test-cold-{secrets.token_hex(3)}"
    try:
        with Cleanup(rid, client=docker_client) as cu:
            node = _nodes(registry, cu, docker_client).measure("treatment", own_image,
                                                               [base_image])
    finally:
        docker_client.api.remove_image(other)
    warm = node.warm
    assert warm is not None
    assert not any(x.pulled for x in warm.layers)
    assert warm.bytes_pulled == node.image.manifest.size + node.image.config.size
    assert any("under other names" in n and other in n for n in node.notes), node.notes
    assert any("already in the engine though no held image has them" in n
               for n in warm.notes), warm.notes
    # the exact figure for a node holding only the base is still there
    base = next(c for c in node.holds if c.holds == "base")
    assert base.bytes is not None and base.bytes > LAYER_BYTES


def test_the_other_arms_image_is_set_aside_for_the_pull(
        base_image: str, registry: str, docker_client: Any, tmp_path: Path) -> None:
    """Two arms sharing a layer (the control = the treatment's layer + baked weights): the
    treatment's warm-base pull holds the base only, so it downloads the shared layer, not
    finding it in the control's image; the control is back in the engine afterwards."""
    shared = {"w.bin": os.urandom(LAYER_BYTES), "health": b"ok\n"}
    tags = {arm: f"servelab-test/coldstart-{arm}:{secrets.token_hex(4)}"
            for arm in ("control", "treatment")}
    _build_loaded(base_image, tmp_path / "control", tags["control"], shared,
                  extra=os.urandom(1 << 20))
    _build_loaded(base_image, tmp_path / "treatment", tags["treatment"], shared)
    rid = f"test-cold-{secrets.token_hex(3)}"
    try:
        with Cleanup(rid, client=docker_client) as cu:
            nodes = _nodes(registry, cu, docker_client)
            control = nodes.measure("control", tags["control"], [base_image])
            treatment = nodes.measure("treatment", tags["treatment"], [base_image])
            control_id = docker_client.api.inspect_image(tags["control"])["Id"]
        shared_layer = (treatment.image.layer_digests - frozenset(
            b.digest for b in read_layers(RegistryClient(), ImageRef.parse(base_image)).layers))
        assert len(shared_layer) == 1 and shared_layer <= control.image.layer_digests
        warm = treatment.warm
        assert warm is not None and warm.notes == [], warm.notes if warm else None
        assert [x.digest for x in warm.layers if x.pulled] == list(shared_layer)
        holds = {c.holds: c for c in treatment.holds}
        assert holds["control"].layers == 0  # a node running the control pulls no layer
        assert holds["base"].bytes == warm.bytes_pulled
        assert control_id == control.image.manifest.digest  # the control is back
    finally:
        for tag in tags.values():
            for ref in [tag, *_names(docker_client, tag)]:
                try:
                    docker_client.api.remove_image(ref)
                except Exception:  # noqa: S112 (already gone)
                    continue


# ---------------------------------------------------------------------------- model load

MODEL_GIB = 2
RANDOM_SHARD = 32 << 20


@pytest.fixture
def model_volume(docker_client: Any) -> Iterator[tuple[str, Path, int]]:
    """A named volume holding the example's model.json, a 2 GiB sparse shard and a 32 MiB
    shard of random bytes: (name, mount point, bytes)."""
    name = f"servelab-test-model-{secrets.token_hex(4)}"
    vol = docker_client.api.create_volume(name, labels={"servelab.test": "smoke"})
    where = Path(vol["Mountpoint"])
    if not os.access(where, os.W_OK):
        docker_client.api.remove_volume(name, force=True)
        pytest.skip(f"the volume's mount point {where} is not writable here (needs root)")
    try:
        import runpy

        make = runpy.run_path(str(EXAMPLES / "make_model.py"))["make_model"]
        make(where, MODEL_GIB << 30, shard=1 << 30, randomly=False)
        (where / "zz-random.bin").write_bytes(os.urandom(RANDOM_SHARD))
        total = sum(p.stat().st_size for p in where.iterdir())
        yield name, where, total
    finally:
        docker_client.api.remove_volume(name, force=True)


@pytest.mark.slow
def test_multi_gb_model_from_a_volume(model_volume: tuple[str, Path, int], base_image: str,
                                      docker_client: Any, tmp_path: Path) -> None:
    """The example server reads every byte of a 2 GiB model mounted read-only from a volume;
    the smoke stage records what it read (the server's own count) and the block I/O, after
    dropping the model's files from the page cache: the random shard is read from disk, the
    sparse shards' holes are not."""
    name, _where, total = model_volume
    tag = f"servelab-test/coldstart-example:{secrets.token_hex(4)}"
    proc.run(["docker", "build", "-q", "--network", "none", "-f", str(EXAMPLES / "Dockerfile"),
              "--build-arg", f"BASE_IMAGE={base_image}", "--label", "servelab.test=smoke",
              "-t", tag, str(EXAMPLES)], timeout=300)
    s = settings(None, timeout=300.0, writable_paths=["/tmp"],
                 request=Request(path="/predict", body=b'{"inputs": [1, 2, 3]}',
                                 headers={"Content-Type": "application/json"}, count=2,
                                 expect_json={"model": "tiny-linear"}))
    s.model = Model(volume=name, mount_path="/models")
    s.evict_model_cache = True
    rid = f"test-model-{secrets.token_hex(3)}"
    try:
        res = smoke_image(tag, s, run_id=rid, out_dir=tmp_path / "smoke", first_start=True,
                          client=docker_client)
    finally:
        docker_client.api.remove_image(tag, force=True)
    _check_model_load(res, total)


def _check_model_load(res: SmokeResult, total: int) -> None:
    assert res.verdict == "pass", res.message
    assert res.model is not None and res.model.kind == "volume"
    ml = res.to_dict()["model_load"]
    assert ml["model_bytes"] == total > MODEL_GIB << 30
    assert ml["server_bytes"] == total and ml["source"] == "server"
    assert ml["bytes_read"] == total
    assert ml["page_cache"] == "evicted" and ml["evicted_bytes"] == total
    # block I/O: the random shard came from the disk; the sparse gigabytes did not
    assert ml["block_read_bytes"] is not None, ml
    assert RANDOM_SHARD <= ml["block_read_bytes"] < 1 << 30
