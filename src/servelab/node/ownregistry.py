"""A private registry: a registry of servelab's own for one run's cold and lazy pulls, gone
with every blob it stored when the run ends.

``--cold-start-registry private`` asks for it. A registry someone else runs keeps the blobs a
run pushed until its garbage collection, which must not run while it serves (it races with
other clients' uploads, and a registry's blob cache still answers "exists" for a blob deleted
under it). For a 9 GB image that is 4-5 GB left behind per run. A registry the run owns has
none of that: nobody else writes to it, and its storage is removed with it.

* the binary is the registry of the CNCF distribution project: Debian's ``docker-registry``
  (``registry`` where it is installed under that name);
* its storage, configs, access logs and (for lazy pulls) its TLS certificates live in a fresh
  temp dir (``servelab-reg-*`` under TMPDIR); the owner file names this process, so a run
  that was killed leaves a dir the next run's :func:`sweep` removes, registry process and all;
* it serves plain HTTP on a free loopback port (the push, the cold pulls, the engine's
  warm-base pull: Docker and containerd reach 127.0.0.0/8 over HTTP) and, when a lazy pull is
  measured, the same storage over TLS on a second port, with a CA made for this run whose
  certificate names 127.0.0.1 and :data:`~servelab.node.soci.LOOPBACK_ALIAS` (soci-snapshotter
  reaches a loopback registry through that name, :mod:`servelab.node.soci`);
* each serving process writes its own access log, which the cold and lazy pulls check;
* no blob cache (two processes share the storage), deletes enabled, upload purging off.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from servelab import proc
from servelab.cleanup import Started
from servelab.errors import CapabilityError, CommandError, ToolMissingError
from servelab.image.oci import Descriptor, OciArchive
from servelab.node.coldpull import blob_file
from servelab.node.containerd import (
    OWNER_FILE,
    _kill_all,
    _pids_using,
    left_by_killed_runs,
    log_tail,
)
from servelab.node.soci import LOOPBACK_ALIAS

#: what ``--cold-start-registry`` takes to ask for a private registry
PRIVATE = "private"
PREFIX = "servelab-reg-"
#: the registry's binary names, tried in order
BINARIES = ("docker-registry", "registry")
INSTALL_HINT = proc.INSTALL_HINTS[BINARIES[0]]
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
#: a port taken between choosing it and the registry binding it: tried again on another
ATTEMPTS = 3
#: how long the run's certificates are valid (a run longer than this fails its lazy pulls)
CERT_DAYS = 7


def registry_binary() -> str:
    """The registry's binary, or ToolMissingError (exit 3) with how to install it."""
    for name in BINARIES:
        if proc.which(name) is not None:
            return name
    raise ToolMissingError(BINARIES[0], hint=INSTALL_HINT)


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_text(data: Path, addr: str, tls: tuple[Path, Path] | None = None) -> str:
    """The registry's config (JSON, which its YAML reader takes) serving *data* on *addr*."""
    http: dict[str, Any] = {"addr": addr}
    if tls is not None:
        http["tls"] = {"certificate": str(tls[0]), "key": str(tls[1])}
    doc = {"version": 0.1,
           "log": {"level": "warn", "accesslog": {"disabled": False}},
           "storage": {"filesystem": {"rootdirectory": str(data)},
                       "delete": {"enabled": True},
                       "maintenance": {"uploadpurging": {"enabled": False}}},
           "http": http}
    return json.dumps(doc, indent=2) + "\n"


def make_certs(d: Path, ip: str = "127.0.0.1") -> tuple[Path, Path, Path]:
    """A CA and a server certificate for *ip* and LOOPBACK_ALIAS, made with ``openssl`` in
    *d*: (ca.pem, cert.pem, key.pem)."""
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca, ca_key = d / "ca.pem", d / "ca-key.pem"
    cert, key, csr, ext = d / "cert.pem", d / "key.pem", d / "cert.csr", d / "ext.cnf"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ext.write_text(f"subjectAltName=IP:{ip},DNS:{LOOPBACK_ALIAS}\nbasicConstraints=CA:FALSE\n"
                   "extendedKeyUsage=serverAuth\n", encoding="ascii")
    hint = proc.INSTALL_HINTS["openssl"]
    steps = [
        ["openssl", "req", "-x509", *ec, "-days", str(CERT_DAYS),
         "-subj", "/CN=servelab private registry CA", "-keyout", str(ca_key), "-out", str(ca)],
        ["openssl", "req", *ec, "-subj", f"/CN={ip}", "-keyout", str(key), "-out", str(csr)],
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-days", str(CERT_DAYS), "-extfile", str(ext), "-out", str(cert)],
    ]
    for argv in steps:  # no openssl: ToolMissingError (exit 3) with the hint, from proc
        proc.run(argv, timeout=60, hint=hint)
    return ca, cert, key


def answers(addr: str, ca: Path | None = None, timeout: float = 2.0) -> bool:
    """Whether the registry on *addr* answers ``GET /v2/`` (over TLS when *ca* is given),
    never through a proxy."""
    handlers: list[Any] = [urllib.request.ProxyHandler({})]
    if ca is not None:
        handlers.append(urllib.request.HTTPSHandler(
            context=ssl.create_default_context(cafile=str(ca))))
    url = f"{'https' if ca is not None else 'http'}://{addr}/v2/"
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout) as r:
            return int(r.status) == 200
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False


class PrivateRegistry(Started):
    """One registry of servelab's own, in a temp dir, for one run::

        with PrivateRegistry(run_id, tls=True) as reg:
            reg.plain, reg.secure      # "127.0.0.1:40123", "127.0.0.1:40125"
            reg.data, reg.log, reg.tls_log, reg.ca
        # stopped, and its dir (storage included) removed
    """

    def __init__(self, run_id: str, *, tls: bool, parent: Path | None = None) -> None:
        safe = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")[:40] or "run"
        self.work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{safe}-", dir=parent))
        self.data = self.work / "data"
        self.log = self.work / "registry.log"
        self.tls_log: Path | None = self.work / "registry-tls.log" if tls else None
        self.ca: Path | None = None
        #: the plain and the TLS address, once started
        self.plain = ""
        self.secure: str | None = None
        self._children: list[subprocess.Popen[str]] = []

    def start(self) -> None:
        from servelab import cleanup

        binary = registry_binary()
        (self.work / OWNER_FILE).write_text(json.dumps(
            {"pid": os.getpid(), "owner": cleanup.owner_id()}), encoding="utf-8")
        (self.data / "docker" / "registry" / "v2" / "blobs").mkdir(parents=True)
        self.log.touch()
        if self.tls_log is not None:
            self.tls_log.touch()
        self.plain = self._serve(binary, "plain", self.log, None)
        if self.tls_log is not None:
            ca, cert, key = make_certs(self.work / "tls")
            self.ca = ca
            self.secure = self._serve(binary, "tls", self.tls_log, (cert, key))

    def _serve(self, binary: str, name: str, log: Path,
               tls: tuple[Path, Path] | None) -> str:
        """Start one serving process on a free port; its address once it answers."""
        for _ in range(ATTEMPTS):
            addr = f"127.0.0.1:{free_port()}"
            cfg = self.work / f"{name}.json"
            cfg.write_text(config_text(self.data, addr, tls), encoding="utf-8")
            with log.open("a", encoding="utf-8") as f:
                child = proc.start([binary, "serve", str(cfg)], stdin=subprocess.DEVNULL,
                                   stdout=f.fileno(), stderr=f.fileno(), new_session=True,
                                   hint=INSTALL_HINT)
            self._children.append(child)
            if self._wait(child, addr, self.ca if tls else None):
                return addr
            self._children.remove(child)
            _stop(child)
        raise CapabilityError(
            f"the private registry did not start ({name}): {log_tail(log)}",
            hint="run `servelab doctor`; or give --cold-start-registry HOST:PORT of a "
            "registry you run (docs/run.md, \"The cold-start registry\")")

    @staticmethod
    def _wait(child: subprocess.Popen[str], addr: str, ca: Path | None) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if child.poll() is not None:
                return False
            if answers(addr, ca):
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        """Stop the serving processes, then remove the dir: storage, logs and certificates."""
        children, self._children = self._children, []
        for child in children:
            _stop(child)
        _kill_all(_pids_using(self.work))
        shutil.rmtree(self.work, ignore_errors=True)


def _stop(child: subprocess.Popen[str]) -> None:
    if child.poll() is None:
        with contextlib.suppress(CommandError, OSError):
            proc.kill_group(child, grace=STOP_TIMEOUT_S)


def sweep(parent: Path | None = None) -> list[str]:
    """Remove the private registries killed runs left (their owner process gone): processes,
    then dirs; one message per registry removed."""
    notes = []
    for d in left_by_killed_runs(parent or Path(tempfile.gettempdir()), PREFIX):
        _kill_all(_pids_using(d))
        shutil.rmtree(d, ignore_errors=True)
        notes.append(f"removed a private registry left by a killed run: {d}")
    return notes


#: blobs under this size stay in the registry while it idles (configs, SOCI's indexes)
PARK_MIN_BYTES = 1 << 20


class Parking:
    """The run's own registry without its layer blobs between the repeats that pull them.

    Between two repeats' pulls the registry serves nothing, but its layer blobs (C, the
    compressed image) would sit beside the next build and scan, which need U + C of their own
    (docs/run.md, "Disk"). :meth:`park` removes an image's layer files from the storage after
    its pulls; :meth:`restore` puts them back before the next pull, copied from the build's
    archive and checked against their digest as they are copied (written beside, then
    renamed: a copy cut short is never served). What was pushed stays pushed: the
    repositories' links and manifests are kept, and the registry (no blob cache) serves the
    files again once they are back. Only a registry this run owns, whose storage nobody else
    reads, is parked."""

    def __init__(self, data: Path) -> None:
        self.data = data
        #: digest -> (size, the archive it can be copied back from)
        self.parked: dict[str, tuple[int, Path]] = {}
        #: bytes copied back so far
        self.bytes_restored = 0

    def park(self, layers: list[tuple[str, int]], archive: Path) -> int:
        """Remove the files of *layers* (digest, size) that *archive* holds; bytes freed."""
        freed = 0
        for digest, size in layers:
            f = blob_file(self.data, digest)
            if size < PARK_MIN_BYTES or not f.is_file():
                continue
            f.unlink()
            self.parked[digest] = (size, archive)
            freed += size
        return freed

    def restore(self, digests: frozenset[str] | set[str], source: Path | None = None) -> int:
        """Put back the parked blobs among *digests*, copied from *source* (an archive that
        holds them all) or else from the archive each was parked from; bytes written."""
        wrote = 0
        for digest in sorted(digests & self.parked.keys()):
            size, archive = self.parked[digest]
            f = blob_file(self.data, digest)
            if not f.is_file():  # else pushed again meanwhile
                _copy_blob(source or archive, digest, size, f)
                wrote += size
            del self.parked[digest]
        self.bytes_restored += wrote
        return wrote


def _copy_blob(archive: Path, digest: str, size: int, dest: Path) -> None:
    """Blob *digest* of *archive* into *dest*, verified while it streams, renamed when whole."""
    tmp = dest.with_name(".restoring")
    try:
        with OciArchive(archive) as src, \
                src.open_blob(Descriptor("application/octet-stream", digest, size)) as blob, \
                tmp.open("wb") as out:
            shutil.copyfileobj(blob, out, 1 << 20)
            out.flush()
            os.fdatasync(out.fileno())
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
