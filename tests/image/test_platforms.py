"""platforms.choose and single_platform_layout (pure logic; the real Trivy use is in
tests/scan/test_scan_platforms.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.image import platforms
from servelab.image.oci import Descriptor, OciLayout, PlatformManifest

MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _pm(platform: str, n: int) -> PlatformManifest:
    desc = Descriptor(MANIFEST, "sha256:" + f"{n:02x}" * 32, 100 + n)
    config = Descriptor("application/vnd.oci.image.config.v1+json", "sha256:" + "cc" * 32, 10)
    return PlatformManifest(desc, platform, {}, config, [])


IMAGE = [_pm("linux/arm64", 1), _pm("linux/amd64/v3", 2), _pm("linux/amd64", 3),
         _pm("linux/arm/v7", 4)]


@pytest.mark.parametrize(("wanted", "index"), [
    ("linux/amd64", 2),       # exact beats a variant listed earlier
    ("linux/amd64/v3", 1),
    ("linux/arm", 3),         # no variant asked: the first variant of it
    ("linux/arm64", 0),
])
def test_choose_wanted(wanted: str, index: int) -> None:
    assert platforms.choose(IMAGE, wanted) is IMAGE[index]


def test_choose_missing_names_what_there_is() -> None:
    with pytest.raises(InputError) as e:
        platforms.choose(IMAGE, "linux/s390x")
    assert "linux/arm64, linux/amd64/v3, linux/amd64, linux/arm/v7" in str(e.value)
    assert e.value.exit_code == 2


def test_choose_defaults_to_the_host_else_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platforms._platform, "machine", lambda: "x86_64")
    assert platforms.host_platform() == "linux/amd64"
    assert platforms.choose(IMAGE, None) is IMAGE[2]
    monkeypatch.setattr(platforms._platform, "machine", lambda: "aarch64")
    assert platforms.choose(IMAGE, None) is IMAGE[0]
    monkeypatch.setattr(platforms._platform, "machine", lambda: "riscv64")
    assert platforms.choose(IMAGE, None) is IMAGE[0]
    assert platforms.choose([IMAGE[3]], None) is IMAGE[3]


def test_single_platform_layout_links_blobs(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "blobs" / "sha256").mkdir(parents=True)
    (src / "index.json").write_text('{"schemaVersion": 2, "manifests": []}')
    dest = tmp_path / "dest"
    platforms.single_platform_layout(src, dest, IMAGE[3])
    index = json.loads((dest / "index.json").read_text())
    assert index["manifests"] == [{"mediaType": MANIFEST, "digest": IMAGE[3].digest,
                                   "size": 104, "platform": {"architecture": "arm",
                                                              "os": "linux", "variant": "v7"}}]
    assert (dest / "blobs").resolve() == (src / "blobs").resolve()
    assert json.loads((dest / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    assert (src / "index.json").read_text() == '{"schemaVersion": 2, "manifests": []}'
    OciLayout(dest)  # a layout servelab's reader accepts
