"""Fixture images for the scan tests: a Debian 12 rootfs with dpkg and Python package metadata.

The *control* image is vulnerable to every advisory of ``trivydb.FIXTURE_ADVISORIES`` it can
be (openssl, zlib1g, requests) and holds a GitHub token; the *treatment* has the fixed
versions, no token, and a new vulnerable package (urllib3). What Trivy must find in each:
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from servelab import proc

DATA = Path(__file__).resolve().parents[1] / "data" / "scan"
RUN_LABEL = "servelab.run-id"
EPOCH = "1700000000"

OS_RELEASE = """\
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
"""


@dataclass(frozen=True)
class ImageSpec:
    name: str
    #: dpkg packages: (binary name, source name, version)
    debs: tuple[tuple[str, str, str], ...]
    #: Python distributions: name -> version
    wheels: dict[str, str] = field(default_factory=dict)
    secret: bool = False
    #: what the scan must report: vulnerability id -> severity (plus secret rule ids)
    expect: dict[str, str] = field(default_factory=dict)


CONTROL = ImageSpec(
    name="control",
    debs=(("openssl", "openssl", "3.0.11-1~deb12u2"), ("zlib1g", "zlib", "1:1.2.13.dfsg-1")),
    wheels={"requests": "2.31.0", "idna": "3.7"},
    secret=True,
    expect={"CVE-2099-1001": "HIGH", "CVE-2099-1002": "MEDIUM", "CVE-2099-1003": "LOW",
            "CVE-2099-2001": "CRITICAL", "github-pat": "CRITICAL"},
)
TREATMENT = ImageSpec(
    name="treatment",
    debs=(("openssl", "openssl", "3.0.13-1~deb12u1"),
          ("zlib1g", "zlib", "1:1.2.13.dfsg-1+deb12u1")),
    wheels={"requests": "2.32.3", "idna": "3.7", "urllib3": "2.2.1"},
    expect={"CVE-2099-1002": "MEDIUM", "CVE-2099-2002": "MEDIUM"},
)


def fake_github_token() -> str:
    """A string Trivy's github-pat rule matches (made at run time, never committed)."""
    return "ghp_" + "x7Kq9" * 7 + "Z"


def _dpkg_status(debs: tuple[tuple[str, str, str], ...]) -> str:
    entries = []
    for name, source, version in debs:
        entries.append(
            f"Package: {name}\nStatus: install ok installed\nPriority: optional\n"
            f"Section: libs\nInstalled-Size: 100\nMaintainer: fixture <fixture@invalid>\n"
            f"Architecture: amd64\nSource: {source}\nVersion: {version}\n"
            f"Description: servelab scan fixture\n fixture package\n"
        )
    return "\n".join(entries) + "\n"


def write_rootfs(spec: ImageSpec, root: Path) -> None:
    """Write the image's files (os-release, dpkg status, dist-info, maybe a secret)."""
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release").write_text(OS_RELEASE)
    (root / "etc" / "debian_version").write_text("12.5\n")
    dpkg = root / "var" / "lib" / "dpkg"
    dpkg.mkdir(parents=True, exist_ok=True)
    (dpkg / "status").write_text(_dpkg_status(spec.debs))
    site = root / "usr" / "local" / "lib" / "python3.11" / "site-packages"
    for name, version in spec.wheels.items():
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            "Summary: servelab scan fixture\nLicense: Apache-2.0\n"
        )
    if spec.secret:
        (root / "app").mkdir(exist_ok=True)
        (root / "app" / "settings.env").write_text(f"GITHUB_TOKEN={fake_github_token()}\n")


def _buildx_oci(ctx: Path, dest: Path, run_id: str, platforms: list[str] | None = None) -> Path:
    """buildx *ctx* into the OCI archive *dest* (reproducible timestamps, no attestations)."""
    plat = ["--platform", ",".join(platforms)] if platforms else []
    proc.run(
        ["docker", "buildx", "build", "--network", "none", "--provenance=false", *plat,
         "--label", f"{RUN_LABEL}={run_id}",
         "--output", f"type=oci,dest={dest},rewrite-timestamp=true", str(ctx)],
        env={"SOURCE_DATE_EPOCH": EPOCH, "BUILDX_NO_DEFAULT_ATTESTATIONS": "1"},
        timeout=300,
    )
    return dest


def build_oci(spec: ImageSpec, workdir: Path, run_id: str) -> Path:
    """Build *spec* FROM scratch with buildx into an OCI archive (reproducible timestamps)."""
    ctx = workdir / f"{spec.name}-ctx"
    write_rootfs(spec, ctx / "rootfs")
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY rootfs/ /\n")
    return _buildx_oci(ctx, workdir / f"{spec.name}.tar", run_id)


#: the multi-platform fixture: which image's files each platform carries
MULTI = {"linux/amd64": CONTROL, "linux/arm64": TREATMENT}


def build_multiplatform_oci(workdir: Path, run_id: str) -> Path:
    """One image for linux/amd64 and linux/arm64 (FROM scratch, COPY only: no emulation
    needed) whose platforms hold different packages (see MULTI), as an OCI archive."""
    ctx = workdir / "multi-ctx"
    for plat, spec in MULTI.items():
        write_rootfs(spec, ctx / f"rootfs-{plat.split('/')[1]}")
    (ctx / "Dockerfile").write_text("FROM scratch\nARG TARGETARCH\nCOPY rootfs-${TARGETARCH}/ /\n")
    return _buildx_oci(ctx, workdir / "multi.tar", run_id, list(MULTI))


def expected_ids(spec: ImageSpec) -> set[str]:
    return set(spec.expect)


def read_expect_header(path: Path) -> set[str]:
    """``# expect-suppressed: A, B`` in a policy fixture (or the JSON key of the same name)."""
    text = path.read_text()
    if path.suffix == ".json":
        return set(json.loads(text).get("servelab_expect_suppressed", []))
    for line in text.splitlines():
        if line.startswith("# expect-suppressed:"):
            return {w.strip() for w in line.split(":", 1)[1].split(",") if w.strip()}
    raise AssertionError(f"{path} has no '# expect-suppressed:' line")



@dataclass(frozen=True)
class Image:
    """A built fixture image: its OCI archive, the unpacked layout and its digest."""

    spec: ImageSpec
    archive: Path
    layout: Path
    digest: str


def minimal_layout(path: Path) -> Path:
    """A sound one-layer OCI layout (a file or two, no packages): its blobs, sizes and
    diff_id are true, so scan's verified read passes and Trivy (or a stand-in) is reached."""
    import gzip
    import hashlib
    import io
    import tarfile

    blobs = path / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)

    def put(data: bytes) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("app/main.py")
        body = b"print('hi')\n"
        info.size = len(body)
        tf.addfile(info, io.BytesIO(body))
    raw = buf.getvalue()
    layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
             **put(gzip.compress(raw, mtime=0))}
    config = {"architecture": "amd64", "os": "linux", "config": {},
              "rootfs": {"type": "layers",
                         "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}}
    cfg = {"mediaType": "application/vnd.oci.image.config.v1+json",
           **put(json.dumps(config).encode())}
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": cfg, "layers": [layer]}).encode()
    entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json", **put(manifest)}
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
    return path


def fake_trivy(path: Path, body: str) -> Path:
    """An executable standing in for Trivy (used through SERVELAB_TRIVY)."""
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def scan_cli_argv() -> list[str]:
    """How to start ``servelab scan`` in a subprocess (before and after it is registered)."""
    from servelab import cli

    if any(name == "scan" for name, _, _ in cli.COMMANDS):
        return [sys.executable, "-m", "servelab", "scan"]
    return [sys.executable, "-c", _RUNNER]


_RUNNER = """
import argparse, sys
from servelab.commands import scan
from servelab.errors import ServelabError
p = argparse.ArgumentParser(prog="servelab scan")
scan.configure(p)
args = p.parse_args(sys.argv[1:])
try:
    sys.exit(scan.run(args))
except ServelabError as e:
    print(f"servelab scan: {e}", file=sys.stderr)
    sys.exit(int(e.exit_code))
"""


def run_cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*scan_cli_argv(), *argv], capture_output=True, text=True,
                          timeout=timeout, check=False)
