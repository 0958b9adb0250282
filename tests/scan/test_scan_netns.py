"""No stray traffic: an offline scan in a network namespace with only loopback succeeds and
calls connect() on nothing but unix sockets and loopback (traced with strace -f)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scanfixtures import Image, scan_cli_argv

pytestmark = [pytest.mark.docker, pytest.mark.trivy]

_CONNECT = re.compile(r"connect\(\d+, \{sa_family=(AF_\w+)(.*?)\}")
_LOOPBACK = re.compile(r'inet_addr\("127\.|inet_pton\(AF_INET6, "::1"|"::ffff:127\.')


def _needs_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("unshare -n needs root")
    for tool in ("unshare", "strace"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install strace util-linux)")


def _traced(log: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["unshare", "-n", "--", "strace", "-f", "-qq", "-e", "trace=connect,execve", "-o", str(log),
         *argv],
        capture_output=True, text=True, timeout=300, check=False,
    )


def stray_connects(log: Path) -> list[str]:
    """connect() calls to anything but a unix socket or loopback."""
    bad = []
    for line in log.read_text().splitlines():
        m = _CONNECT.search(line)
        if not m:
            continue
        family, rest = m.groups()
        if family == "AF_UNIX" or _LOOPBACK.search(rest):
            continue
        bad.append(line)
    return bad


def test_the_trace_sees_connects(tmp_path: Path) -> None:
    """The instrument works: a loopback connect() in the namespace is recorded."""
    _needs_tools()
    log = tmp_path / "trace"
    code = ("import socket\ntry:\n socket.create_connection(('127.0.0.1', 9), timeout=2)\n"
            "except OSError:\n pass")
    _traced(log, [sys.executable, "-c", code])
    text = log.read_text()
    assert 'inet_addr("127.0.0.1")' in text
    assert stray_connects(log) == []


def test_offline_scan_in_an_empty_netns(images: dict[str, Image], trivy_cache: Path,
                                        tmp_path: Path) -> None:
    _needs_tools()
    log = tmp_path / "trace"
    out = tmp_path / "result.json"
    done = _traced(log, [*scan_cli_argv(), str(images["control"].archive), "--offline",
                         "--cache-dir", str(trivy_cache), "--json", str(out),
                         "--sbom", str(tmp_path / "sbom.json")])
    assert done.returncode == 1, done.stderr  # the scan ran: the gate failed on findings
    assert "CVE-2099-1001" in done.stdout
    assert out.is_file() and (tmp_path / "sbom.json").is_file()
    execs = [ln for ln in log.read_text().splitlines() if "execve(" in ln and "trivy" in ln]
    assert len(execs) >= 2  # the scan and the SBOM conversion ran under the trace
    assert stray_connects(log) == []
