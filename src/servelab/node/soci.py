"""A private containerd with SOCI's snapshotter attached: the node that pulls lazily.

:class:`SociContainerd` is a :class:`~servelab.node.containerd.PrivateContainerd` whose private
mount namespace (one ``unshare --mount --propagation private`` shell) also runs
``soci-snapshotter-grpc``, named to containerd as the proxy snapshotter ``soci``:

* the snapshotter's root, its socket, its metrics socket (unix) and its log live in the
  instance's temp dir; inside the namespace a small tmpfs covers ``/var/lib`` and the temp
  dir's ``soci/`` is bind-mounted on ``/var/lib/soci-snapshotter-grpc`` (the ``soci`` CLI has
  no root option and reads that path), so nothing of the host's is read or written there;
* background fetching is disabled: what the snapshotter fetches is what the server read (or
  the probe of a layer it mounts), nothing fetched ahead of need;
* the registry is given by :class:`LazyRegistry` (HTTPS; its CA, when not a public one, goes to
  the snapshotter and the CLI as ``SSL_CERT_FILE`` / ``--tlscacert``). soci-snapshotter 0.4.1
  talks plain HTTP to every loopback host, so a loopback registry is reached through a mirror
  name (:data:`LOOPBACK_ALIAS`) that a hosts file bind-mounted on ``/etc/hosts``, inside the
  namespace only, maps to 127.0.0.1: its certificate must name it (scripts/bootstrap.sh's test
  registry does);
* the ``soci`` CLI and any other command that must see the snapshots' FUSE mounts run in the
  namespace through ``nsenter -t <containerd pid> -m`` (:meth:`SociContainerd.ns`).

Stopping it (and :func:`~servelab.node.containerd.sweep` after a kill) kills every process that
names the temp dir, containerd and the snapshotter included: the namespace, its tmpfs, bind
mounts and FUSE mounts go with the last of them, and the dir is removed.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from servelab import proc
from servelab.errors import CapabilityError, InputError
from servelab.node.containerd import PrivateContainerd, config_text, unavailable

#: the name a loopback registry is reached by from the snapshotter (see the module's doc)
LOOPBACK_ALIAS = "servelab-lazy-registry.test"
SOCI_ROOT = "/var/lib/soci-snapshotter-grpc"
SOCKET_WAIT_S = 20.0
METRICS_TIMEOUT_S = 5.0
#: what runs in the private mount namespace: $1 the instance dir, $2 containerd's config,
#: $3 the registry's CA file or empty
NAMESPACE_SCRIPT = r"""set -e
mount -t tmpfs -o size=1m,mode=0755 servelab-varlib /var/lib
mkdir /var/lib/soci-snapshotter-grpc
mount --bind "$1/soci" /var/lib/soci-snapshotter-grpc
mount --bind "$1/hosts" /etc/hosts
if [ -n "$3" ]; then export SSL_CERT_FILE="$3"; fi
soci-snapshotter-grpc -address "$1/soci.sock" -config "$1/soci.toml" -log-level info \
  >"$1/soci.log" 2>&1 </dev/null &
exec containerd --config "$2"
"""
_HOST = re.compile(r"^(?P<name>\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::(?P<port>[0-9]{1,5}))?$")


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class LazyRegistry:
    """The HTTPS registry the lazy node pulls from (``HOST[:PORT]``), the CA that signed its
    certificate (None: the system's), and its access log and storage when this machine has them
    (to check the pull was lazy and to count bytes)."""

    host: str
    ca: Path | None = None
    log: Path | None = None
    data: Path | None = None

    def __post_init__(self) -> None:
        if _HOST.match(self.host) is None:
            raise InputError(f"--lazy-registry {self.host!r}: not HOST or HOST:PORT",
                             hint="give the registry's address, e.g. 127.0.0.1:5443")
        if self.ca is not None and not self.ca.is_file():
            raise InputError(f"--registry-ca {self.ca}: not a regular file",
                             hint="give the PEM file of the CA that signed the registry's "
                             "certificate")

    @property
    def mirror(self) -> str | None:
        """The name the snapshotter reaches a loopback registry by (None: its own)."""
        m = _HOST.match(self.host)
        if m is None or not _is_loopback(m.group("name")):
            return None
        return LOOPBACK_ALIAS + (f":{m.group('port')}" if m.group("port") else "")

    def tls_args(self) -> list[str]:
        return ["--tlscacert", str(self.ca)] if self.ca is not None else []

    def env(self) -> dict[str, str]:
        return {"SSL_CERT_FILE": str(self.ca)} if self.ca is not None else {}


def lazy_unavailable(parent: Path | None = None) -> str | None:
    """Why a lazy pull cannot run here, or None when it can."""
    why = unavailable(parent)
    if why is not None:
        return why
    for tool, package in (("soci", "soci-snapshotter"),
                          ("soci-snapshotter-grpc", "soci-snapshotter"),
                          ("fusermount3", "fuse3"), ("nsenter", "util-linux")):
        if proc.which(tool) is None:
            return (f"`{tool}` is not installed (Debian: apt-get install {package}; "
                    "soci-snapshotter comes from Debian 13, apt-get install -t trixie)")
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse: lazy pulling mounts each layer with FUSE"
    return None


def soci_config(work: Path, registry: LazyRegistry) -> str:
    """soci-snapshotter-grpc's config for an instance living in *work*."""
    lines = [f'metrics_address = "{work / "soci-metrics.sock"}"', 'metrics_network = "unix"',
             "[background_fetch]", "disable = true"]
    if registry.mirror is not None:
        lines += [f'[[resolver.host."{registry.host}".mirrors]]',
                  f'host = "{registry.mirror}"', "insecure = false"]
    return "\n".join([*lines, ""])


def _hosts_file(registry: LazyRegistry) -> str:
    try:
        text = Path("/etc/hosts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = "127.0.0.1 localhost\n"
    if registry.mirror is not None:
        text = text.rstrip("\n") + f"\n127.0.0.1 {LOOPBACK_ALIAS}\n"
    return text


class SociContainerd(PrivateContainerd):
    """A private containerd with soci-snapshotter-grpc as its proxy snapshotter ``soci``::

        with SociContainerd(run_id, LazyRegistry("127.0.0.1:5443", ca)) as pc:
            pc.soci("image", "rpull", *pc.registry.tls_args(), ref)
            pc.metrics()     # the snapshotter's Prometheus figures
    """

    def __init__(self, run_id: str, registry: LazyRegistry, *,
                 parent: Path | None = None) -> None:
        super().__init__(run_id, parent=parent)
        self.registry = registry
        self.soci_socket = self.work / "soci.sock"
        self.metrics_socket = self.work / "soci-metrics.sock"
        #: TMPDIR of the soci and ctr commands: ``soci create`` stages each layer in a temp
        #: file (tens of MB) that a SIGTERM would leave behind; here it is inside the
        #: instance's dir, registered for removal before the instance starts (:meth:`stop`)
        self.tmp = self.work / "tmp"

    def config(self) -> str:
        return config_text(self.work, self.soci_socket)

    def launch(self, cfg: Path) -> list[str]:
        (self.work / "soci").mkdir(mode=0o700)
        self.tmp.mkdir(mode=0o700)
        (self.work / "soci.toml").write_text(soci_config(self.work, self.registry),
                                             encoding="utf-8")
        (self.work / "hosts").write_text(_hosts_file(self.registry), encoding="utf-8")
        ca = str(self.registry.ca.resolve()) if self.registry.ca is not None else ""
        return ["sh", "-c", NAMESPACE_SCRIPT, "servelab-lazy", str(self.work), str(cfg), ca]

    def _wait_ready(self) -> None:
        super()._wait_ready()
        deadline = time.monotonic() + SOCKET_WAIT_S
        while not (self.soci_socket.exists() and self.metrics_socket.exists()):
            if time.monotonic() > deadline:
                raise CapabilityError(
                    f"soci-snapshotter-grpc did not start: {self.soci_log_tail()}",
                    hint="run `servelab doctor` (lazy pulling (SOCI))")
            time.sleep(0.05)

    def root_empty(self) -> bool:
        """containerd's root holds nothing, and neither does the snapshotter's (no snapshot,
        no blob in SOCI's content store)."""
        soci = self.work / "soci"
        return super().root_empty() and not any(
            _listing(soci / "snapshotter" / "snapshots")) and not any(
            _listing(soci / "content" / "blobs" / "sha256"))

    def soci_log(self) -> str:
        try:
            return (self.work / "soci.log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def soci_log_tail(self, lines: int = 3) -> str:
        return proc.tail(self.soci_log(), lines, inline=True) or "no output"

    def ns(self, *argv: str, check: bool = True, timeout: float = 60.0,
           env: dict[str, str] | None = None) -> proc.Completed:
        """Run *argv* inside the instance's mount namespace (where the snapshots are)."""
        if self.pid is None:
            raise CapabilityError("the private containerd is not running")
        return proc.run(["nsenter", "-t", str(self.pid), "-m", "--", *argv], check=check,
                        timeout=timeout, env=env)

    def soci(self, *args: str, check: bool = True, timeout: float = 300.0) -> proc.Completed:
        """The ``soci`` CLI against this instance, in its namespace."""
        return self.ns("soci", "--address", str(self.socket), "--namespace", self.namespace,
                       *args, check=check, timeout=timeout, env=self._env())

    def ctr(self, *args: str, check: bool = True, timeout: float = 60.0) -> proc.Completed:
        """``ctr`` against this instance, run INSIDE its mount namespace: ``ctr run`` with the
        snapshotter ``soci`` mounts the container's rootfs from the snapshotter's FUSE mounts,
        which only that namespace sees (outside it fails: "failed to mount ...: no such file
        or directory")."""
        return self.ns("ctr", "-a", str(self.socket), "-n", self.namespace, *args,
                       check=check, timeout=timeout, env=self._env())

    def _env(self) -> dict[str, str]:
        return {**self.registry.env(), "TMPDIR": str(self.tmp)}


    def metrics(self) -> dict[str, float]:
        """The snapshotter's Prometheus figures, ``name{labels}`` -> value ({} when its
        metrics socket does not answer)."""
        try:
            text = _get_unix(self.metrics_socket, "/metrics")
        except OSError:
            return {}
        return parse_metrics(text)


def _listing(d: Path) -> list[str]:
    try:
        return [p.name for p in d.iterdir()]
    except OSError:
        return []


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=METRICS_TIMEOUT_S)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(METRICS_TIMEOUT_S)
        s.connect(os.fspath(self._path))
        self.sock = s


def _get_unix(path: Path, url: str) -> str:
    conn = _UnixHTTP(path)
    try:
        conn.request("GET", url)
        resp = conn.getresponse()
        body = resp.read(8 << 20)
        if resp.status != 200:
            raise OSError(f"metrics answered {resp.status}")
        return body.decode("utf-8", errors="replace")
    except http.client.HTTPException as e:
        raise OSError(str(e)) from e
    finally:
        conn.close()


_SAMPLE = re.compile(r"^(?P<key>[A-Za-z_:][\w:]*(?:\{[^}]*\})?)\s+(?P<value>\S+)")


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text exposition -> ``name{labels}`` -> value (comments and unparsable
    values left out)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m is None or line.startswith("#"):
            continue
        try:
            out[m.group("key")] = float(m.group("value"))
        except ValueError:
            continue
    return out


def metric_sum(metrics: dict[str, float], name: str, **labels: str) -> float | None:
    """The sum of *name*'s samples whose labels include *labels* (None: no such sample)."""
    found = None
    for key, value in metrics.items():
        base, _, rest = key.partition("{")
        if base != name or any(f'{k}="{v}"' not in rest for k, v in labels.items()):
            continue
        found = (found or 0.0) + value
    return found
