"""Property-based tests (Hypothesis) of the OCI readers: the verified blob reader, the capped
decompression, and whole layouts read and diffed after random damage.

The properties: what was written reads back the same and verifies; any damage to a blob that
has a digest is an InputError (exit 2) naming it, never a result; any JSON or bytes in any
place give a result or a ServelabError of exit 2, never another exception. Derandomized when
``CI`` is set (the same examples every run); no example database is written."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hostile_images import Image, Layer, base_files, blob_path, compress
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servelab.errors import InputError, ServelabError
from servelab.image.blob import BlobReader, LimitExceeded, Limits, layer_stream, read_all
from servelab.image.diff import diff_images, printable
from servelab.image.oci import OciArchive, OciLayout

#: examples per property (the whole-image ones write two layouts per example: fewer)
EXAMPLES = int(os.environ.get("SERVELAB_HYPOTHESIS_EXAMPLES", "100"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=bool(os.environ.get("CI")),
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
IMAGE_SETTINGS = settings(SETTINGS, max_examples=max(10, EXAMPLES // 4))


class _Dribble(io.RawIOBase):
    """A stream that hands out its bytes in the chunk sizes it is given (then 7 at a time)."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        super().__init__()
        self._data, self._sizes, self._pos = data, list(sizes), 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), self._sizes.pop(0) if self._sizes else 7, len(self._data) - self._pos)
        b[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        return n


@SETTINGS
@given(data=st.binary(max_size=5000), sizes=st.lists(st.integers(1, 3000), max_size=20),
       size_delta=st.sampled_from([0, 0, 0, -1, 1, 100]), flip=st.booleans())
def test_blob_reader_verifies_exactly(data: bytes, sizes: list[int], size_delta: int,
                                      flip: bool) -> None:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if flip:
        digest = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    reader = BlobReader(_Dribble(data, sizes), digest, size=len(data) + size_delta, name="t")
    if size_delta == 0 and not flip:
        assert read_all(reader, 10_000) == data
        assert reader.verified and reader.count == len(data)
    else:
        with pytest.raises(InputError, match="blob sha256:"):
            read_all(reader, 10_000)
        assert not reader.verified


@SETTINGS
@given(produced=st.integers(0, 1 << 40), consumed=st.integers(0, 1 << 30),
       cap=st.integers(1, 1 << 40), ratio=st.floats(1, 1e6), floor=st.integers(0, 1 << 30))
def test_limits_refuse_exactly_past_a_cap(produced: int, consumed: int, cap: int, ratio: float,
                                          floor: int) -> None:
    limits = Limits(cap, ratio, floor)
    over = produced > cap or (produced > floor and produced > ratio * max(consumed, 1))
    if over:
        with pytest.raises(LimitExceeded, match="stopped after"):
            limits.check(produced, consumed, "layer")
    else:
        limits.check(produced, consumed, "layer")


_NAMES = st.text(st.characters(codec="utf-8", exclude_characters="\0/"), min_size=1,
                 max_size=20)
_FILES = st.dictionaries(_NAMES, st.binary(max_size=2000), min_size=1, max_size=6)
_HOW = st.sampled_from(["gzip", "zstd", "none"])


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


@SETTINGS
@given(files=_FILES, how=_HOW)
def test_a_layer_reads_back_and_measures_itself(files: dict[str, bytes], how: str) -> None:
    raw = _tar(files)
    blob = compress(raw, how)
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    diff_id = "sha256:" + hashlib.sha256(raw).hexdigest()
    reader = BlobReader(io.BytesIO(blob), digest, size=len(blob), name="t")
    with layer_stream(reader, diff_id=diff_id) as data, \
            tarfile.open(fileobj=data, mode="r|") as tf:
        got = {}
        for m in tf:
            f = tf.extractfile(m)
            got[m.name] = f.read() if f else b""
    assert got == files
    assert data.verified and data.diff_id == diff_id
    assert (data.size, data.compressed_size, data.compression) == (len(raw), len(blob), how)


@IMAGE_SETTINGS
@given(files_a=_FILES, files_b=_FILES, how=_HOW, as_archive=st.booleans())
def test_written_images_diff_as_written(files_a: dict[str, bytes], files_b: dict[str, bytes],
                                        how: str, as_archive: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d) / "a", Path(d) / "b"
        Image([Layer.of(base_files()), Layer.of(files_a, how)]).write(a)
        Image([Layer.of(base_files()), Layer.of(files_b, how)]).write(b)
        if as_archive:
            a = _archive(a, Path(d) / "a.tar")
        r = diff_images(str(a), str(b))
        changed = {c.subject for c in r.changes if c.category == "file"}
        expect = {k for k in files_a.keys() ^ files_b.keys()}
        expect |= {k for k in files_a.keys() & files_b.keys() if files_a[k] != files_b[k]}
        if _tar(files_a) == _tar(files_b):
            assert r.verdict == "identical"
        else:
            assert changed >= {printable("/" + k, one_line=True) for k in expect}
            assert all(x.verified for x in r.layers if x.status == "differs")


def _archive(layout: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w") as tf:
        for p in sorted(layout.rglob("*")):
            tf.add(p, arcname=str(p.relative_to(layout)), recursive=False)
    return dest


_DAMAGE = st.tuples(st.sampled_from(["flip", "truncate", "append"]), st.integers(0, 10**6),
                    st.binary(min_size=1, max_size=64))


def _damage(data: bytes, how: str, where: int, extra: bytes) -> bytes:
    if how == "flip" and data:
        i = where % len(data)
        return data[:i] + bytes([data[i] ^ (extra[0] or 1)]) + data[i + 1:]
    if how == "truncate" and data:
        return data[: where % len(data)]
    return data + extra


@IMAGE_SETTINGS
@given(which=st.sampled_from(["manifest", "config", "layer0", "layer1"]), damage=_DAMAGE,
       how=_HOW, as_archive=st.booleans())
def test_any_damage_to_a_blob_is_exit_2_naming_it(which: str, damage: tuple[str, int, bytes],
                                                  how: str, as_archive: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d) / "a", Path(d) / "b"
        Image([Layer.of(base_files(), how), Layer.of({"x": b"1"}, how)]).write(a)
        written = Image([Layer.of(base_files(), how), Layer.of({"x": b"2"}, how)]).write(b)
        digest = written[which] if not which.startswith("layer") else \
            written["layers"][int(which[-1])]
        path = blob_path(b, digest)
        path.write_bytes(_damage(path.read_bytes(), *damage))
        if as_archive:
            b = _archive(b, Path(d) / "b.tar")
        try:
            r = diff_images(str(a), str(b))
        except InputError as e:
            assert e.exit_code == 2
            assert digest in str(e)
            return
        # only a layer both images share by digest is never read: "same", by content address
        assert which == "layer0", r.to_dict()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64) | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=20)
_KEYS = ["mediaType", "digest", "size", "annotations", "platform", "manifests", "layers",
         "config", "rootfs", "history", "os", "architecture", "created", "diff_ids"]


def _mutate_json(doc: Any, key_path: list[str], value: Any) -> Any:
    if not key_path:
        return value
    if isinstance(doc, dict):
        k = key_path[0]
        doc = dict(doc)
        doc[k] = _mutate_json(doc.get(k), key_path[1:], value)
        return doc
    if isinstance(doc, list) and doc:
        return [_mutate_json(doc[0], key_path[1:], value), *doc[1:]]
    return value


@IMAGE_SETTINGS
@given(which=st.sampled_from(["index", "manifest", "config"]),
       key_path=st.lists(st.sampled_from([*_KEYS, "0"]), min_size=0, max_size=3),
       value=_JSON)
def test_any_json_anywhere_is_a_result_or_exit_2(which: str, key_path: list[str],
                                                  value: Any) -> None:
    """The chain stays consistent (digests and sizes rewritten), so only the JSON is hostile."""
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d) / "a", Path(d) / "b"
        img = Image([Layer.of(base_files()), Layer.of({"x": b"1"})])
        img.write(a)
        cfg = json.dumps(_mutate_json(img.config(), key_path, value)).encode() \
            if which == "config" else None
        written = img.write(b, config_bytes=cfg)
        if which == "manifest":
            man = json.loads(blob_path(b, written["manifest"]).read_bytes())
            img.write(b, manifest=_mutate_json(man, key_path, value), config_bytes=cfg)
        elif which == "index":
            idx = json.loads((b / "index.json").read_text())
            (b / "index.json").write_text(json.dumps(_mutate_json(idx, key_path, value)))
        _result_or_exit_2(a, b)


@IMAGE_SETTINGS
@given(blob=st.binary(max_size=4000), prefix=st.sampled_from([b"", b"\x1f\x8b", b"\x1f\x8b\x08",
                                                              b"\x28\xb5\x2f\xfd"]))
def test_any_bytes_as_a_layer_are_a_result_or_exit_2(blob: bytes, prefix: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d) / "a", Path(d) / "b"
        Image([Layer.of({"x": b"1"})]).write(a)
        Image([Layer(prefix + blob, raw=prefix + blob)]).write(b)
        _result_or_exit_2(a, b)


@IMAGE_SETTINGS
@given(files=_FILES, where=st.integers(0, 10**6), value=st.integers(0, 255), how=_HOW)
def test_a_damaged_tar_under_a_true_digest_is_a_result_or_exit_2(
        files: dict[str, bytes], where: int, value: int, how: str) -> None:
    raw = bytearray(_tar(files))
    raw[where % len(raw)] = value
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d) / "a", Path(d) / "b"
        Image([Layer.of({"x": b"1"})]).write(a)
        Image([Layer(compress(bytes(raw), how), how, raw=bytes(raw))]).write(b)
        _result_or_exit_2(a, b)


def _result_or_exit_2(a: Path, b: Path) -> None:
    try:
        r = diff_images(str(a), str(b))
    except ServelabError as e:
        assert e.exit_code == 2, str(e)
        return
    json.dumps(r.to_dict())  # and it renders


@SETTINGS
@given(data=st.binary(max_size=3000))
def test_any_bytes_as_an_archive_are_refused_or_read(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.tar"
        path.write_bytes(data)
        try:
            with OciArchive(path) as img:
                img.platform_manifests()
        except InputError as e:
            assert e.exit_code == 2
        root = Path(d) / "layout"
        root.mkdir()
        (root / "index.json").write_bytes(data)
        try:
            with OciLayout(root) as img:
                img.platform_manifests()
        except InputError as e:
            assert e.exit_code == 2
