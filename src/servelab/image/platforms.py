"""Choosing one platform of a multi-platform OCI image, and a layout that holds only it.

Trivy reads an OCI layout's first image manifest and ignores ``--platform`` for ``--input``,
so to scan a chosen platform servelab hands it a layout whose ``index.json`` names only that
platform's manifest (the blobs are shared, never copied). Pure functions plus one writer.
"""

from __future__ import annotations

import json
import platform as _platform
from pathlib import Path

from servelab.errors import InputError
from servelab.image.oci import OCI_INDEX, PlatformManifest
from servelab.textio import write_file

#: ``uname -m`` -> the GOARCH name images use
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
         "armv7l": "arm", "armv6l": "arm", "i686": "386", "i386": "386",
         "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}


def host_platform() -> str:
    """``linux/<arch>`` of this machine: the platform the engine runs by default."""
    machine = _platform.machine().lower()
    return f"linux/{_ARCH.get(machine, machine)}"


def _matches(available: str, wanted: str) -> bool:
    """``linux/amd64`` matches ``linux/amd64`` and any variant of it (``linux/amd64/v3``)."""
    return available == wanted or (wanted.count("/") == 1 and available.startswith(wanted + "/"))


def choose(manifests: list[PlatformManifest], wanted: str | None) -> PlatformManifest:
    """The manifest for *wanted* (exact, else its first variant); by default the host's
    platform when the image has it, else the image's first platform."""
    names = ", ".join(m.platform for m in manifests)
    target = wanted or host_platform()
    exact = [m for m in manifests if m.platform == target]
    near = [m for m in manifests if _matches(m.platform, target)]
    if exact or near:
        return (exact or near)[0]
    if wanted:
        raise InputError(f"the image has no platform {wanted} (it has {names})",
                         hint=f"pass one of: {names}")
    return manifests[0]


def single_platform_layout(src: Path, dest: Path, chosen: PlatformManifest) -> None:
    """Make *dest* an OCI layout of *src* whose index names only *chosen*.

    When *dest* is *src* (an unpacked temporary copy) only index.json is rewritten; otherwise
    *dest* gets its own index.json and oci-layout and links to *src*'s blobs.
    """
    if dest.resolve() != src.resolve():
        dest.mkdir(parents=True, exist_ok=True)
        write_file(dest / "oci-layout", '{"imageLayoutVersion": "1.0.0"}', what="oci-layout")
        (dest / "blobs").symlink_to((src / "blobs").resolve(), target_is_directory=True)
    d = chosen.descriptor
    os_, _, rest = chosen.platform.partition("/")
    arch, _, variant = rest.partition("/")
    plat = {"architecture": arch, "os": os_, **({"variant": variant} if variant else {})}
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX,
             "manifests": [{"mediaType": d.media_type, "digest": d.digest, "size": d.size,
                            "platform": plat}]}
    write_file(dest / "index.json", json.dumps(index), what="the layout's index.json")
