"""Build a Trivy vulnerability DB (schema 2) from fixture advisories, offline.

Trivy reads ``<cache-dir>/db/trivy.db`` (a bbolt file) and ``<cache-dir>/db/metadata.json``.
The buckets it needs for a finding are::

    "<source>"      -> "<package>" -> "<vuln id>" -> advisory JSON
    "vulnerability" -> "<vuln id>"                -> details JSON (Title, Severity, ...)
    "data-source"   -> "<source>"                 -> {"ID", "Name", "URL"}

where ``<source>`` is ``"debian 12"`` for Debian packages and
``"pip::GitHub Security Advisory pip"`` for Python packages (found by running Trivy 0.76 on
``*.dist-info`` metadata). PyPI ``boltdb`` writes the file but leaves both meta pages'
checksums at 0, which bbolt rejects: :func:`fix_meta_checksums` sets each to FNV-1a 64 of the
meta fields before it.

Usage::

    write_db(cache_dir, FIXTURE_ADVISORIES)              # fresh DB, updated now
    write_db(cache_dir, FIXTURE_ADVISORIES, updated_at=datetime(2020, 1, 1, tzinfo=UTC))
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import tarfile
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from boltdb import BoltDB

DEBIAN_12 = "debian 12"
PIP = "pip::GitHub Security Advisory pip"

#: data-source bucket entries: which feed a source stands for (its ID keys VendorSeverity)
DATA_SOURCES: dict[str, dict[str, str]] = {
    DEBIAN_12: {
        "ID": "debian",
        "Name": "Debian Security Tracker",
        "URL": "https://salsa.debian.org/security-tracker-team/security-tracker",
    },
    PIP: {
        "ID": "ghsa",
        "Name": "GitHub Security Advisory pip",
        "URL": "https://github.com/advisories?query=type%3Areviewed+ecosystem%3Apip",
    },
}

#: Trivy's severity numbers in VendorSeverity
SEVERITY_NUMBER = {"UNKNOWN": 0, "LOW": 1, "MEDIUM": 2, "HIGH": 3, "CRITICAL": 4}

BOLT_MAGIC = 0xED0CDAED
PAGE_HEADER = 16  # id u64, flags u16, count u16, overflow u32
META_FIELDS = 56  # magic .. txid; the checksum (u64) follows


@dataclass(frozen=True)
class Advisory:
    """One fixture advisory: *package* from *source* is affected by *vuln_id*."""

    vuln_id: str
    package: str
    source: str
    severity: str
    title: str
    #: OS sources: the first fixed version ("" = no fix yet)
    fixed_version: str = ""
    #: language sources: version ranges, e.g. ("<2.32.0",) and ("2.32.0",)
    vulnerable_versions: tuple[str, ...] = ()
    patched_versions: tuple[str, ...] = ()

    def advisory_json(self) -> dict[str, Any]:
        if self.source.startswith("pip::"):
            out: dict[str, Any] = {"VulnerableVersions": list(self.vulnerable_versions)}
            if self.patched_versions:
                out["PatchedVersions"] = list(self.patched_versions)
            return out
        return {"FixedVersion": self.fixed_version} if self.fixed_version else {}

    def details_json(self) -> dict[str, Any]:
        vendor = DATA_SOURCES[self.source]["ID"]
        return {
            "Title": self.title,
            "Description": f"fixture advisory {self.vuln_id} for {self.package}",
            "Severity": self.severity,
            "VendorSeverity": {vendor: SEVERITY_NUMBER[self.severity]},
            "References": [f"https://servelab.invalid/advisories/{self.vuln_id}"],
        }


#: The advisories servelab's scan tests and bench use (IDs in a range no real CVE uses).
FIXTURE_ADVISORIES: tuple[Advisory, ...] = (
    Advisory("CVE-2099-1001", "openssl", DEBIAN_12, "HIGH", "openssl: fixture overflow",
             fixed_version="3.0.13-1~deb12u1"),
    Advisory("CVE-2099-1002", "openssl", DEBIAN_12, "MEDIUM", "openssl: fixture timing leak"),
    Advisory("CVE-2099-1003", "zlib", DEBIAN_12, "LOW", "zlib: fixture inflate bug",
             fixed_version="1:1.2.13.dfsg-1+deb12u1"),
    Advisory("CVE-2099-2001", "requests", PIP, "CRITICAL", "requests: fixture header leak",
             vulnerable_versions=("<2.32.0",), patched_versions=("2.32.0",)),
    Advisory("CVE-2099-2002", "urllib3", PIP, "MEDIUM", "urllib3: fixture redirect",
             vulnerable_versions=("<2.2.2",), patched_versions=("2.2.2",)),
)


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bit (what bbolt checksums its meta pages with)."""
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def fix_meta_checksums(path: Path) -> None:
    """Set both meta pages' checksum to FNV-1a 64 of the meta fields before it."""
    data = bytearray(path.read_bytes())
    magic, _version, page_size = struct.unpack_from("<III", data, PAGE_HEADER)
    if magic != BOLT_MAGIC:
        raise ValueError(f"{path} is not a bbolt file (magic {magic:#x})")
    for page in range(2):
        start = page * page_size + PAGE_HEADER
        digest = fnv1a64(bytes(data[start : start + META_FIELDS]))
        struct.pack_into("<Q", data, start + META_FIELDS, digest)
    path.write_bytes(bytes(data))


def meta_checksums_ok(path: Path) -> bool:
    """Whether both meta pages carry a correct checksum."""
    data = path.read_bytes()
    page_size = struct.unpack_from("<I", data, PAGE_HEADER + 8)[0]
    for page in range(2):
        start = page * page_size + PAGE_HEADER
        stored = struct.unpack_from("<Q", data, start + META_FIELDS)[0]
        if stored != fnv1a64(data[start : start + META_FIELDS]):
            return False
    return True


class _Bolt(BoltDB):  # type: ignore[misc]
    """boltdb's BoltDB closes its descriptor again in __del__; close once."""

    _closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            super().close()

    def __del__(self) -> None:
        self.close()


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True).encode()


def _write_bolt(path: Path, advisories: list[Advisory]) -> None:
    db = _Bolt(str(path))
    try:
        with db.update() as tx:
            by_source: dict[str, dict[str, list[Advisory]]] = {}
            for adv in advisories:
                by_source.setdefault(adv.source, {}).setdefault(adv.package, []).append(adv)
            for source, packages in sorted(by_source.items()):
                bucket = tx.create_bucket(source.encode())
                for package, advs in sorted(packages.items()):
                    pkg_bucket = bucket.create_bucket(package.encode())
                    for adv in advs:
                        pkg_bucket.put(adv.vuln_id.encode(), _dump(adv.advisory_json()))
            vulns = tx.create_bucket(b"vulnerability")
            for adv in advisories:
                vulns.put(adv.vuln_id.encode(), _dump(adv.details_json()))
            sources = tx.create_bucket(b"data-source")
            for source in sorted(by_source):
                sources.put(source.encode(), _dump(DATA_SOURCES[source]))
    finally:
        db.close()
    fix_meta_checksums(path)


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_metadata(
    cache_dir: Path,
    *,
    updated_at: datetime | None = None,
    next_update: datetime | None = None,
    downloaded_at: datetime | None = None,
    version: int = 2,
) -> Path:
    """Write ``<cache_dir>/db/metadata.json`` (UpdatedAt defaults to now)."""
    updated = updated_at or datetime.now(UTC)
    meta = {
        "Version": version,
        "NextUpdate": _iso(next_update or updated + timedelta(days=1)),
        "UpdatedAt": _iso(updated),
        "DownloadedAt": _iso(downloaded_at or updated),
    }
    path = cache_dir / "db" / "metadata.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta), encoding="utf-8")
    return path


def write_db(
    cache_dir: Path,
    advisories: Iterable[Advisory] = FIXTURE_ADVISORIES,
    *,
    updated_at: datetime | None = None,
    next_update: datetime | None = None,
) -> Path:
    """Write a Trivy DB holding *advisories* under *cache_dir*; returns the trivy.db path."""
    db_dir = cache_dir / "db"
    db_dir.mkdir(parents=True, exist_ok=True)
    path = db_dir / "trivy.db"
    if path.exists():
        path.unlink()
    _write_bolt(path, list(advisories))
    write_metadata(cache_dir, updated_at=updated_at, next_update=next_update)
    return path


def read_db(path: Path) -> dict[str, dict[str, Any]]:
    """The DB's top-level buckets as nested dicts (values JSON-decoded), for checks."""
    db = _Bolt(str(path), readonly=True)
    try:
        with db.view() as tx:
            root = tx.bucket()
            return {k.decode(): _read_bucket(root.bucket(k)) for k, _ in root}
    finally:
        db.close()


def _read_bucket(bucket: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in bucket:
        if value is None:
            out[key.decode()] = _read_bucket(bucket.bucket(key))
        else:
            out[key.decode()] = json.loads(value)
    return out


def db_artifact(cache_dir: Path) -> bytes:
    """``db.tar.gz`` as Trivy downloads it: trivy.db and metadata.json at the top level."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in ("trivy.db", "metadata.json"):
            tf.add(cache_dir / "db" / name, arcname=name)
    return buf.getvalue()


def _push_blob(registry: str, repository: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = urllib.request.Request(
        f"http://{registry}/v2/{repository}/blobs/uploads/", method="POST"
    )
    with urllib.request.urlopen(start, timeout=30) as r:
        location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    sep = "&" if "?" in location else "?"
    put = urllib.request.Request(
        f"{location}{sep}digest={digest}", data=data, method="PUT",
        headers={"Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(put, timeout=30) as r:
        r.read()
    return digest


def push_db(registry: str, repository: str, cache_dir: Path, tag: str = "2") -> str:
    """Push the DB in *cache_dir* to a loopback registry as Trivy's OCI artifact."""
    if not registry.startswith(("127.0.0.1:", "localhost:")):
        raise ValueError(f"tests push only to a loopback registry, not {registry}")
    layer = db_artifact(cache_dir)
    config = b"{}"
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.aquasec.trivy.config.v1+json",
                   "digest": _push_blob(registry, repository, config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.aquasec.trivy.db.layer.v1.tar+gzip",
                    "digest": _push_blob(registry, repository, layer), "size": len(layer),
                    "annotations": {"org.opencontainers.image.title": "db.tar.gz"}}],
    }
    req = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{tag}",
        data=json.dumps(manifest).encode(), method="PUT",
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return str(r.headers.get("Docker-Content-Digest", ""))
