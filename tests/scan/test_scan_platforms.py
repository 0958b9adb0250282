"""A multi-platform image: one platform scanned, named, and its own digest (real Trivy).

The fixture image carries the control's packages on linux/amd64 and the treatment's on
linux/arm64 (scanfixtures.MULTI), so the findings say which platform Trivy really read.
"""

from __future__ import annotations

import secrets
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest
import scanfixtures
from scanfixtures import MULTI, run_cli

from ocitest import archive_platforms
from servelab.errors import InputError
from servelab.image import layout as image_layout
from servelab.image import platforms
from servelab.scan import stage as scan
from servelab.spec import ScanPolicy

pytestmark = [pytest.mark.docker, pytest.mark.trivy]


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory, docker_client: Any) -> tuple[Path, Path]:
    """The multi-platform image as an OCI archive and as an unpacked layout directory."""
    work = tmp_path_factory.mktemp("multi")
    archive = scanfixtures.build_multiplatform_oci(work, "test-multi-" + secrets.token_hex(3))
    layout = work / "layout"
    with tarfile.open(archive) as tf:
        tf.extractall(layout, filter="data")
    return archive, layout


def _scanner(cache: Path, run_id: str = "scan") -> scan.Scanner:
    return scan.Scanner(ScanPolicy(), cache_dir=cache, offline=True, run_id=run_id)


def _temps(run_id: str) -> list[Path]:
    """Temporary directories of this run id (other processes may have their own)."""
    return list(Path(tempfile.gettempdir()).glob(f"servelab-{run_id}-*"))


def test_fixture_has_both_platforms(multi: tuple[Path, Path]) -> None:
    assert set(archive_platforms(multi[0])) == set(MULTI)


@pytest.mark.parametrize("platform", [None, *MULTI])
@pytest.mark.parametrize("kind", ["archive", "layout"])
def test_each_platform_scanned_for_itself(multi: tuple[Path, Path], trivy_cache: Path,
                                          tmp_path: Path, platform: str | None,
                                          kind: str) -> None:
    archive, layout = multi
    target = archive if kind == "archive" else layout
    index_before = (layout / "index.json").read_bytes()
    run_id = "test-platforms-" + secrets.token_hex(3)
    res = _scanner(trivy_cache, run_id).scan(target, out_dir=tmp_path, platform=platform)
    scanned = platform or platforms.host_platform()
    manifest, config = archive_platforms(archive)[scanned]
    assert res.platform == scanned
    assert sorted(res.platforms) == sorted(MULTI)
    assert res.digest == manifest
    assert res.artifact.get("image_id") == config  # the config Trivy read is that platform's
    assert {f.id: f.severity for f in res.findings} == MULTI[scanned].expect
    other = next(p for p in MULTI if p != scanned)
    assert any(f"scanned {scanned} only" in n and other in n for n in res.notes), res.notes
    assert (layout / "index.json").read_bytes() == index_before  # the user's layout untouched
    assert _temps(run_id) == []


def test_two_platforms_are_two_scans(multi: tuple[Path, Path], trivy_cache: Path,
                                     tmp_path: Path) -> None:
    scanner = _scanner(trivy_cache)
    a = scanner.scan(multi[0], out_dir=tmp_path / "a", platform="linux/amd64")
    b = scanner.scan(multi[0], out_dir=tmp_path / "b", platform="linux/arm64")
    c = scanner.scan(multi[0], out_dir=tmp_path / "c", platform="linux/arm64")
    assert a.digest != b.digest and not a.shared and not b.shared
    assert c.shared and c.digest == b.digest


def test_cli_names_the_platform_and_refuses_a_missing_one(multi: tuple[Path, Path],
                                                          trivy_cache: Path) -> None:
    res = run_cli(str(multi[0]), "--offline", "--cache-dir", str(trivy_cache),
                  "--fail-on", "CRITICAL", "--platform", "linux/arm64")
    assert res.returncode == 0, res.stderr  # the treatment's packages: MEDIUM only
    manifest = archive_platforms(multi[0])["linux/arm64"][0]
    assert f"({manifest}, linux/arm64)" in res.stdout
    res = run_cli(str(multi[0]), "--offline", "--cache-dir", str(trivy_cache),
                  "--platform", "linux/s390x")
    assert res.returncode == 2
    assert "no platform linux/s390x" in res.stderr and "linux/arm64" in res.stderr
    assert "Traceback" not in res.stderr


def test_single_platform_image_refuses_another(images: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no platform linux/s390x"):
        image_layout.target_digest(images["control"].archive, "linux/s390x")
    host = platforms.host_platform()  # the fixtures are built for this machine
    assert image_layout.target_digest(images["control"].archive, host) == images["control"].digest
