"""The other long steps report progress too, in a log's form (one line per step and sub-step,
the bytes where a total is known, the end line): the push of an image no engine has seen to
the local registry, servelab's cold fetch and unpack of it, the engine's pull of it, and the
weights scan of its archive. Real registry, real engine; the progress mode set as the CLI
sets it."""

from __future__ import annotations

import contextlib
import re
import secrets
import tarfile
from pathlib import Path
from typing import Any

import pytest

from ocitest import E, archive, tar_bytes, write_layout
from servelab import logs
from servelab.image.push import TestedImage, push_tested
from servelab.image.ref import ImageRef
from servelab.image.registry import RegistryClient
from servelab.node.engine import engine_pull
from servelab.node.fetch import fetch_cold
from servelab.node.layers import read_layers
from servelab.smoke.weights import scan_archive


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "_mode", [logs.LINES])
    monkeypatch.setattr(logs, "QUIET_S", 0.0)  # every sub-step its line, however quick


def _lines(err: str, what: str) -> list[str]:
    return [x for x in err.splitlines() if x.startswith(f"servelab: {what}")]


def _image(tmp: Path) -> tuple[Path, str]:
    """An OCI archive of two layers no engine or registry has seen: a server and its model."""
    folder = {"kind": tarfile.DIRTYPE, "mode": 0o755}
    server = tar_bytes([E("app", **folder), E("app/server.py", b"print('ready')\n" * 1000)])
    model = tar_bytes([E("models", **folder),
                       E("models/model.safetensors", secrets.token_bytes(3 << 20))])
    digest = write_layout(tmp / "layout", [server, model])
    return archive(tmp / "layout", tmp / "image.oci.tar"), digest


@pytest.mark.usefixtures("shown")
def test_push_fetch_pull_and_weights_scan_report_their_steps(
        registry: str, docker_client: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, digest = _image(tmp_path)
    repo = f"{registry}/servelab-test/progress-{secrets.token_hex(4)}"
    pushed = push_tested(TestedImage("treatment", digest, path, 1), repo)
    err = capsys.readouterr().err
    push = _lines(err, f"push to {repo}")
    assert sum(": blob " in x for x in push) == 2 + 1  # the layers and the config
    assert re.fullmatch(r"servelab: push to \S+: done in \d+\.\ds, \d.* [kMG]?B", push[-1])
    assert capsys.readouterr().out == ""

    reg = RegistryClient()
    img = read_layers(reg, ImageRef.parse(pushed.ref))
    cold = fetch_cold(reg, img, tmp_path / "node")
    err = capsys.readouterr().err
    fetch, unpack = _lines(err, "cold fetch"), _lines(err, "cold unpack")
    assert sum(": layer " in x for x in fetch) == len(img.layers) == len(cold.layers)
    total = logs.size(sum(b.size for b in img.layers))
    assert fetch[-1].startswith("servelab: cold fetch: done in ") and fetch[-1].endswith(total)
    assert unpack[-1].endswith(f", {len(img.layers)}/{len(img.layers)} layers")

    try:
        engine_pull(docker_client, pushed.ref, img, holds=[])
        err = capsys.readouterr().err
        pull = _lines(err, logs.log_line(f"engine pull of {pushed.ref}")[:60])
        assert "done in" in pull[-1]
        assert any(re.search(r": layer [0-9a-f]{12}: ", x) for x in pull), pull
    finally:
        with contextlib.suppress(Exception):  # not there when the pull failed
            docker_client.api.remove_image(pushed.ref)

    report = scan_archive(path)
    err = capsys.readouterr().err
    scan = _lines(err, "weights scan")
    assert report.scanned and scan[-1].startswith("servelab: weights scan: done in ")
    assert [f.path for f in report.files] == ["/models/model.safetensors"]
    # each layer read is a step (the server's layer may come from the cache of layers read)
    assert any(f": layer {img.layers[1].digest[7:19]} (" in x for x in scan), scan
    assert all(not x.startswith("::") for x in err.splitlines())


def test_a_log_shows_one_line_a_push_not_one_a_layer(
        registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(logs, "_mode", [logs.LINES])  # a log, as in CI; QUIET_S as shipped
    path, digest = _image(tmp_path)
    repo = f"{registry}/servelab-test/progress-{secrets.token_hex(4)}"
    push_tested(TestedImage("treatment", digest, path, 1), repo)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"servelab: push to {repo}: done in "), lines
    assert all(len(x) <= logs.LINE_MAX for x in lines)
