"""host-path: node directories mounted into the serving pods."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import Workload, as_dict, as_list

#: Node paths whose mount gives the node away, exactly or anything under them.
SENSITIVE_TREES = ("/etc", "/proc", "/sys", "/boot", "/root", "/var/lib/kubelet",
                   "/var/lib/docker", "/var/lib/containerd", "/var/lib/crio", "/run/containerd",
                   "/var/run/containerd", "/run/crio", "/var/run/crio", "/var/lib/etcd")
#: Node paths that are sensitive themselves (their subdirectories may be fine: /dev/infiniband).
SENSITIVE_EXACT = ("/", "/dev", "/var", "/var/run", "/run", "/var/lib", "/home", "/usr",
                   "/lib", "/bin", "/sbin", "/var/log")
#: A container runtime's API socket: whoever reaches it runs anything on the node.
RUNTIME_SOCKETS = ("docker.sock", "containerd.sock", "crio.sock", "cri-dockerd.sock",
                   "dockershim.sock", "podman.sock")


def normal(path: str) -> str:
    """The node path as the kubelet mounts it (``/var//run/./x/`` is ``/var/run/x``)."""
    return posixpath.normpath("/" + path.strip()).replace("//", "/")


def sensitive(path: str) -> str | None:
    """Why the node path *path* is sensitive, or None."""
    p = normal(path)
    if p.rsplit("/", 1)[-1] in RUNTIME_SOCKETS:
        return "the container runtime's socket: whoever reaches it runs anything on the node"
    if p in SENSITIVE_EXACT:
        return "a system directory of the node" if p != "/" else "the node's whole filesystem"
    tree = next((t for t in SENSITIVE_TREES if p == t or p.startswith(t + "/")), None)
    if tree is not None:
        return f"under {tree}, the node's own configuration and state"
    return None


Mounts = dict[str, list[tuple[bool, str]]]


def _mounts_by_volume(w: Workload) -> Mounts:
    """Volume name -> (read-only, container name) of each mount of it: one pass."""
    out: Mounts = {}
    for c in (*w.containers, *w.init_containers):
        for _, m in c.mounts:
            out.setdefault(str(m.get("name")), []).append((m.get("readOnly") is True, c.name))
    return out


def _one(w: Workload, i: int, v: dict[str, Any], by_volume: Mounts) -> Iterator[Finding]:
    host = as_dict(v.get("hostPath"))
    path, kind = str(host.get("path") or ""), str(host.get("type") or "")
    mounts = by_volume.get(str(v.get("name")), [])
    at = w.pod_field("volumes", i, "hostPath", "path")
    why = sensitive(path)
    if why is not None:
        yield hit("host-path", w, f"hostPath volume {v.get('name')!r} mounts {path} from the "
                  f"node: {why}", at, severity=Severity.ERROR)
        return
    if not mounts:
        return
    if all(ro for ro, _ in mounts):
        if kind == "Directory":
            yield hit("host-path", w, f"hostPath volume {v.get('name')!r} ({path}, type "
                      "Directory, mounted read-only) ties the pods to nodes that hold this "
                      "directory, filled outside Kubernetes", at, severity=Severity.INFO,
                      fix="fine for a node-local model cache; a PersistentVolumeClaim or an "
                      "OCI image volume moves with the pod")
        return
    writers = ", ".join(sorted({n for ro, n in mounts if not ro}))
    yield hit("host-path", w, f"hostPath volume {v.get('name')!r} ({path}) is mounted writable "
              f"in {writers}: the pod writes to the node's disk, shared with whatever else "
              "runs there", at, fix="mount it with readOnly: true, or use an emptyDir or a "
              "PersistentVolumeClaim for what the server writes")


@rule(
    "host-path",
    Severity.WARNING,
    "a hostPath volume mounts a sensitive node path (runtime socket, /, /etc, /proc, /sys, "
    "/var/run, /var/lib/kubelet, ...), or any node path writable; a read-only model cache "
    "hostPath is info",
    rationale="A hostPath volume is a hole in the container boundary. The runtime's socket "
    "runs any container on the node; /, /etc, /proc, /sys, /var/run and the kubelet's "
    "directory hold the node's configuration, credentials and other pods' data (an error, "
    "read-only or not). Any other node directory mounted writable lets the server change the "
    "node's disk (a warning). A node-local model cache of type Directory mounted read-only is "
    "a common, deliberate choice: an info, because it ties the pods to the nodes that hold it.",
    fix="use a PersistentVolumeClaim, an OCI image volume or an emptyDir instead of the node "
    "path; never mount the runtime socket or system directories into a serving pod",
)
def host_path(w: Workload, ctx: Context) -> Iterator[Finding]:
    if w.scheduling_from is not None:
        return
    by_volume = _mounts_by_volume(w)
    for i, v in enumerate(as_list(w.pod.get("volumes"))):
        if isinstance(v, dict) and isinstance(v.get("hostPath"), dict):
            yield from _one(w, i, v, by_volume)
