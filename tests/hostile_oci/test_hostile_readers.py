"""The other readers of layers use the same verified, capped reader as ``diff``: the baked-weights
scan (smoke/weights.py), the layer sizes of a build (build/stage.py) and a registry's blobs
streamed over HTTP (a loopback server started here serves the hostile bytes: a real registry
verifies what is pushed, so it cannot be made to serve a lie)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hostile_images import (
    RUN,
    Image,
    Layer,
    base_files,
    blob_path,
    bomb,
    check_sane,
    run_diff,
    sha,
)

from servelab.build.stage import count_sizes
from servelab.smoke.weights import scan_archive

WEIGHTS = {"models/model.safetensors": b"\0" * (2 << 20)}


def _archive(layout: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w") as tf:
        for p in sorted(layout.rglob("*")):
            tf.add(p, arcname=str(p.relative_to(layout)), recursive=False)
    return dest


@pytest.fixture
def fresh_weights_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights scan caches layers by name in memory and on disk: start from none."""
    from servelab.smoke import weights

    monkeypatch.setenv("SERVELAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(weights, "_layer_cache", {})


@pytest.mark.usefixtures("fresh_weights_cache")
@pytest.mark.parametrize("how", ["gzip", "zstd"])
def test_weights_scan_reads_gzip_and_zstd_layers(tmp_path: Path, how: str) -> None:
    Image([Layer.of(base_files(), how), Layer.of(WEIGHTS, how)]).write(tmp_path / "img")
    report = scan_archive(_archive(tmp_path / "img", tmp_path / "img.tar"))
    assert report.scanned, report.error
    assert [f.path for f in report.files] == ["/models/model.safetensors"]


@pytest.mark.usefixtures("fresh_weights_cache")
def test_weights_scan_refuses_a_layer_that_is_not_its_digest(tmp_path: Path) -> None:
    written = Image([Layer.of(WEIGHTS)]).write(tmp_path / "img")
    path = blob_path(tmp_path / "img", written["layers"][0])
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    report = scan_archive(_archive(tmp_path / "img", tmp_path / "img.tar"))
    assert not report.scanned
    assert "does not match its digest" in (report.error or "") or \
        "corrupt" in (report.error or "")


@pytest.mark.usefixtures("fresh_weights_cache")
def test_weights_scan_stops_at_a_bomb(tmp_path: Path) -> None:
    Image([Layer(bomb("zstd", 4 << 30), "zstd", diff_id=sha(b"x"))]).write(tmp_path / "img")
    start = time.monotonic()
    report = scan_archive(_archive(tmp_path / "img", tmp_path / "img.tar"))
    assert time.monotonic() - start < 10
    assert not report.scanned and "expands more than" in (report.error or "")


def test_layer_sizes_are_verified_and_capped(tmp_path: Path) -> None:
    good, bad = Layer.of(base_files()), Layer(bomb("zstd", 4 << 30), "zstd", diff_id=sha(b"x"))
    written = Image([good, bad]).write(tmp_path / "img")
    tar = _archive(tmp_path / "img", tmp_path / "img.tar")
    sizes: dict[str, int | None] = {}
    start = time.monotonic()
    count_sizes([(d, tar) for d in written["layers"]], sizes)
    assert time.monotonic() - start < 10
    assert sizes == {written["layers"][0]: len(good.raw or b""), written["layers"][1]: None}


# ---------------------------------------------------------------------------- a registry


class _Blobs(BaseHTTPRequestHandler):
    """Serves one image: manifests and blobs by digest; ``lies`` maps a digest to the bytes
    sent instead; ``stall`` digests get their headers and a few bytes, then nothing."""

    store: dict[str, bytes]
    lies: dict[str, bytes]
    stall: set[str]
    manifest: bytes

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        digest = self.path.rsplit("/", 1)[1]
        if "/manifests/" in self.path:
            body, ctype = self.manifest, "application/vnd.oci.image.manifest.v1+json"
        elif digest in self.store:
            body, ctype = self.lies.get(digest, self.store[digest]), "application/octet-stream"
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(self.store.get(digest, body))))
        self.end_headers()
        if digest in self.stall:
            self.wfile.write(body[:10])
            self.wfile.flush()
            time.sleep(60)
            return
        self.wfile.write(body)


@pytest.fixture
def blob_server(tmp_path: Path) -> Iterator[tuple[str, type[_Blobs], Path]]:
    """A loopback registry serving image B of the diff tests; returns (host, handler, A)."""
    a, b = tmp_path / "a", tmp_path / "b"
    Image([Layer.of(base_files()), Layer.of({"app": b"1"})]).write(a)
    written = Image([Layer.of(base_files()), Layer.of({"app": b"2"})]).write(b)
    store = {f"sha256:{p.name}": p.read_bytes() for p in (b / "blobs" / "sha256").iterdir()}
    handler = type("H", (_Blobs,), {"store": store, "lies": {}, "stall": set(),
                                    "manifest": store[written["manifest"]]})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    handler.written = written  # type: ignore[attr-defined]
    yield f"127.0.0.1:{server.server_address[1]}", handler, a
    server.shutdown()
    server.server_close()


def test_registry_blobs_are_verified_while_streamed(tmp_path: Path,
                                                   blob_server: tuple[str, type[_Blobs], Path]
                                                   ) -> None:
    host, handler, a = blob_server
    ref = f"docker://{host}/team/app:1"
    good = run_diff(str(a), ref, "-f", "json", tmp=tmp_path / "tmp")
    check_sane(good)
    assert good.rc == 1 and json.loads(good.stdout)["layers"][1]["verified"], good.summary()
    top = handler.written["layers"][1]  # type: ignore[attr-defined]
    data = bytearray(handler.store[top])
    data[-5] ^= 0xFF
    handler.lies[top] = bytes(data)
    out = run_diff(str(a), ref, tmp=tmp_path / "tmp")
    check_sane(out)
    assert out.rc == 2 and f"blob {top} does not match its digest" in out.stderr, out.summary()


def test_a_stalled_registry_does_not_hold_ctrl_c(tmp_path: Path,
                                                 blob_server: tuple[str, type[_Blobs], Path]
                                                 ) -> None:
    """B's top layer declares 20 MB (so both sides are read by worker threads) and its server
    stalls after 10 bytes: the worker is stuck in a socket read. SIGINT still ends the command
    within about a second, exit 130."""
    host, handler, a = blob_server
    top = handler.written["layers"][1]  # type: ignore[attr-defined]
    big = handler.store[top] + b"\0" * (20 << 20)
    big_digest = sha(big)
    man = json.loads(handler.manifest)
    man["layers"][1] = dict(man["layers"][1], digest=big_digest, size=len(big))
    handler.manifest = json.dumps(man).encode()
    handler.store[big_digest] = big
    handler.stall.add(big_digest)
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", RUN, "diff", str(a), f"docker://{host}/t/a:1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.5)
        assert proc.poll() is None, proc.communicate()
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=7)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert took < 2.0, f"took {took:.2f}s"
