"""servelab.image.listing: the tar header indexer agrees with tarfile, chunk size whatever,
and gives up (None) rather than guess on what it does not understand."""

from __future__ import annotations

import io
import random
import tarfile

import pytest

from servelab.image import listing
from servelab.image.listing import LayerListing, TarIndexer

NAMES = ["usr/lib/libtorch.so", "opt/" + "deep/" * 30 + "model.safetensors",
         "srv/ä ö/é.gguf", "opt/m/.wh.old.bin", "opt/n/.wh..wh..opq", "q/" + "z" * 99,
         "empty.txt"]


def _tar(fmt: int, *, seed: int = 1) -> bytes:
    rng = random.Random(seed)  # noqa: S311 (test data, not secrets)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name in NAMES:
            data = rng.randbytes(0 if "empty" in name else rng.randint(1, 5000))
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        for name, kind, link in (("dir", tarfile.DIRTYPE, ""), ("ln", tarfile.SYMTYPE, "x"),
                                 ("hard", tarfile.LNKTYPE, NAMES[0])):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = kind, link
            tf.addfile(ti)
    return buf.getvalue()


def _by_tarfile(data: bytes) -> LayerListing:
    files, whiteouts = [], []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tf:
        for m in tf:
            if m.name.rsplit("/", 1)[-1].startswith(".wh."):
                whiteouts.append(m.name)
            elif m.isfile():
                files.append((m.name, m.size))
    return LayerListing(tuple(files), tuple(whiteouts))


def _index(data: bytes, chunk: int) -> TarIndexer:
    ix = TarIndexer()
    for i in range(0, len(data), chunk):
        ix.feed(data[i:i + chunk])
    return ix


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT],
                         ids=["gnu-longname", "pax"])
@pytest.mark.parametrize("chunk", [1, 511, 512, 513, 4096, 1 << 20])
def test_indexer_lists_what_tarfile_lists(fmt: int, chunk: int) -> None:
    data = _tar(fmt)
    got = _index(data, chunk).listing()
    assert got == _by_tarfile(data)
    assert got is not None and len(got.files) == 5 and len(got.whiteouts) == 2


def test_ustar_prefix_names_are_joined() -> None:
    buf = io.BytesIO()
    name = "a" * 120 + "/weights.safetensors"  # fits ustar only with its prefix field
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        ti = tarfile.TarInfo(name)
        ti.size = 3
        tf.addfile(ti, io.BytesIO(b"abc"))
    got = _index(buf.getvalue(), 100).listing()
    assert got is not None and got.files == ((name, 3),)


def test_big_sizes_in_base_256_are_read() -> None:
    block = bytearray(tarfile.TarInfo("huge.bin").tobuf(format=tarfile.GNU_FORMAT))
    size = 9 << 30  # over the 8 GiB octal limit: GNU writes base-256
    block[124:136] = bytes([0x80]) + size.to_bytes(11, "big")
    block[148:156] = b" " * 8
    block[148:156] = f"{sum(block):06o}\0 ".encode()
    ix = TarIndexer()
    ix.feed(bytes(block))
    assert ix.files == [("huge.bin", size)] and ix.broken is None


@pytest.mark.parametrize("damage", ["truncated", "checksum", "global-pax"])
def test_what_it_does_not_understand_gives_no_listing(damage: str) -> None:
    data = bytearray(_tar(tarfile.PAX_FORMAT))
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "checksum":
        data[0] ^= 0x01
    else:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT,
                          pax_headers={"comment": "global"}) as tf:
            ti = tarfile.TarInfo("a")
            tf.addfile(ti, io.BytesIO(b""))
        data = bytearray(buf.getvalue())
    assert _index(bytes(data), 4096).listing() is None


def test_remembered_listings_are_bounded_and_recalled_by_digest() -> None:
    listing.forget()
    try:
        one = LayerListing((("a", 1),))
        listing.remember("sha256:" + "0" * 64, one)
        assert listing.recall("sha256:" + "0" * 64) is one
        for i in range(1, listing.MAX_REMEMBERED + 1):
            listing.remember(f"sha256:{i:064x}", LayerListing(()))
        assert listing.recall("sha256:" + "0" * 64) is None  # the oldest went first
        assert listing.recall(f"sha256:{listing.MAX_REMEMBERED:064x}") is not None
    finally:
        listing.forget()


def test_any_bytes_give_a_listing_or_none_never_an_error() -> None:
    """A base layer comes from a registry: whatever its tar holds, the indexer gives up
    (None) or lists, it does not raise."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    good = _tar(tarfile.PAX_FORMAT)

    @settings(max_examples=300, derandomize=True, deadline=None)
    @given(st.binary(max_size=4096), st.integers(0, len(good)), st.integers(1, 700))
    def check(noise: bytes, at: int, chunk: int) -> None:
        data = good[:at] + noise + good[at:]
        got = _index(data, chunk).listing()
        assert got is None or isinstance(got, LayerListing)

    check()
