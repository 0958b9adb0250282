"""What a private containerd (:mod:`servelab.node.containerd`) could leave on the host, to
compare before and after a run, a failure, Ctrl-C or a kill."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from servelab.node.containerd import PREFIX, temp_parent


def _cmdline(pid: str) -> str:
    try:
        return (Path("/proc") / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def host_state(marker: str = PREFIX) -> dict[str, Any]:
    """What a private containerd (and its pulls) could leave behind: processes naming an
    instance dir (containerd, unshare, ctr, shims), mounts naming one, the instance dirs in the
    temp dir, the top of /run/containerd (its ``s/`` holds the engine's shim sockets, which
    other containers change), all of /opt/containerd and of /var/lib/soci-snapshotter-grpc.
    *marker*: what names an instance dir of interest (a run id prefix after PREFIX keeps other
    runs on the machine out of it)."""
    procs = sorted(
        f"{d.name} {cmd}" for d in Path("/proc").iterdir()
        if d.name.isdigit() and d.name != str(os.getpid())
        for cmd in [_cmdline(d.name)]
        if marker in cmd)
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET,SOURCE,OPTIONS"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return {
        "processes": procs,
        "mounts": sorted(m for m in mounts if marker in m),
        "temp_dirs": sorted(p.name for p in temp_parent().glob(marker + "*")),
        "run_containerd": _listing(Path("/run/containerd"), deep=False),
        "opt_containerd": _listing(Path("/opt/containerd"), deep=True),
        # the snapshotter's default root: a lazy instance bind-mounts its own dir over it in
        # its private mount namespace, so the host's never changes
        "soci_root": _listing(Path("/var/lib/soci-snapshotter-grpc"), deep=True),
    }


def _listing(d: Path, *, deep: bool) -> list[str]:
    if not d.exists():
        return []
    found = d.rglob("*") if deep else d.iterdir()
    return sorted(str(p.relative_to(d)) for p in found)
