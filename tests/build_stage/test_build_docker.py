"""The done-when list, against the real engine and the local registry."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import subprocess
import tarfile
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servelab_build_testlib import DATA, EPOCH

from servelab import cli
from servelab.build import builder
from servelab.build.stage import BaseUnpinned, verdict
from servelab.image import oci
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.spec import Arm, BuildSettings

pytestmark = pytest.mark.docker

DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else "docker"


def docker(*args: str) -> str:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=True).stdout


def test_bundled_example_builds_are_reproducible(example_records: list[Any],
                                                 base_image: str) -> None:
    r1, r2 = example_records
    assert r1.manifest_digest == r2.manifest_digest
    rep = verdict(example_records)
    assert rep.reproducible is True and rep.explanation == []
    # loaded once; with the containerd store the image ID is the manifest digest
    assert r1.loaded_now and not r2.loaded_now and r1.image_ref == r2.image_ref
    assert docker("image", "inspect", "--format", "{{.Id}}", r1.image_ref).strip() \
        == r1.manifest_digest == r1.image_id
    d = r1.to_dict()
    assert d["source_date_epoch"] == EPOCH and d["source_date_epoch_from"] == "spec"
    assert d["base_images"] == [{"ref": base_image, "digest": base_image.split("@")[1],
                                 "stage": "0", "pinned": True}]
    assert d["builder"]["driver"] == "docker" and d["builder"]["engine_version"] != "unknown"
    assert any("COPY server/app.py" in (x["instruction"] or "") for x in d["layers"])
    assert d["build_s"] > 0 and d["wall_s"] >= d["build_s"] + d["load_s"]
    # BuildKit's export, timed from its own steps, is a part of the buildx call
    assert 0 < d["buildkit_export_s"] < d["build_s"]
    assert Path(d["archive"]).name == r1.manifest_digest.split(":")[1] + ".oci.tar"
    assert Path(d["log"]).read_text().strip()
    assert json.loads((Path(d["log"]).parent / "build.json").read_text())[
        "manifest_digest"] == r1.manifest_digest


def test_nondeterministic_step_is_named(date_records: list[Any]) -> None:
    r1, r2 = date_records
    assert r1.manifest_digest != r2.manifest_digest
    assert Path(r1.archive).is_file() and Path(r2.archive).is_file()
    assert r1.network == "none"
    rep = verdict(date_records)
    assert rep.reproducible is False and rep.diff.verdict == "differs"
    first = rep.explanation[0]
    assert first.startswith("/build-date") and "content differs" in first
    assert "RUN /bin/sh -c date" in first


def test_rewrite_timestamp_off_is_timestamps_only(ts_records: list[Any]) -> None:
    r1, r2 = ts_records
    assert not r1.rewrite_timestamp and r1.manifest_digest != r2.manifest_digest
    rep = verdict(ts_records)
    assert rep.diff.verdict == "timestamps-only"
    assert any(line.startswith("/hello") and "mtime" in line for line in rep.explanation)
    # the probe's check tells a rewritten archive from one that is not
    assert builder.probe_mtime(Path(r1.archive), "hello") != EPOCH


def test_real_builder_probe(example_records: list[Any]) -> None:
    assert builder.probe(None).ok
    assert builder.probe_mtime(Path(example_records[0].archive), "app/app.py") == EPOCH


def _count(raw: Any) -> tuple[int, str]:
    """Uncompressed bytes and diff_id of a gzip blob, every member (servelab writes one per
    MiB), read with zlib rather than servelab's own reader."""
    d = zlib.decompressobj(wbits=31)
    h = hashlib.sha256()
    n = 0
    while chunk := raw.read(1 << 20):
        while chunk:
            out = d.decompress(chunk)
            n += len(out)
            h.update(out)
            chunk = b""
            if d.eof:
                chunk, d = d.unused_data, zlib.decompressobj(wbits=31)
    return n, "sha256:" + h.hexdigest()


@pytest.fixture
def pushed(example_records: list[Any], registry: str) -> Iterator[tuple[str, Any]]:
    rec = example_records[0]
    ref = f"{registry}/servelab-test/build-size:{secrets.token_hex(4)}"
    docker("tag", rec.image_ref, ref)
    out = docker("push", ref)
    yield ref, rec
    docker("rmi", ref)
    digest = re.search(r"digest: (sha256:[0-9a-f]{64})", out)
    if digest:
        req = urllib.request.Request(
            f"http://{registry}/v2/servelab-test/build-size/manifests/{digest.group(1)}",
            method="DELETE")
        urllib.request.urlopen(req, timeout=10).close()


@pytest.mark.registry
def test_sizes_match_registry_and_image_inspect(pushed: tuple[str, Any]) -> None:
    ref, rec = pushed
    got = RegistryClient().get_manifest(ImageRef.parse(ref))
    assert got.digest == rec.manifest_digest
    man = json.loads(got.body)
    p = rec.primary
    assert [x["size"] for x in man["layers"]] == [x.size for x in p.layers]
    assert [x["digest"] for x in man["layers"]] == [x.digest for x in p.layers]
    assert man["config"]["size"] == p.config_size and len(got.body) == p.manifest_size
    assert p.compressed_size == len(got.body) + man["config"]["size"] + sum(
        x["size"] for x in man["layers"])
    inspect_size = int(docker("image", "inspect", "--format", "{{.Size}}", rec.image_ref))
    assert inspect_size == p.compressed_size
    # uncompressed sizes: counted independently here, and the bytes hash to the diff_ids
    with oci.open_image(rec.archive) as img:
        for layer in p.layers:
            with img.open_blob(layer.digest) as raw:
                n, diff_id = _count(raw)
            assert (n, diff_id) == (layer.uncompressed_size, layer.diff_id)
    assert p.uncompressed_size == sum(x.uncompressed_size for x in p.layers)


@pytest.fixture
def pushed_tag(base_image: str, registry: str) -> Iterator[tuple[str, str]]:
    ref = f"{registry}/servelab-test/pinme:v{secrets.token_hex(3)}"
    docker("tag", base_image.split("@", maxsplit=1)[0], ref)
    out = docker("push", ref)
    digest = re.search(r"digest: (sha256:[0-9a-f]{64})", out)
    assert digest, out
    yield ref, digest.group(1)
    docker("rmi", ref)


@pytest.mark.registry
def test_pin_against_the_local_registry(pushed_tag: tuple[str, str], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    ref, digest = pushed_tag
    df = tmp_path / "Dockerfile"
    original = f"# a comment\nFROM  {ref}  AS base\n\nRUN true\n"
    df.write_text(original)
    assert cli.main(["pin", "--check", str(df)]) == 1
    out = capsys.readouterr().out
    assert "[base-unpinned]" in out and ":2:" in out
    assert df.read_text() == original
    assert cli.main(["pin", str(df)]) == 0
    assert df.read_text() == original.replace(ref, f"{ref}@{digest}")
    assert f"pinned line 2: {ref} -> {ref}@{digest}" in capsys.readouterr().out
    assert cli.main(["pin", "--check", str(df)]) == 0
    missing = tmp_path / "Missing"
    missing.write_text(f"FROM {ref.rsplit(':', 1)[0]}:no-such-tag\n")
    assert cli.main(["pin", str(missing)]) == 1
    assert "not found" in capsys.readouterr().out


def test_diff_command_on_real_archives(date_records: list[Any], ts_records: list[Any],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    a, b = (r.archive for r in date_records)
    assert cli.main(["diff", a, b, "-f", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "differs"
    files = [c for c in doc["changes"] if c["category"] == "file"]
    assert files[0]["subject"] == "/build-date" and "content" in files[0]["fields"]
    opened = [x for x in doc["layers"] if x["opened"]]
    assert len(opened) == 1  # the base layer was not read
    ta, tb = (r.archive for r in ts_records)
    assert cli.main(["diff", ta, tb]) == 1
    assert "timestamps-only" in capsys.readouterr().out
    assert cli.main(["diff", "--ignore-timestamps", ta, tb, "-f", "markdown"]) == 0


@pytest.mark.registry
def test_diff_reads_engine_images_and_registry_refs(example_records: list[Any],
                                                    base_image: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rec = example_records[0]
    assert cli.main(["diff", f"docker-daemon:{rec.image_ref}", rec.archive]) == 0
    assert "identical" in capsys.readouterr().out
    tag = base_image.split("@", maxsplit=1)[0]
    assert cli.main(["diff", f"docker://{tag}", f"docker-daemon:{tag}"]) == 0


def test_unpinned_base_refused_before_building(builds: Any, tmp_path: Path) -> None:
    ctx = DATA / "unpinned"
    arm = Arm("treatment", ctx, ctx / "Dockerfile")
    with pytest.raises(BaseUnpinned, match="base-unpinned"):
        builds.build(arm, BuildSettings(source_date_epoch=EPOCH), repeat=1, out_dir=tmp_path)
    assert not (tmp_path / "build.log").exists()


def _images(run_prefix: str) -> list[str]:
    rows = docker("images", "--format", "{{.Repository}}:{{.Tag}}").split()
    return [r for r in rows if r.startswith(run_prefix)]


def test_build_command_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  base_image: str) -> None:
    out = tmp_path / "out"
    rc = cli.main(["build", str(DATA / "experiment.yaml"), "--out", str(out), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, doc
    (arm,) = doc["arms"]
    assert arm["reproducibility"]["reproducible"] is True
    assert [r["network"] for r in arm["records"]] == ["none", "none"]
    assert len(list((out / "images").glob("*.oci.tar"))) == 1
    assert (out / "treatment" / "repeat-2" / "build.json").is_file()
    assert json.loads((out / "build-summary.json").read_text())["exit_code"] == 0
    prefix = arm["records"][0]["image_ref"].rsplit(":", 1)[0]
    assert _images(prefix) == []  # removed at the end without --keep-image

    rc = cli.main(["build", str(DATA / "experiment.yaml"), "--out", str(out / "k"),
                   "--repeats", "1", "--keep-image"])
    text = capsys.readouterr().out
    assert rc == 0
    kept = re.search(r"kept image: (\S+)@(sha256:[0-9a-f]{64})", text)
    assert kept, text
    try:
        assert docker("image", "inspect", "--format", "{{.Id}}", kept.group(1)).strip() \
            == kept.group(2) == arm["records"][0]["manifest_digest"]
    finally:
        docker("rmi", kept.group(1))


def test_interrupt_between_load_and_tag_leaves_no_image(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        docker_client: Any) -> None:
    from servelab.build.stage import Builds
    from servelab.cleanup import Cleanup

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY r.txt /r.txt\n")
    (ctx / "r.txt").write_text(secrets.token_hex(16))  # a digest no engine has seen

    def interrupted(self: Any, loaded: str, name: str) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(Builds, "_tag", interrupted)
    run_id = "test-interrupt-" + secrets.token_hex(3)
    store = tmp_path / "store"
    with pytest.raises(KeyboardInterrupt), Cleanup(run_id) as cu, \
            Builds(run_id, store_dir=store, cleanup=cu) as b:
        b.build(Arm("interrupt", ctx, ctx / "Dockerfile"),
                BuildSettings(source_date_epoch=EPOCH), repeat=1, out_dir=tmp_path / "o")
    (archive,) = store.glob("*.oci.tar")
    digest = "sha256:" + archive.name.split(".")[0]
    res = subprocess.run([DOCKER, "image", "inspect", digest], capture_output=True, check=False)
    assert res.returncode != 0, "the loaded image was left behind"
    assert not list(store.glob(".partial-*"))


def _children(pid: int) -> dict[int, str]:
    """pid -> command line of the live processes whose parent is *pid*."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
            if int(fields[1]) == pid:
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                out[int(stat.parent.name)] = cmd
        except (OSError, ValueError, IndexError):
            continue
    return out


@pytest.mark.parametrize(("sig", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_signal_mid_build_leaves_nothing(tmp_path: Path, base_image: str, sig: str,
                                         code: int) -> None:
    """Ctrl-C (or a CI runner's SIGTERM) while buildx runs: exit 130/143, nothing left."""
    import os
    import signal
    import sys
    import time

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nRUN sleep 60\n")
    spec = tmp_path / "experiment.yaml"
    spec.write_text("apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: sig}\n"
                    "spec:\n  change: interrupted build\n  repeats: 1\n"
                    "  treatment: {context: ctx, dockerfile: Dockerfile}\n"
                    "  build: {sourceDateEpoch: 1700000000, network: none}\n")
    tmp = tmp_path / "tmp"  # the child's TMPDIR: its temporary files and no one else's
    tmp.mkdir()
    images_before = set(docker("images", "--format", "{{.Repository}}").split())
    child = subprocess.Popen([sys.executable, "-m", "servelab", "build", str(spec),
                              "--out", str(tmp_path / "out")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(tmp)})
    deadline = time.monotonic() + 60
    while not (buildx := [p for p, c in _children(child.pid).items() if "buildx" in c]):
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.1)
    time.sleep(1.0)  # inside RUN sleep 60
    child.send_signal(getattr(signal, sig))
    _, err = child.communicate(timeout=60)
    assert child.returncode == code, err
    said = "terminated (SIGTERM)" if sig == "SIGTERM" else "interrupted (SIGINT)"
    assert "Traceback" not in err and f"servelab build: {said}" in err
    assert not [p for p in buildx if Path(f"/proc/{p}").exists()], "buildx left running"
    assert list(tmp.iterdir()) == []
    assert list((tmp_path / "out").rglob(".partial-*")) == []
    new = set(docker("images", "--format", "{{.Repository}}").split()) - images_before
    assert [r for r in new if r.startswith("servelab/")] == []


def _multi_spec(tmp_path: Path, content: str, name: str) -> Path:
    """A two-platform experiment (FROM scratch and COPY: no emulation needed)."""
    ctx = tmp_path / f"ctx-{name}"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\nARG TARGETARCH\n"
                                    "COPY hello-${TARGETARCH}.txt /hello.txt\n")
    for arch in ("amd64", "arm64"):
        (ctx / f"hello-{arch}.txt").write_text(f"{content} {arch}\n")
    spec = tmp_path / f"{name}.yaml"
    spec.write_text("apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: multi}\n"
                    "spec:\n  change: two platforms\n  repeats: 2\n"
                    f"  treatment: {{context: ctx-{name}, dockerfile: Dockerfile}}\n"
                    "  build: {sourceDateEpoch: 1700000000, network: none,\n"
                    "          platform: 'linux/amd64,linux/arm64'}\n")
    return spec


def test_multi_platform_build_records_each_platform(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ocitest import archive_platforms

    docs = {}
    for name, content in (("a", "hello"), ("b", "hello again")):
        rc = cli.main(["build", str(_multi_spec(tmp_path, content, name)),
                       "--out", str(tmp_path / f"out-{name}"), "-f", "json"])
        docs[name] = json.loads(capsys.readouterr().out)
        assert rc == 0, docs[name]
    (arm,) = docs["a"]["arms"]
    assert arm["reproducibility"]["reproducible"] is True
    first, second = arm["records"]
    archive = Path(first["archive"])
    truth = archive_platforms(archive)  # read with tarfile/json, not servelab.image.oci
    assert set(truth) == {"linux/amd64", "linux/arm64"}
    for rec in (first, second):
        got = {p["platform"]: (p["manifest_digest"], p["config_digest"])
               for p in rec["platforms"]}
        assert got == truth
        assert rec["index_digest"] and rec["index_digest"] not in {d for d, _ in truth.values()}
    assert first["manifest_digest"] == truth["linux/amd64"][0]  # the first platform asked
    with tarfile.open(archive) as tf:
        for p in first["platforms"]:
            manifest = json.load(tf.extractfile(  # type: ignore[arg-type]
                "blobs/sha256/" + p["manifest_digest"].split(":")[1]))
            pulled = p["manifest_size"] + manifest["config"]["size"] + sum(
                x["size"] for x in manifest["layers"])
            assert p["compressed_size"] == pulled
    # the two platforms differ in one file; diff reads the platform it is asked for
    other = Path(docs["b"]["arms"][0]["records"][0]["archive"])
    assert cli.main(["diff", str(archive), str(other), "--platform", "linux/arm64",
                     "-f", "json"]) == 1
    diff = json.loads(capsys.readouterr().out)
    assert diff["a_manifest"] == truth["linux/arm64"][0]
    assert diff["b_manifest"] == archive_platforms(other)["linux/arm64"][0]
    files = [c for c in diff["changes"] if c["category"] == "file"]
    assert [c["subject"] for c in files] == ["/hello.txt"]
