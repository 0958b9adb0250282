"""The registry-shaped archive (servelab.build.export): gzip pieces, the tar writer, shaping.

The images here are OCI archives written by the test itself (a zstd layer as BuildKit's
``compression=zstd`` export makes, a gzip base layer as a registry gives); what servelab writes
is read back with tarfile, zlib, the gzip tool and hashlib, not with servelab's reader.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import shutil
import subprocess
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard

from servelab.build import export
from servelab.errors import InputError
from servelab.image import blob

EPOCH = 1_700_000_000
#: sha256 of the gzip bytes of test_the_bytes_are_pinned's input (deflate 0.9.0, level 4, the
#: pieces joined into one member since 0.2.0)
PINNED = "769c586a94e98c9c8d49cfd6474c166fbe7be7a3ab240f6fb550c8f52ace852d"


def _payload(n: int, seed: int = 1) -> bytes:
    """Half random, half text: compresses about 2:1, like binaries."""
    rng = random.Random(seed)  # noqa: S311 (test data)
    out = bytearray()
    while len(out) < n:
        out += rng.randbytes(3000) + b"import torch; model.load_state_dict(weights)\n" * 60
    return bytes(out[:n])


def _gz(data: bytes) -> bytes:
    out = io.BytesIO()
    export.gzip_to(io.BytesIO(data), out.write)
    return out.getvalue()


def _members(blob: bytes) -> list[bytes]:
    """The gzip members of *blob*, each decompressed on its own."""
    out = []
    while blob:
        d = zlib.decompressobj(wbits=31)
        out.append(d.decompress(blob))
        assert d.eof
        blob = d.unused_data
    return out


@pytest.mark.parametrize("size", [0, 1, export.BLOCK - 1, export.BLOCK, 3 * export.BLOCK + 7])
def test_gzip_is_one_member_that_decompresses_to_the_input(size: int) -> None:
    data = _payload(size)
    ours = _gz(data)
    assert gzip.decompress(ours) == data
    assert _members(ours) == [data]  # one member: zran-style indexers read all of it
    assert ours[:4] == b"\x1f\x8b\x08\x00" and ours[4:8] == b"\0\0\0\0"  # no name, mtime 0
    with blob.layer_stream(io.BytesIO(ours), name="t", limits=blob.Limits()) as s:
        assert s.read() == data


def test_the_bytes_are_pinned() -> None:
    """The digest servelab reports depends on these bytes: a new libdeflate (or level, or
    piece size) changes them, and must come with a release note (docs/build.md)."""
    assert hashlib.sha256(_gz(_payload(3 * export.BLOCK + 7, seed=9))).hexdigest() == PINNED


class _Trickle(io.RawIOBase):
    """A source that hands out at most 7777 bytes a read, like a pipe."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), 7777, len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def test_short_reads_give_the_same_bytes() -> None:
    data = _payload(2 * export.BLOCK + 99, seed=5)
    out = io.BytesIO()
    export.gzip_to(_Trickle(data), out.write)  # type: ignore[arg-type]
    assert out.getvalue() == _gz(data)


def test_gzip_tool_accepts_the_stream_and_the_ratio_is_close_to_one_stream(
        tmp_path: Path) -> None:
    data = _payload(5 * export.BLOCK + 123, seed=2)
    ours = _gz(data)
    (tmp_path / "x.gz").write_bytes(ours)
    res = subprocess.run(["gzip", "-dc", str(tmp_path / "x.gz")], capture_output=True,
                         check=True)
    assert res.stdout == data
    plain = zlib.compress(data, export.GZIP_LEVEL)
    assert len(ours) < 1.01 * len(plain)  # one member per MiB costs next to nothing


def test_tar_writer_streamed_member_header_is_patched(tmp_path: Path) -> None:
    path = tmp_path / "a.tar"
    with path.open("wb") as f:
        w = export.TarWriter(f)
        w.add_dir("blobs/")
        small = w.add_blob(b'{"a":1}')
        with w.streamed() as out:
            for _ in range(3):
                out.write(b"x" * 100_000)
        w.add_bytes("index.json", b"{}")
        w.close()
    big = "sha256:" + hashlib.sha256(b"x" * 300_000).hexdigest()
    assert out.digest == big and out.size == 300_000
    with tarfile.open(path) as tf:
        names = tf.getnames()
        assert names == ["blobs", export.blob_name(small), export.blob_name(big), "index.json"]
        member = tf.extractfile(export.blob_name(big))
        assert member is not None and member.read() == b"x" * 300_000
    listing = subprocess.run(["tar", "-tvf", str(path)], capture_output=True, text=True,
                             check=True).stdout
    assert "300000" in listing


def test_go_json_matches_buildkit_layout() -> None:
    doc = {"schemaVersion": 2, "annotations": {"k": "<a & b>"}, "layers": []}
    assert export.go_json(doc, indent=False) == (
        b'{"schemaVersion":2,"annotations":{"k":"\\u003ca \\u0026 b\\u003e"},"layers":[]}')
    assert export.go_json(doc, indent=True).startswith(b'{\n  "schemaVersion": 2,\n')


# ---------------------------------------------------------------------------- shaping


def _tar_layer(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime = len(data), EPOCH
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _sha(b: bytes) -> str:
    return "sha256:" + hashlib.sha256(b).hexdigest()


def write_buildkit_archive(path: Path, layers: list[tuple[str, bytes]], *,
                           diff_ids: list[str] | None = None,
                           zstd_level: int = 3, created: str | None = None) -> dict[str, Any]:
    """An OCI archive laid out as BuildKit's export: (kind, tar) layers, kind gzip (a base
    layer as the registry has it) or zstd (made by the build, timestamp rewritten)."""
    blobs: dict[str, bytes] = {}
    descs = []
    for kind, tar in layers:
        if kind == "gzip":
            blob = gzip.compress(tar, mtime=0)
            desc: dict[str, Any] = {"mediaType": export.OCI_GZIP}
        else:
            blob = zstandard.ZstdCompressor(level=zstd_level).compress(tar)
            desc = {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd"}
        blobs[_sha(blob)] = blob
        desc.update(digest=_sha(blob), size=len(blob))
        if kind == "zstd":
            desc["annotations"] = {"buildkit/rewritten-timestamp": str(EPOCH)}
        descs.append(desc)
    config = {"architecture": "amd64", "os": "linux", "config": {},
              "rootfs": {"type": "layers",
                         "diff_ids": diff_ids or [_sha(t) for _, t in layers]},
              "history": [{"created_by": f"step {i}"} for i in range(len(layers))]}
    if created is not None:
        config["created"] = created
    cfg = export.go_json(config, indent=False)
    blobs[_sha(cfg)] = cfg
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": _sha(cfg), "size": len(cfg)},
                "layers": descs}
    man = export.go_json(manifest, indent=True)
    blobs[_sha(man)] = man
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": _sha(man), "size": len(man),
                            "annotations": {"org.opencontainers.image.created":
                                            "2023-11-14T22:13:20Z"},
                            "platform": {"architecture": "amd64", "os": "linux"}}]}
    with tarfile.open(path, "w") as tf:
        for name, data in [*((export.blob_name(d), b) for d, b in blobs.items()),
                           ("index.json", json.dumps(index).encode())]:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return {"manifest": _sha(man), "config": _sha(cfg)}


def read_back(archive: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the manifest, every blob by digest), read with tarfile and checked by hashlib."""
    blobs: dict[str, bytes] = {}
    with tarfile.open(archive) as tf:
        for m in tf:
            f = tf.extractfile(m)
            if f is not None:
                blobs[m.name] = f.read()
    index = json.loads(blobs.pop("index.json"))
    assert json.loads(blobs.pop("oci-layout")) == {"imageLayoutVersion": "1.0.0"}
    by_digest = {"sha256:" + n.rsplit("/", 1)[1]: b for n, b in blobs.items()}
    for d, b in by_digest.items():
        assert _sha(b) == d
    top = index["manifests"][0]
    assert top["annotations"] == {"org.opencontainers.image.created": "2023-11-14T22:13:20Z"}
    return json.loads(by_digest[top["digest"]]), by_digest


@pytest.fixture
def layers() -> list[tuple[str, bytes]]:
    return [("gzip", _tar_layer({"etc/os-release": b"ID=debian\n"})),
            ("zstd", _tar_layer({"opt/lib/big.so": _payload(2 * export.BLOCK + 5, 3)}))]


def test_shaping_gzips_the_build_s_layers_and_keeps_the_rest(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    src = tmp_path / "build.oci.tar"
    made = write_buildkit_archive(src, layers)
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper:
        shaped = shaper.shape(src)
    assert shaped.build_digests == [made["manifest"]] and shaped.compressed == 1
    assert shaped.cpu_s > 0 and shaped.to_dict()["cpu_s"] == round(shaped.cpu_s, 3)
    manifest, blobs = read_back(shaped.archive)
    assert shaped.archive.name == shaped.digests[0].split(":")[1] + ".oci.tar"
    assert _sha(export.go_json(manifest, indent=True)) == shaped.digests[0]
    assert manifest["config"]["digest"] == made["config"]  # config and diff_ids: BuildKit's
    base, new = manifest["layers"]
    with tarfile.open(src) as tf:  # the base layer: byte for byte the registry's blob
        f = tf.extractfile(export.blob_name(base["digest"]))
        assert f is not None and f.read() == blobs[base["digest"]]
    assert new["mediaType"] == export.OCI_GZIP
    assert new["annotations"] == {"buildkit/rewritten-timestamp": str(EPOCH)}
    assert gzip.decompress(blobs[new["digest"]]) == layers[1][1]
    assert new["size"] == len(blobs[new["digest"]])
    assert shaped.sizes == {new["digest"]: len(layers[1][1])}
    assert list(store.iterdir()) == [shaped.archive]  # nothing half-written left


def test_repeats_write_nothing_and_equal_content_gives_one_digest(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    a, b, other = (tmp_path / f"{n}.oci.tar" for n in ("a", "b", "other"))
    write_buildkit_archive(a, layers)
    write_buildkit_archive(b, layers)
    write_buildkit_archive(other, layers, zstd_level=9)  # same tars, other zstd bytes
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper:
        first = shaper.shape(a)
        again = shaper.shape(b)
        third = shaper.shape(other)
    assert (first.compressed, first.matched, first.reused) == (1, 0, False)
    assert again.reused and again.archive == first.archive and again.digests == first.digests
    assert (again.compressed, again.copied, again.matched) == (0, 0, 1)
    assert third.reused and third.compressed == 0 and third.matched == 1
    assert third.build_digests != first.build_digests
    assert third.digests == first.digests  # same content: the registry-shaped digest agrees
    assert sorted(store.iterdir()) == [first.archive]


def _fresh(tmp_path: Path, src: Path, name: str) -> tuple[export.Shaped, dict[str, bytes]]:
    """*src* shaped by a session of its own: what the matching must give too."""
    store = tmp_path / name
    store.mkdir()
    with export.Shaper(store) as shaper:
        shaped = shaper.shape(src, epoch=EPOCH)
    return shaped, read_back(shaped.archive)[1]


@pytest.mark.parametrize(("change", "read_back_from"), [
    ("middle", 2), ("longer", 3), ("shorter", 3), ("first block", 0)])
def test_a_layer_that_parts_from_an_earlier_one_is_compressed_as_a_fresh_session_would(
        tmp_path: Path, layers: list[tuple[str, bytes]], monkeypatch: pytest.MonkeyPatch,
        change: str, read_back_from: int) -> None:
    """Blocks that match an earlier layer are not kept while the stream goes on; where the
    layer parts from it, the matched blocks are read back from the earlier archive and the
    gzip bytes are the ones a session that never saw the earlier layer writes."""
    big, tail = _payload(3 * export.BLOCK + 11, 7), _payload(export.BLOCK // 2, 8)
    files = {"opt/w.bin": big, "opt/z.bin": tail}
    edited = {"middle": {"opt/w.bin": big[:2 * export.BLOCK] + b"X" + big[2 * export.BLOCK + 1:],
                         "opt/z.bin": tail},
              "longer": {**files, "opt/zz.bin": _payload(export.BLOCK, 9)},
              "shorter": {"opt/w.bin": big},
              "first block": {"opt/w.bin": b"Y" + big[1:], "opt/z.bin": tail}}[change]
    a, b = tmp_path / "a.oci.tar", tmp_path / "b.oci.tar"
    write_buildkit_archive(a, [layers[0], ("zstd", _tar_layer(files))])
    write_buildkit_archive(b, [layers[0], ("zstd", _tar_layer(edited))])
    store = tmp_path / "store"
    store.mkdir()
    opened: list[int] = []
    real_limited = export._Limited
    monkeypatch.setattr(export, "_Limited",
                        lambda src, left: opened.append(left) or real_limited(src, left))
    with export.Shaper(store) as shaper:
        first = shaper.shape(a, epoch=EPOCH)
        second = shaper.shape(b, epoch=EPOCH)
    # the blocks that matched were read back from the first archive, not kept
    assert opened == ([read_back_from * export.BLOCK] if read_back_from else [])
    assert not second.reused and (second.compressed, second.matched) == (1, 0)
    assert second.digests != first.digests
    alone, alone_blobs = _fresh(tmp_path, b, "alone")
    assert second.digests == alone.digests
    manifest, blobs = read_back(second.archive)
    assert blobs == alone_blobs  # the base's layer copied in: each archive stands alone
    new = manifest["layers"][1]["digest"]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blobs[new]))) as tf:
        assert {m.name: tf.extractfile(m).read() for m in tf} == edited  # type: ignore[union-attr]
    assert sorted(store.iterdir()) == sorted([first.archive, second.archive])


def test_a_shaping_that_failed_leaves_nothing_the_next_one_could_take_for_its_own(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    """The failed pass wrote its layers into the same temporary name the next pass writes:
    the session forgets them, so the next pass compresses again and its archive is whole."""
    good, bad = tmp_path / "good.oci.tar", tmp_path / "bad.oci.tar"
    write_buildkit_archive(good, layers)
    write_buildkit_archive(bad, layers, diff_ids=[_sha(layers[0][1]), _sha(b"other")])
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper:
        with pytest.raises(InputError, match="diff_id"):
            shaper.shape(bad, epoch=EPOCH)
        assert shaper.layers == {} and shaper.blobs == {}
        shaped = shaper.shape(good, epoch=EPOCH)
    assert (shaped.compressed, shaped.matched, shaped.reused) == (1, 0, False)
    _, blobs = read_back(shaped.archive)
    assert _fresh(tmp_path, good, "alone")[1] == blobs


def test_an_image_with_the_same_layers_and_another_config_copies_them(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    """Every layer matches, but the manifest is new: the archive gets the layers from the
    earlier one (nothing compressed) and stands alone."""
    a, b = tmp_path / "a.oci.tar", tmp_path / "b.oci.tar"
    write_buildkit_archive(a, layers)
    write_buildkit_archive(b, [*layers, ("zstd", layers[1][1])])  # the layer twice: new config
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper:
        first = shaper.shape(a, epoch=EPOCH)
        second = shaper.shape(b, epoch=EPOCH)
    assert not second.reused and second.digests != first.digests
    assert (second.compressed, second.matched, second.copied) == (0, 1, 1)
    manifest, blobs = read_back(second.archive)
    assert [x["digest"] for x in manifest["layers"]][1:] == [
        read_back(first.archive)[0]["layers"][1]["digest"]] * 2
    assert len(blobs) == 4  # the base layer, the new layer once, the config, the manifest


def test_shaping_reads_a_stream_once_in_the_order_buildkit_writes_it(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    """BuildKit's export into a named pipe: blobs in digest order, index.json last, nothing
    seekable. The result is the one the file gives."""
    import os
    import threading

    src = tmp_path / "build.oci.tar"
    write_buildkit_archive(src, layers)
    ordered = tmp_path / "ordered.oci.tar"
    with tarfile.open(src) as tf_in, tarfile.open(ordered, "w") as tf_out:
        members = sorted(tf_in.getmembers(), key=lambda m: (m.name == "index.json", m.name))
        for m in members:
            tf_out.addfile(m, tf_in.extractfile(m))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("wb") as w:
            w.write(ordered.read_bytes())

    writer = threading.Thread(target=feed)
    writer.start()
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper, fifo.open("rb") as r:
        streamed = shaper.shape(r, epoch=EPOCH)  # type: ignore[arg-type]
    writer.join()
    alone, alone_blobs = _fresh(tmp_path, src, "alone")
    assert streamed.digests == alone.digests
    assert read_back(streamed.archive)[1] == alone_blobs


def test_members_that_are_not_the_layout_s_are_passed_over(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    """A layout may carry docker's manifest.json beside OCI's files; it is not read."""
    src = tmp_path / "build.oci.tar"
    write_buildkit_archive(src, layers)
    more = tmp_path / "more.oci.tar"
    with tarfile.open(src) as tf_in, tarfile.open(more, "w") as tf_out:
        extra = tarfile.TarInfo("manifest.json")
        extra.size = 2
        tf_out.addfile(extra, io.BytesIO(b"[]"))
        for m in tf_in.getmembers():
            tf_out.addfile(m, tf_in.extractfile(m))
    alone, blobs = _fresh(tmp_path, src, "alone")
    other, other_blobs = _fresh(tmp_path, more, "more")
    assert other.digests == alone.digests and other_blobs == blobs


@pytest.mark.parametrize("cut", ["no index", "truncated"])
def test_a_stream_that_stops_early_is_refused_and_leaves_nothing(
        tmp_path: Path, layers: list[tuple[str, bytes]], cut: str) -> None:
    src = tmp_path / "build.oci.tar"
    write_buildkit_archive(src, layers)
    data = src.read_bytes()
    if cut == "no index":
        with tarfile.open(src) as tf:
            last = next(m for m in tf.getmembers() if m.name == "index.json")
        data = data[:last.offset] + bytes(1024)
    else:
        data = data[:len(data) // 2]
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper, \
            pytest.raises(InputError, match=r"index\.json|truncated|tar stream|end"):
        shaper.shape(io.BytesIO(data), epoch=EPOCH)  # type: ignore[arg-type]
    assert list(store.iterdir()) == []


def test_a_layer_that_does_not_match_its_diff_id_is_refused(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    src = tmp_path / "bad.oci.tar"
    write_buildkit_archive(src, layers, diff_ids=[_sha(layers[0][1]), _sha(b"something else")])
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper, pytest.raises(InputError, match="diff_id"):
        shaper.shape(src)
    assert list(store.iterdir()) == []  # the partial archive is gone


def test_shaping_remembers_what_each_verified_layer_holds(
        tmp_path: Path, layers: list[tuple[str, bytes]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The baked-weights scan reads the listing the shaping pass made, not the layer again;
    and it finds the same files as reading the layer would."""
    from servelab.image import listing
    from servelab.smoke import weights

    big = _payload(2 << 20, 4)
    made = [layers[0], ("zstd", _tar_layer({"opt/m/model.safetensors": big,
                                             "opt/m/.wh.old.gguf": b"", "app.py": b"x"}))]
    src = tmp_path / "build.oci.tar"
    write_buildkit_archive(src, made)
    store = tmp_path / "store"
    store.mkdir()
    listing.forget()
    weights._layer_cache.clear()
    monkeypatch.setenv("SERVELAB_CACHE_DIR", str(tmp_path / "cache"))
    try:
        with export.Shaper(store) as shaper:
            shaped = shaper.shape(src)
        (gz,) = shaped.sizes
        assert listing.recall(gz) == listing.LayerListing(
            (("opt/m/model.safetensors", len(big)), ("app.py", 1)), ("opt/m/.wh.old.gguf",))
        inflated: list[str] = []
        real = weights.member_layer
        monkeypatch.setattr(weights, "member_layer",
                            lambda f, name, size: inflated.append(name) or real(f, name, size))
        fast = weights.scan_archive(shaped.archive)
        assert not any(gz.split(":")[1] in n for n in inflated)  # the big layer: not read
        listing.forget()
        weights._layer_cache.clear()
        monkeypatch.setenv("SERVELAB_CACHE_DIR", str(tmp_path / "cold"))  # no disk cache
        slow = weights.scan_archive(shaped.archive)
        assert any(gz.split(":")[1] in n for n in inflated)
        assert [w.to_dict() for w in fast.files] == [w.to_dict() for w in slow.files]
        assert [w.path for w in fast.files] == ["/opt/m/model.safetensors"]
    finally:
        listing.forget()
        weights._layer_cache.clear()


def test_a_layer_refused_for_its_diff_id_leaves_no_listing(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    from servelab.image import listing

    src = tmp_path / "bad.oci.tar"
    write_buildkit_archive(src, layers, diff_ids=[_sha(layers[0][1]), _sha(b"other")])
    listing.forget()
    with export.Shaper(tmp_path) as shaper, pytest.raises(InputError, match="diff_id"):
        shaper.shape(src)
    assert not listing._remembered


def test_output_option_and_compressor_are_what_the_record_says() -> None:
    assert export.output_option(Path("/o.tar")) == \
        "type=oci,dest=/o.tar,compression=zstd,rewrite-timestamp=true"
    assert export.output_option(Path("/o.tar"), rewrite_timestamp=False) == \
        "type=oci,dest=/o.tar,compression=zstd"
    from importlib.metadata import version

    assert f"libdeflate (deflate {version('deflate')})" in export.compressor()
    assert f"level {export.GZIP_LEVEL}" in export.compressor()


def test_disk_needed_sums_one_file_system_and_keeps_the_floor(tmp_path: Path) -> None:
    store, root = tmp_path / "out" / "images", tmp_path / "engine"
    root.mkdir()
    gib = 1 << 30
    [(path, need, why)] = export.disk_needed(store, root, 10 * gib, 3 * gib, floor=gib)
    assert path == store
    # the store's archive being written (3 GiB: BuildKit's streams through a pipe), and the
    # engine's snapshots and BuildKit's blobs (compressed once: servelab clamps the times)
    assert need == 3 * gib + 10 * gib + 3 * gib
    assert "compressed" in why and "uncompressed" in why
    [(_, first, why)] = export.disk_needed(store, root, 0, 0, floor=gib)
    assert first == gib and why == "the floor"
    shm = Path("/dev/shm")
    if shm.is_dir() and shm.stat().st_dev != tmp_path.stat().st_dev:
        apart = export.disk_needed(store, shm, 10 * gib, 3 * gib, floor=gib)
        assert [(p, n) for p, n, _ in apart] == [
            (store, 3 * gib),
            (shm, 13 * gib)]


def test_disk_check_refuses_with_the_measured_factors(tmp_path: Path) -> None:
    from servelab.build.stage import check_disk
    from servelab.errors import CapabilityError

    [(path, need, why)] = export.disk_needed(tmp_path, tmp_path, 1 << 60, 1 << 58, floor=1)
    with pytest.raises(CapabilityError, match="x the last image's compressed") as e:
        check_disk([path], need, why)
    assert e.value.exit_code == 3


@pytest.mark.docker
@pytest.mark.registry
def test_a_real_build_is_shaped_once_and_keeps_the_base_layers_of_the_registry(
        example_records: list[Any], base_image: str) -> None:
    from servelab.image.ref import ImageRef
    from servelab.image.registry import RegistryClient

    r1, r2 = example_records
    e1, e2 = r1.to_dict()["export"], r2.to_dict()["export"]
    # BuildKit's bytes hold each build's own times (no rewrite-timestamp there); servelab's
    # clamp makes them one image, and the second build's new layers were only hashed
    assert e1["build_manifest_digests"] != e2["build_manifest_digests"]
    assert r1.manifest_digest == r2.manifest_digest
    assert e1["build_manifest_digests"][0] != r1.manifest_digest  # zstd there, gzip here
    assert e1["layers_compressed"] >= 1 and not e1["reused"] and e1["layers_matched"] == 0
    assert e1["headers_clamped"] > 0 and e1["timestamps_clamped_to"] == r1.source_date_epoch
    assert e2["reused"] and e2["layers_compressed"] == e2["layers_copied"] == 0
    assert e2["layers_matched"] == e1["layers_compressed"]  # read, nothing written
    assert r2.to_dict()["shape_s"] == round(r2.shape_s, 3)
    base = json.loads(RegistryClient().get_manifest(ImageRef.parse(base_image)).body)
    n = len(base["layers"])
    layers = r1.primary.layers
    assert [x.digest for x in layers[:n]] == [x["digest"] for x in base["layers"]]
    assert {x.media_type for x in layers} == {export.OCI_GZIP}
    manifest, _ = read_back(Path(r1.archive))
    assert _sha(export.go_json(manifest, indent=True)) == r1.manifest_digest
    assert manifest["layers"][n]["annotations"] == {
        "buildkit/rewritten-timestamp": str(r1.source_date_epoch)}
    assert list(Path(r1.archive).parent.glob(".partial-*")) == []  # intermediates deleted


def test_counting_a_base_layer_s_size_also_lists_it(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    """The base's layers are streamed once for their uncompressed size; that pass lists them
    too, so the baked-weights scan does not inflate them again."""
    from servelab.build.stage import count_sizes
    from servelab.image import listing

    src = tmp_path / "build.oci.tar"
    write_buildkit_archive(src, layers)
    base = "sha256:" + hashlib.sha256(gzip.compress(layers[0][1], mtime=0)).hexdigest()
    listing.forget()
    try:
        sizes: dict[str, int | None] = {}
        count_sizes([(base, src)], sizes)
        assert sizes == {base: len(layers[0][1])}
        assert listing.recall(base) == listing.LayerListing((("etc/os-release", 10),))
        listing.forget()
        wrong = "sha256:" + "0" * 64  # not in the archive: no size, no listing
        count_sizes([(wrong, src)], sizes)
        assert sizes[wrong] is None and listing.recall(wrong) is None
    finally:
        listing.forget()


def _timed_layer(files: dict[str, bytes], mtime: float) -> bytes:
    """A layer as BuildKit exports it without rewrite-timestamp: the build's own times."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime = len(data), mtime
            ti.pax_headers = {"mtime": f"{mtime:.6f}"}
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def test_clamping_makes_builds_that_differ_in_times_one_image(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    files = {"opt/venv/lib/torch.so": _payload(export.BLOCK + 9, 5), "app.py": b"x = 1\n"}
    builds = [layers[0], ("zstd", _timed_layer(files, EPOCH + 5000.25))], \
        [layers[0], ("zstd", _timed_layer(files, EPOCH + 9000.5))]
    a, b = tmp_path / "a.oci.tar", tmp_path / "b.oci.tar"
    write_buildkit_archive(a, builds[0])
    write_buildkit_archive(b, builds[1])
    store = tmp_path / "store"
    store.mkdir()
    with export.Shaper(store) as shaper:  # without the epoch: two images
        assert shaper.shape(a).digests != shaper.shape(b).digests
    for p in store.iterdir():
        p.unlink()
    with export.Shaper(store) as shaper:
        first = shaper.shape(a, epoch=EPOCH)
        second = shaper.shape(b, epoch=EPOCH)
    assert first.digests == second.digests and first.archive == second.archive
    assert first.compressed == 1 and first.clamped == 4 and first.matched == 0  # PAX + ustar
    assert second.reused and (second.compressed, second.copied, second.matched) == (0, 0, 1)
    assert second.to_dict()["timestamps_clamped_to"] == EPOCH
    manifest, blobs = read_back(first.archive)
    base, new = manifest["layers"]
    assert base["digest"] == _sha(gzip.compress(layers[0][1], mtime=0))  # the base: as it was
    tar = gzip.decompress(blobs[new["digest"]])
    config = json.loads(blobs[manifest["config"]["digest"]])
    assert config["rootfs"]["diff_ids"] == [_sha(layers[0][1]), _sha(tar)]
    assert config["history"] == [{"created_by": "step 0"}, {"created_by": "step 1"}]
    assert new["annotations"] == {"buildkit/rewritten-timestamp": str(EPOCH)}
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        assert {m.name: m.mtime for m in tf} == {"opt/venv/lib/torch.so": EPOCH,
                                                 "app.py": EPOCH}
        f = tf.extractfile("opt/venv/lib/torch.so")
        assert f is not None and f.read() == files["opt/venv/lib/torch.so"]


def test_a_stream_with_noise_anywhere_is_a_clear_error_or_a_whole_archive(
        tmp_path: Path, layers: list[tuple[str, bytes]]) -> None:
    """BuildKit's archive with bytes spliced in at any place, as the stream pass reads it:
    either refused (InputError: digests, sizes, tar framing all checked) or shaped into an
    archive whose every blob hashes to its name; never another exception, and no partial
    archive left in the store."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    src = tmp_path / "build.oci.tar"
    write_buildkit_archive(src, layers)
    good = src.read_bytes()

    @settings(max_examples=150, deadline=None)
    @given(st.binary(min_size=1, max_size=1024), st.integers(0, len(good)))
    def check(noise: bytes, at: int) -> None:
        store = tmp_path / "noise-store"
        shutil.rmtree(store, ignore_errors=True)
        store.mkdir()
        try:
            with export.Shaper(store) as shaper:
                shaped = shaper.shape(io.BytesIO(good[:at] + noise + good[at:]),  # type: ignore[arg-type]
                                      epoch=EPOCH)
        except InputError:
            assert [p for p in store.iterdir() if p.name.startswith(".")] == []
            return
        with tarfile.open(shaped.archive) as tf:
            for m in tf:
                f = tf.extractfile(m)
                if f is not None and m.name.startswith("blobs/sha256/"):
                    assert _sha(f.read()) == "sha256:" + m.name.rsplit("/", 1)[1]

    check()
