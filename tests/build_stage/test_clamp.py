"""Clamping a layer's times to SOURCE_DATE_EPOCH (servelab.build.clamp).

The tars are made by GNU tar (posix and gnu formats, fractional times in PAX records) and by
Python's tarfile; what comes out is read back with tarfile and GNU tar, not with servelab.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from servelab.build.clamp import Clamp
from servelab.errors import InputError

EPOCH = 1_700_000_000
LATE = EPOCH + 86_400 * 30


def _tree(root: Path) -> Path:
    (root / "app" / "deep" / ("d" * 120)).mkdir(parents=True)
    (root / "app" / "model.py").write_bytes(b"import torch\n" * 5000)
    (root / "app" / "old.txt").write_text("older than the epoch\n")
    (root / "app" / "deep" / ("d" * 120) / ("long-name-" * 12 + ".py")).write_text("x = 1\n")
    (root / "app" / "link").symlink_to("model.py")
    os.link(root / "app" / "model.py", root / "app" / "hard.py")
    for p in sorted(root.rglob("*"), reverse=True):
        t = EPOCH - 1000 if p.name == "old.txt" else LATE + 0.123456
        os.utime(p, (t, t), follow_symlinks=False)
    return root / "app"


def _gnu_tar(tmp: Path, fmt: str) -> bytes:
    _tree(tmp / "src")
    out = tmp / f"{fmt}.tar"
    subprocess.run(["tar", f"--format={fmt}", "-C", str(tmp / "src"), "-cf", str(out), "app"],
                   check=True)
    return out.read_bytes()


def _clamp(data: bytes, epoch: int = EPOCH, chunk: int = 1 << 16) -> tuple[bytes, Clamp]:
    c = Clamp(io.BytesIO(data), epoch)
    out = bytearray()
    while piece := c.read(chunk):
        out += piece
    return bytes(out), c


def _members(data: bytes) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        return tf.getmembers()


@pytest.mark.parametrize("fmt", ["posix", "gnu", "ustar"])
def test_times_after_the_epoch_are_clamped_and_nothing_else_changes(
        tmp_path: Path, fmt: str) -> None:
    if fmt == "ustar":  # ustar cannot hold the long name: a flat tree
        (tmp_path / "src" / "app").mkdir(parents=True)
        (tmp_path / "src" / "app" / "a.py").write_text("a = 1\n")
        os.utime(tmp_path / "src" / "app" / "a.py", (LATE, LATE))
        out = tmp_path / "u.tar"
        subprocess.run(["tar", "--format=ustar", "-C", str(tmp_path / "src"), "-cf", str(out),
                        "app"], check=True)
        src = out.read_bytes()
    else:
        src = _gnu_tar(tmp_path, fmt)
    out, c = _clamp(src)
    before, after = _members(src), _members(out)
    assert [m.name for m in after] == [m.name for m in before]
    for b, a in zip(before, after, strict=True):
        assert a.mtime == min(int(b.mtime), EPOCH) if b.mtime > EPOCH else a.mtime == b.mtime
        assert (a.size, a.mode, a.type, a.linkname, a.uid) == (b.size, b.mode, b.type,
                                                                b.linkname, b.uid)
        assert all(float(v) <= EPOCH for k, v in a.pax_headers.items()
                   if k in ("mtime", "atime", "ctime"))
    assert c.clamped >= sum(1 for m in before if m.mtime > EPOCH)
    assert c.size == len(out) and c.diff_id == "sha256:" + hashlib.sha256(out).hexdigest()
    with tarfile.open(fileobj=io.BytesIO(out)) as a, tarfile.open(fileobj=io.BytesIO(src)) as b:
        for m in a.getmembers():  # file bytes pass unchanged
            if m.isfile():
                fa, fb = a.extractfile(m), b.extractfile(m.name)
                assert fa is not None and fb is not None and fa.read() == fb.read()
    listing = subprocess.run(["tar", "--full-time", "-tvf", "-"], input=out,
                             capture_output=True, check=True).stdout.decode()
    assert "2023-11-14 22:13:20" in listing and "2023-12-14" not in listing


def test_a_tar_with_nothing_to_clamp_passes_byte_for_byte(tmp_path: Path) -> None:
    src = _gnu_tar(tmp_path, "posix")
    out, c = _clamp(src, epoch=2**33)  # GNU tar's PAX atime and ctime are now: after LATE
    assert out == src and c.clamped == 0
    assert c.diff_id == "sha256:" + hashlib.sha256(src).hexdigest()


@pytest.mark.parametrize("chunk", [1, 511, 512, 513, 70_000])
def test_the_bytes_do_not_depend_on_how_they_are_read(tmp_path: Path, chunk: int) -> None:
    src = _gnu_tar(tmp_path, "posix")
    whole, _ = _clamp(src, chunk=1 << 24)
    assert _clamp(src, chunk=chunk)[0] == whole

    class Dribble(io.BytesIO):  # a source that returns a few bytes a read
        def read(self, n: int | None = -1) -> bytes:
            return super().read(min(n if n and n > 0 else 7, 7))

    c = Clamp(Dribble(src), EPOCH)
    got = bytearray()
    while piece := c.read(chunk):
        got += piece
    assert bytes(got) == whole


def test_two_builds_that_differ_only_in_times_clamp_to_the_same_bytes(tmp_path: Path) -> None:
    def made(t: float) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for name in ("opt/venv/lib/a.py", "opt/venv/lib/b.so"):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime = 3, t
                ti.pax_headers = {"mtime": f"{t:.9f}"}
                tf.addfile(ti, io.BytesIO(b"abc"))
        return buf.getvalue()

    one, two = made(LATE + 0.5), made(LATE + 99.25)
    assert one != two
    assert _clamp(one)[0] == _clamp(two)[0]


def test_a_truncated_or_corrupt_tar_is_refused(tmp_path: Path) -> None:
    src = _gnu_tar(tmp_path, "posix")
    with pytest.raises(InputError, match="ends inside"):
        _clamp(src[:700])
    bad = bytearray(src)
    bad[0] ^= 0x20  # the first header's checksum no longer matches
    with pytest.raises(InputError, match="checksum"):
        _clamp(bytes(bad))
    pax = bytearray(src)
    start = 512  # the first PAX header's records
    pax[start:start + 2] = b"zz"
    with pytest.raises(InputError, match="PAX record"):
        _clamp(bytes(pax))


def test_noise_anywhere_is_a_clear_error_or_a_valid_tar(tmp_path: Path) -> None:
    """Bytes spliced into a real tar at any place, read in any chunk size: the clamp either
    refuses them (InputError) or passes a tar whose headers tarfile reads and whose times are
    all clamped; never another exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    good = _gnu_tar(tmp_path, "posix")

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=2048), st.integers(0, len(good)), st.integers(1, 5000))
    def check(noise: bytes, at: int, chunk: int) -> None:
        try:
            out, _ = _clamp(good[:at] + noise + good[at:], chunk=chunk)
        except InputError:
            return
        try:
            members = _members(out)
        except tarfile.TarError:
            return  # passed through as it came (after the end marker, or data bytes)
        assert all(m.mtime <= EPOCH for m in members)

    check()
