"""The check that a lazy pull was lazy, and its bytes fetched, on fixture folders: the
snapshotter's log (soci-snapshotter-grpc 0.4.1's JSON lines) and the registry's access log
(combined format, HTTP/2 lines as the snapshotter's Go client makes them) of one pull.
positive-* folders were lazy; negative-* were not, and their notes say why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.node import Blob, ImageLayers
from servelab.node.lazypull import LazyRecord, SociIndex, assess, fetched_bytes
from servelab.node.soci import LazyRegistry

CASES = Path(__file__).resolve().parent.parent / "data" / "node" / "lazylog"
FOLDERS = sorted(p for p in CASES.iterdir() if p.is_dir())


def test_there_are_both_kinds() -> None:
    assert {p.name.split("-", 1)[0] for p in FOLDERS} == {"positive", "negative"}


def _given(case: Path) -> tuple[ImageLayers, SociIndex, LazyRegistry]:
    given = json.loads((case / "case.json").read_text())
    ref = f"{given['registry']}/{given['repository']}@sha256:" + "a" * 64
    img = ImageLayers(ref, Blob("sha256:" + "a" * 64, 1024), Blob("sha256:" + "c" * 64, 4410),
                      tuple(Blob(d, n) for d, n in given["layers"].items()))
    index = SociIndex(ref, "sha256:" + "e" * 64, given["min_layer_size"], given["ztocs"], 1.0)
    return img, index, LazyRegistry(given["registry"], log=case / "access.log")


@pytest.mark.parametrize("case", FOLDERS, ids=lambda p: p.name)
def test_lazy_check(case: Path) -> None:
    expect = json.loads((case / "expect.json").read_text())
    img, index, registry = _given(case)
    rec = LazyRecord(img.ref, 0.4, None, False, len(index.ztocs), 0, True,
                     index.min_layer_size, True, "sync")
    assess(rec, img, index, (case / "soci.log").read_text(), registry)
    assert rec.lazy is expect["lazy"] is case.name.startswith("positive-")
    got = {"discovered": rec.discovered, "index_digest": rec.index_digest,
           "remote_layers": rec.remote_layers, "fell_back": rec.fell_back,
           "requests": {d: [list(x) for x in v] for d, v in rec.requests.items()},
           "notes": rec.notes}
    assert got == {k: expect[k] for k in got}
    if "bytes_fetched" in expect:
        assert fetched_bytes(registry, 0, img) == expect["bytes_fetched"]


def test_a_pull_that_failed_is_not_lazy_even_when_the_logs_look_lazy() -> None:
    img, index, registry = _given(CASES / "positive-remote")
    rec = LazyRecord(img.ref, None, None, False, len(index.ztocs), 0, True,
                     index.min_layer_size, True, "sync")
    assess(rec, img, index, (CASES / "positive-remote" / "soci.log").read_text(), registry)
    assert rec.discovered and not rec.fell_back and rec.lazy is False


def test_without_the_registry_log_it_says_not_checked() -> None:
    img, index, _ = _given(CASES / "positive-remote")
    registry = LazyRegistry("registry.example.test:443")
    rec = LazyRecord(img.ref, 0.4, None, False, 1, 0, True, index.min_layer_size, True, "sync")
    assess(rec, img, index, (CASES / "positive-remote" / "soci.log").read_text(), registry)
    assert rec.lazy is True and rec.requests == {}
    assert rec.notes == ["the registry's access log was not checked (no --lazy-registry-log)"]
    assert fetched_bytes(registry, 0, img) is None
