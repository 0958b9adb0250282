"""servelab.node without an engine: progress events, bytes, names, the timeline.

The event streams in tests/data/smoke/pull-events are a recording of Docker 26's containerd
image store (no unpack events), the classic store's shape (per-layer Extracting and Pull
complete), and a pull that found every layer held.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servelab.errors import InputError
from servelab.node import Blob, ImageLayers, NodeSettings, NodeStart, pull_record
from servelab.node.session import _name_of

EVENTS = Path(__file__).resolve().parent.parent / "data" / "smoke" / "pull-events"
IMG_DIGEST = "sha256:" + "a" * 64


def _case(name: str) -> tuple[dict[str, Any], ImageLayers, list[tuple[float, dict[str, Any]]]]:
    doc = json.loads((EVENTS / name).read_text())
    layers = tuple(Blob(x["digest"], x["size"]) for x in doc["layers"])
    img = ImageLayers("127.0.0.1:5000/x@" + IMG_DIGEST, Blob(IMG_DIGEST, 500),
                      Blob("sha256:" + "b" * 64, 1500), layers)
    events = [(float(e["t"]), {k: v for k, v in e.items() if k != "t"}) for e in doc["events"]]
    return doc, img, events


@pytest.mark.parametrize("name", sorted(p.name for p in EVENTS.glob("*.json")))
def test_pull_record_from_engine_events(name: str) -> None:
    doc, img, events = _case(name)
    rec = pull_record("warm-base", img.ref, img, ["base"], t0=0.0, w0=0.0, t_end=doc["end"],
                      events=events)
    want = doc["expect"]
    assert [x.pulled for x in rec.layers] == want["pulled"]
    assert rec.download_s == pytest.approx(want["download_s"])
    assert rec.unpack_s == pytest.approx(want["unpack_s"], abs=1e-9)
    assert [x.unpacked_s for x in rec.layers] == [
        pytest.approx(u) if u is not None else None for u in want["unpacked_s"]]
    assert want["basis"] in rec.unpack_basis
    # bytes come from the manifest, never from the events: manifest + config + pulled layers
    pulled = sum(b.size for b, p in zip(img.layers, want["pulled"], strict=True) if p)
    assert rec.bytes_pulled == 500 + 1500 + pulled
    assert rec.bytes_present == sum(b.size for b in img.layers) - pulled
    assert rec.total_s == pytest.approx(doc["end"])


def test_a_blob_the_content_store_kept_is_not_downloaded() -> None:
    """The engine lists a layer as fetched ("Download complete") when its blob was still in
    the content store (a lease of an earlier operation kept it): unpacked, not downloaded."""
    doc, img, events = _case("containerd-docker26.json")
    kept = frozenset({img.layers[1].digest})
    rec = pull_record("warm-base", img.ref, img, [], t0=0.0, w0=0.0, t_end=doc["end"],
                      events=events, in_store=kept)
    assert [x.state for x in rec.layers] == ["present", "in-store"]
    assert rec.bytes_pulled == 500 + 1500  # manifest and config only
    assert rec.bytes_in_store == img.layers[1].size
    assert rec.bytes_present == sum(b.size for b in img.layers)
    assert rec.download_s == pytest.approx(0.3111)  # still the engine's fetch phase
    assert rec.summary()["bytes_in_store"] == img.layers[1].size


def test_layer_phase_times_are_first_occurrences() -> None:
    _doc, img, events = _case("classic-store.json")
    rec = pull_record("warm-base", img.ref, img, [], t0=0.0, w0=0.0, t_end=0.65, events=events)
    held, first, small = rec.layers
    assert held.started_s is None and held.downloaded_s is None
    assert first.started_s == pytest.approx(0.10)  # first Downloading, not the later ones
    assert first.downloaded_s == pytest.approx(0.31)  # Verifying Checksum ends the download
    assert small.started_s == pytest.approx(0.35)
    assert rec.summary()["layers_pulled"] == 2 and rec.summary()["layers_present"] == 1


def test_bytes_a_node_holding_some_layers_pulls() -> None:
    layers = (Blob("sha256:" + "1" * 64, 1000), Blob("sha256:" + "2" * 64, 20),
              Blob("sha256:" + "3" * 64, 3))
    img = ImageLayers("r@" + IMG_DIGEST, Blob(IMG_DIGEST, 100), Blob("sha256:" + "9" * 64, 10),
                      layers)
    assert img.total_bytes == 1133
    assert img.bytes_without(frozenset()) == (1133, 3)
    assert img.bytes_without(frozenset({layers[0].digest})) == (133, 2)
    assert img.bytes_without(img.layer_digests) == (110, 0)


@pytest.mark.parametrize(("ref", "name"), [
    ("servelab/run/treatment:0123abcd@sha256:" + "5" * 64, "servelab/run/treatment:0123abcd"),
    ("127.0.0.1:5000/team/app:1.0", "127.0.0.1:5000/team/app:1.0"),
    ("127.0.0.1:5000/team/app", None),  # no tag: nothing servelab can remove and restore
    ("team/app@sha256:" + "5" * 64, None),
    ("sha256:" + "5" * 64, None),
])
def test_the_name_servelab_removes_and_restores(ref: str, name: str | None) -> None:
    assert _name_of(ref) == name


@pytest.mark.parametrize("good", ["127.0.0.1:5000", "ghcr.io/acme/servelab", "localhost:5000/"])
def test_registry_settings_accepted(good: str) -> None:
    assert NodeSettings(good).registry == good.rstrip("/")


@pytest.mark.parametrize("bad", ["", "http://127.0.0.1:5000", "host:5000/Upper", "a b"])
def test_registry_settings_refused(bad: str) -> None:
    with pytest.raises(InputError, match="invalid cold-start registry") as e:
        NodeSettings(bad)
    assert e.value.exit_code == 2
    assert "host[:port][/path]" in (e.value.hint or "")


def test_node_timeline_lays_the_phases_end_to_end() -> None:
    doc, img, events = _case("containerd-docker26.json")
    warm = pull_record("warm-base", img.ref, img, [], t0=0.0, w0=0.0, t_end=doc["end"],
                       events=events)
    node = NodeStart("127.0.0.1:5000", img, None, warm, [])
    node.with_start({"create_s": 0.05, "start_call_s": 0.2, "start_to_ready_s": 1.0,
                     "start_to_first_good_request_s": 1.1, "start_to_tcp_accept_s": 0.5})
    d = node.to_dict()
    assert d["to_ready_s"]["warm_base"] == pytest.approx(0.4225 + 0.05 + 0.2 + 1.0)
    assert d["to_first_request_s"]["warm_base"] == pytest.approx(0.4225 + 0.05 + 0.2 + 1.1)
    assert d["to_ready_s"]["cold"] is None and d["cold"] is None  # not measured: no figure
    assert d["warm_base"]["bytes_pulled"] == 500 + 1500 + 4001445
    # a start that never got ready has no time to ready on the node either
    node.with_start({"create_s": 0.05, "start_call_s": 0.2, "start_to_ready_s": None})
    assert node.to_dict()["to_ready_s"]["warm_base"] is None
