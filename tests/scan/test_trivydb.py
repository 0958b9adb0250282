"""The Trivy DB builder: bbolt checksums, contents, and the real Trivy reading it."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest
import scanfixtures

import trivydb
from servelab import proc
from servelab.scan import trivy

QUIET = ["--disable-telemetry", "--skip-version-check", "--skip-check-update"]
OFFLINE = ["--skip-db-update", "--skip-java-db-update", "--offline-scan"]


def test_fnv1a64_known_vectors() -> None:
    # Reference values of FNV-1a 64 (Fowler/Noll/Vo test suite).
    assert trivydb.fnv1a64(b"") == 0xCBF29CE484222325
    assert trivydb.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert trivydb.fnv1a64(b"foobar") == 0x85944171F73967E8


def test_checksums_fixed_and_servelab_agrees(tmp_path: Path) -> None:
    path = trivydb.write_db(tmp_path)
    assert trivydb.meta_checksums_ok(path)
    trivy.check_bolt_file(path)  # servelab's own check accepts it
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 16 + 56, 0)  # what boltdb leaves behind
    path.write_bytes(bytes(data))
    assert not trivydb.meta_checksums_ok(path)


def test_contents_round_trip(tmp_path: Path) -> None:
    path = trivydb.write_db(tmp_path)
    db = trivydb.read_db(path)
    assert set(db) == {"data-source", "vulnerability", trivydb.DEBIAN_12, trivydb.PIP}
    assert db[trivydb.DEBIAN_12]["openssl"]["CVE-2099-1001"] == {
        "FixedVersion": "3.0.13-1~deb12u1"
    }
    assert db[trivydb.DEBIAN_12]["openssl"]["CVE-2099-1002"] == {}  # no fix yet
    assert db[trivydb.PIP]["requests"]["CVE-2099-2001"]["VulnerableVersions"] == ["<2.32.0"]
    assert db["vulnerability"]["CVE-2099-2001"]["VendorSeverity"] == {"ghsa": 4}
    assert db["data-source"][trivydb.PIP]["ID"] == "ghsa"


def test_metadata(tmp_path: Path) -> None:
    trivydb.write_db(tmp_path)
    meta = json.loads((tmp_path / "db" / "metadata.json").read_text())
    assert meta["Version"] == 2
    info = trivy.read_db_info(tmp_path)
    assert info.updated_at == meta["UpdatedAt"]


@pytest.mark.trivy
def test_real_trivy_reads_it(tmp_path: Path, trivy_bin: str) -> None:
    trivydb.write_db(tmp_path / "cache")
    out = proc.run(["trivy", "version", "--cache-dir", str(tmp_path / "cache"),
                    "--format", "json"])
    meta = json.loads(out.stdout)["VulnerabilityDB"]
    assert meta["Version"] == 2


@pytest.mark.trivy
def test_real_trivy_rejects_zero_checksums(tmp_path: Path, trivy_bin: str) -> None:
    path = trivydb.write_db(tmp_path / "cache")
    data = bytearray(path.read_bytes())
    page = struct.unpack_from("<I", data, 16 + 8)[0]
    for i in range(2):
        struct.pack_into("<Q", data, i * page + 16 + 56, 0)
    path.write_bytes(bytes(data))
    root = tmp_path / "root"
    scanfixtures.write_rootfs(scanfixtures.CONTROL, root)
    done = subprocess.run(
        [trivy_bin, "rootfs", *QUIET, *OFFLINE, "--cache-dir", str(tmp_path / "cache"),
         "--format", "json", str(root)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode != 0
    assert "checksum" in done.stderr or "invalid" in done.stderr


@pytest.mark.trivy
def test_real_trivy_finds_the_fixture_advisories(tmp_path: Path, trivy_bin: str) -> None:
    """Debian (dpkg status) and pip (dist-info) findings come from the built DB."""
    trivydb.write_db(tmp_path / "cache")
    root = tmp_path / "root"
    scanfixtures.write_rootfs(scanfixtures.CONTROL, root)
    out = proc.run([
        "trivy", "rootfs", *QUIET, *OFFLINE, "--cache-dir", str(tmp_path / "cache"),
        "--scanners", "vuln", "--format", "json", str(root),
    ])
    report = trivy.parse_report(out.stdout)
    found = {f.id: f.severity for f in report.findings}
    want = {k: v for k, v in scanfixtures.CONTROL.expect.items() if k.startswith("CVE")}
    assert found == want
    pkgs = {f.id: f.package for f in report.findings}
    assert pkgs["CVE-2099-1003"] == "zlib1g"  # looked up by its source package, zlib
