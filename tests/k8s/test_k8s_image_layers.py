"""k8s-check --image reads the script a container really runs: real OCI layouts whose layers
hold each hostile form (names the runtime cleans, links, hard links, whiteouts, opaque
folders, decoys in later layers, decoys past the script cap, scripts without ``.sh`` or an
exec bit), read as containerd's unpacker would apply them (servelab.k8s.layerfs)."""

from __future__ import annotations

import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from ocitest import E, tar_bytes, write_layout
from servelab.findings import FindingsReport
from servelab.k8s import check_manifests, layerfs
from servelab.k8s.imagefiles import MAX_SCRIPT, MAX_SCRIPTS, read_image
from servelab.k8s.layerfs import MAX_LINK_HOPS, clean
from servelab.report import get_reporter

BAD = b"#!/bin/sh\npip install flash-attn\nexec python -m server\n"
GOOD = b"#!/bin/sh\nexec python -m server\n"
MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: serve}
spec:
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      containers:
        - name: server
          image: registry.example.internal/llm/serve:1.0
          resources: {limits: {nvidia.com/gpu: "1"}}
"""


def _image(tmp_path: Path, layers: list[list[E]], **config: Any) -> Path:
    root = tmp_path / "layout"
    write_layout(root, [tar_bytes(entries) for entries in layers],
                 config={"config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], **config}})
    return root


def _check(tmp_path: Path, image: Path, manifest: str = MANIFEST) -> FindingsReport:
    path = tmp_path / "deploy.yaml"
    path.write_text(manifest)
    return check_manifests([path], image=str(image))


def _installs(report: FindingsReport) -> list[str]:
    return [f.message for f in report.findings if f.rule_id == "start-install"]


@pytest.mark.parametrize("name", ["opt/./start.sh", "opt//start.sh", "opt/../opt/start.sh",
                                  "./opt/start.sh", "/opt/start.sh", "opt/x/../start.sh"])
def test_names_the_runtime_cleans_replace_the_file_below(tmp_path: Path, name: str) -> None:
    image = _image(tmp_path, [[E("opt/start.sh", GOOD, 0o755)], [E(name, BAD, 0o755)]],
                   Entrypoint=["/opt/start.sh"])
    assert any("flash-attn" in m for m in _installs(_check(tmp_path, image)))


def test_clean_is_go_filepath_clean_within_the_root() -> None:
    assert clean("opt/./x") == clean("opt//x") == clean("opt/../opt/x") == ["opt", "x"]
    assert clean("./opt/x") == clean("/opt/x") == clean("/../opt/x") == ["opt", "x"]
    assert clean("../opt/x") is None
    assert clean("opt/../../x") is None


def test_a_name_above_the_root_is_not_applied_and_said(tmp_path: Path) -> None:
    image = _image(tmp_path, [[E("opt/start.sh", GOOD, 0o755), E("../opt/start.sh", BAD)]],
                   Entrypoint=["/opt/start.sh"])
    report = _check(tmp_path, image)
    assert not _installs(report)
    assert any("climbs above the image root" in n.text() for n in report.coverage)


def test_a_later_layer_decoy_wins_as_at_runtime(tmp_path: Path) -> None:
    hidden = _image(tmp_path / "a", [[E("opt/start.sh", BAD, 0o755)],
                                     [E("opt/start.sh", GOOD, 0o755)]],
                    Entrypoint=["/opt/start.sh"])
    assert not _installs(_check(tmp_path / "a", hidden))
    shown = _image(tmp_path / "b", [[E("opt/start.sh", GOOD, 0o755)],
                                    [E("opt/start.sh", BAD, 0o644)]],
                   Entrypoint=["/opt/start.sh"])
    assert _installs(_check(tmp_path / "b", shown))


def test_an_entrypoint_that_is_a_symlink_is_followed(tmp_path: Path) -> None:
    image = _image(tmp_path, [[E("opt/real/launch", BAD, 0o644)],
                              [E("usr/local/bin/serve", kind=tarfile.SYMTYPE,
                                 linkname="../../../opt/real/launch")]],
                   Entrypoint=["serve"])
    assert any("flash-attn" in m for m in _installs(_check(tmp_path, image)))


def test_an_entrypoint_that_is_a_hard_link_is_followed(tmp_path: Path) -> None:
    image = _image(tmp_path, [[E("opt/payload", BAD, 0o644),
                               E("opt/run", kind=tarfile.LNKTYPE, linkname="opt/payload")]],
                   Entrypoint=["/opt/run"])
    assert _installs(_check(tmp_path, image))


def test_a_folder_that_is_a_link_takes_the_files_below_it(tmp_path: Path) -> None:
    image = _image(tmp_path, [[E("srv", kind=tarfile.DIRTYPE, mode=0o755),
                               E("opt", kind=tarfile.SYMTYPE, linkname="/srv")],
                              [E("opt/start.sh", BAD, 0o755)]],
                   Entrypoint=["/srv/start.sh"])
    assert _installs(_check(tmp_path, image))


def test_a_link_loop_is_a_coverage_note(tmp_path: Path) -> None:
    image = _image(tmp_path, [[E("opt/a", kind=tarfile.SYMTYPE, linkname="/opt/b"),
                               E("opt/b", kind=tarfile.SYMTYPE, linkname="/opt/a")]],
                   Entrypoint=["/opt/a"])
    report = _check(tmp_path, image)
    assert any(f"more than {MAX_LINK_HOPS} symbolic links" in n.text()
               for n in report.coverage), report.coverage


def test_a_script_without_sh_or_exec_bit_that_sh_runs_is_read(tmp_path: Path) -> None:
    image = _image(tmp_path, [[E("opt/launch", b"pip install flash-attn\n", 0o644)]],
                   Cmd=["sh", "/opt/launch"])
    assert _installs(_check(tmp_path, image))
    manifest = MANIFEST.replace("          resources:",
                                "          command: [bash, /opt/boot]\n          resources:")
    image = _image(tmp_path / "m", [[E("opt/boot", b"pip install flash-attn\n", 0o600)]])
    assert _installs(_check(tmp_path / "m", image, manifest))


def test_whiteouts_and_opaque_folders_delete(tmp_path: Path) -> None:
    gone = _image(tmp_path / "a", [[E("opt/start.sh", BAD, 0o755)],
                                   [E("opt/.wh.start.sh")]], Entrypoint=["/opt/start.sh"])
    assert not _installs(_check(tmp_path / "a", gone))
    opaque = _image(tmp_path / "b", [[E("opt/start.sh", BAD, 0o755)],
                                     [E("opt/other.sh", GOOD, 0o755), E("opt/.wh..wh..opq")]],
                    Entrypoint=["/opt/start.sh"])
    files = read_image(str(opaque))
    assert set(files.scripts) == {"/opt/other.sh"}
    # the opaque marker keeps what its own layer adds, whatever the order
    back = _image(tmp_path / "c", [[E("opt/start.sh", GOOD, 0o755)],
                                   [E("opt/.wh..wh..opq"), E("opt/start.sh", BAD, 0o755)]],
                  Entrypoint=["/opt/start.sh"])
    assert _installs(_check(tmp_path / "c", back))


def test_decoys_past_the_cap_keep_the_named_script_and_say_so(tmp_path: Path) -> None:
    decoys = [E(f"decoy/d{i}.sh", GOOD, 0o755) for i in range(MAX_SCRIPTS + 50)]
    image = _image(tmp_path, [decoys, [E("opt/start.sh", BAD, 0o755)]],
                   Entrypoint=["/opt/start.sh"])
    report = _check(tmp_path, image)
    assert _installs(report)
    assert any(f"past the first {MAX_SCRIPTS}" in n.text() and "MAX_SCRIPTS" in n.text()
               for n in report.coverage)


def test_a_layer_full_of_whiteouts_is_read_in_linear_time(tmp_path: Path) -> None:
    """A 1.5 MB layer of whiteouts and opaque markers over 1,900 scripts (40 s before)."""
    many = [E(f"d{i % 50}/f{i}.sh", GOOD, 0o755) for i in range(1900)]
    outs = [E(f"d{i % 50}/.wh.f{i}.sh") for i in range(1900)]
    outs += [E(f"d{i % 50}/.wh..wh..opq") for i in range(500)]
    outs += [E(f"x{i}/.wh.gone{i}") for i in range(600)]
    layer = tar_bytes(outs)
    assert len(layer) >= 1_500_000
    root = tmp_path / "layout"
    write_layout(root, [tar_bytes(many), layer, tar_bytes([E("opt/start.sh", BAD, 0o755)])],
                 config={"config": {"Entrypoint": ["/opt/start.sh"]}})
    start = time.process_time()  # CPU time: the machine's other load does not count
    files = read_image(str(root))
    took = time.process_time() - start
    assert set(files.scripts) == {"/opt/start.sh"}
    assert took < 1.0, f"{took:.2f} s of CPU"


def test_a_named_script_past_the_size_cap_is_a_note(tmp_path: Path) -> None:
    big = b"#!/bin/sh\n" + b"# pad\n" * (MAX_SCRIPT // 6 + 10)
    image = _image(tmp_path, [[E("opt/start.sh", big, 0o755)]], Entrypoint=["/opt/start.sh"])
    report = _check(tmp_path, image)
    assert any("/opt/start.sh" in n.text() and "MAX_SCRIPT" in n.text()
               for n in report.coverage), report.coverage
    assert "partly checked" in get_reporter("text").render(report)


def test_paths_past_the_entry_cap_are_a_note(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(layerfs, "MAX_ENTRIES", 10)
    image = _image(tmp_path, [[E(f"f{i}", b"x") for i in range(20)],
                              [E("opt/start.sh", BAD, 0o755)]], Entrypoint=["/opt/start.sh"])
    report = _check(tmp_path, image)
    assert any("MAX_ENTRIES" in n.text() for n in report.coverage), report.coverage


def test_a_bare_command_is_found_on_path_and_a_bare_argument_in_workdir(tmp_path: Path) -> None:
    image = _image(tmp_path, [[E("usr/local/bin/serve", BAD, 0o755),
                               E("app/serve", GOOD, 0o644)]],
                   Entrypoint=["serve"], WorkingDir="/app")
    assert _installs(_check(tmp_path, image))  # the program on PATH, not the decoy in /app
    image = _image(tmp_path / "b", [[E("app/launch", BAD, 0o644)]], Cmd=["sh", "launch"],
                   WorkingDir="/app")
    assert _installs(_check(tmp_path / "b", image))
