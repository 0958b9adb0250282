"""security-context and resources: each container's hardening and sizing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import Container, Workload, as_dict, as_int, as_list
from servelab.yamlsafe import JsonPath

#: Volume sources Kubernetes always mounts read-only.
READ_ONLY_SOURCES = {"configMap", "secret", "downwardAPI", "projected", "image"}
#: Environment variables naming a directory that servers write to (caches, temp).
WRITABLE_ENV = (
    "TMPDIR", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE",
    "XDG_CACHE_HOME", "TRITON_CACHE_DIR", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR",
    "TORCH_HOME", "NUMBA_CACHE_DIR", "CUDA_CACHE_PATH",
)


def covers(mount_path: str, path: str) -> bool:
    root = mount_path.rstrip("/") or "/"
    return path == root or path.startswith(root.rstrip("/") + "/")


def is_read_only_source(volume: dict[str, Any]) -> bool:
    return any(k in volume for k in READ_ONLY_SOURCES)


def writable_mounts(w: Workload, c: Container) -> list[str]:
    return [str(m.get("mountPath")) for _, m in c.mounts
            if m.get("readOnly") is not True and m.get("mountPath")
            and not is_read_only_source(w.volume(m.get("name")))]


def env_path(c: Container, name: str) -> JsonPath:
    for i, item in enumerate(as_list(c.data.get("env"))):
        if isinstance(item, dict) and item.get("name") == name:
            return (*c.path, "env", i, "value")
    return (*c.path, "env")


def _writable_paths(w: Workload, c: Container) -> Iterator[Finding]:
    env = c.env()
    needed = [(k, env[k]) for k in WRITABLE_ENV if env.get(k, "").startswith("/")]
    if "TMPDIR" not in env:
        needed.insert(0, ("", "/tmp"))  # noqa: S108 (the path a read-only root breaks)
    mounts = writable_mounts(w, c)
    for var, path in needed:
        if any(covers(m, path) for m in mounts):
            continue
        via = f" (from {var})" if var else ""
        yield hit("security-context", w, f"readOnlyRootFilesystem is true but {path}{via} is on "
                  "no writable volume: writes there fail at run time",
                  env_path(c, var) if var else (*c.path, "volumeMounts"), container=c,
                  fix=f"mount an emptyDir at {path}")


def _user_checks(w: Workload, c: Container, sc: dict[str, Any]) -> Iterator[Finding]:
    psc = as_dict(w.pod.get("securityContext"))
    base = (*c.path, "securityContext")
    pod_base = w.pod_field("securityContext")
    user_at = (*base, "runAsUser") if "runAsUser" in sc else (*pod_base, "runAsUser")
    user = as_int(sc.get("runAsUser", psc.get("runAsUser")))
    if user == 0:
        yield hit("security-context", w, "runs as root (runAsUser: 0)", user_at, container=c,
                  severity=Severity.ERROR, fix="run as a non-root user and set runAsNonRoot: true")
        return
    if user is not None or sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True:
        return  # a non-zero user (container or pod) never runs as root
    at = (*base, "runAsNonRoot") if "runAsNonRoot" in sc or "runAsNonRoot" not in psc else (
        *pod_base, "runAsNonRoot")
    yield hit("security-context", w, "runAsNonRoot is not true and no runAsUser is set: the "
              "container may run as root", at, container=c,
              fix="set securityContext.runAsNonRoot: true (or a non-zero runAsUser)")


#: Pod fields that share the node's namespaces, and what they expose.
HOST_NAMESPACES = {
    "hostNetwork": "the node's network (every port and interface of the node)",
    "hostPID": "the node's processes",
    "hostIPC": "the node's shared memory and IPC with every pod on the node",
}
HOST_FIX = {
    "hostNetwork": "drop hostNetwork; for RDMA/InfiniBand attach the devices through the device "
    "plugin and a secondary network (Multus, SR-IOV)",
    "hostPID": "drop hostPID",
    "hostIPC": "drop hostIPC and mount an emptyDir {medium: Memory} at /dev/shm for NCCL and "
    "the server's shared memory",
}
#: hostPath types that create what is missing on the node instead of failing.
CREATING = {"DirectoryOrCreate", "FileOrCreate"}


def _pod_checks(w: Workload) -> Iterator[Finding]:
    psc = as_dict(w.pod.get("securityContext"))
    if as_dict(psc.get("seccompProfile")).get("type") == "Unconfined":
        yield _unconfined(w, w.pod_field("securityContext"), None)
    for key, what in HOST_NAMESPACES.items():
        if w.pod.get(key) is True:
            yield hit("security-context", w, f"{key}: true shares {what}", w.pod_field(key),
                      fix=HOST_FIX[key])
    for i, v in enumerate(as_list(w.pod.get("volumes"))):
        host = as_dict(as_dict(v).get("hostPath"))
        if host.get("type") in CREATING:
            yield hit("security-context", w, f"hostPath volume {as_dict(v).get('name')!r} has "
                      f"type {host.get('type')}: on a node without {host.get('path')} the kubelet "
                      "creates it (as root, empty) and the pod starts on an empty directory "
                      "instead of failing", w.pod_field("volumes", i, "hostPath", "type"),
                      fix="use type: Directory (the pod then waits for a node that has it), or "
                      "a PersistentVolumeClaim")


#: The capabilities a container runtime gives a container by default (containerd, CRI-O and
#: Docker agree on this set).
DEFAULT_CAPS = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                "NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                "SYS_CHROOT")
#: The one capability the restricted Pod Security profile lets a container add.
RESTRICTED_ADD = {"NET_BIND_SERVICE"}
#: Added capabilities that give the node away (an error; the others are warnings).
NODE_CAPS = {"ALL", "SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE", "SYS_MODULE", "DAC_READ_SEARCH",
             "SYS_RAWIO", "BPF", "PERFMON", "SYS_BOOT", "SYS_TIME", "MAC_ADMIN",
             "MAC_OVERRIDE", "SYSLOG", "SYS_RESOURCE", "NET_RAW"}


def _caps(value: Any) -> list[str]:
    """Capability names as the runtime reads them (``cap_sys_admin`` is ``SYS_ADMIN``)."""
    return [str(x).upper().removeprefix("CAP_") for x in as_list(value)]


def _capabilities(w: Workload, c: Container, caps: dict[str, Any],
                  at: JsonPath) -> Iterator[Finding]:
    """drop: [ALL] (which ones remain when it lists some), and what add gives back, also when
    drop: [ALL] is set (add is applied after drop)."""
    drops = set(_caps(caps.get("drop")))
    if "ALL" not in drops:
        remain = [x for x in DEFAULT_CAPS if x not in drops]
        if drops and remain:
            yield hit("security-context", w, f"capabilities.drop lists {', '.join(sorted(drops))}"
                      f" but not ALL: the runtime's other default capabilities remain "
                      f"({', '.join(remain)})", (*at, "drop"), container=c,
                      fix="set securityContext.capabilities.drop: [ALL] (and add back only "
                      "NET_BIND_SERVICE if the server binds a port below 1024)")
        elif not drops:
            yield hit("security-context", w, "capabilities are not dropped: the container keeps "
                      f"the runtime's default capabilities ({', '.join(DEFAULT_CAPS)})", at,
                      container=c, fix="set securityContext.capabilities.drop: [ALL]")
    added = [x for x in dict.fromkeys(_caps(caps.get("add"))) if x not in RESTRICTED_ADD]
    if added:
        node = [x for x in added if x in NODE_CAPS]
        rdma_only = set(added) == {"IPC_LOCK"}
        also = " (after drop: [ALL], add gives them back)" if "ALL" in drops else ""
        yield hit("security-context", w, f"capabilities.add gives {', '.join(added)}{also}: the "
                  "restricted Pod Security profile allows adding only NET_BIND_SERVICE",
                  (*at, "add"), container=c,
                  severity=Severity.ERROR if node else (
                      Severity.INFO if rdma_only else Severity.WARNING),
                  fix="remove them from capabilities.add: GPUs through the device plugin need "
                  "none (RDMA memory registration needs IPC_LOCK only)")


def _unconfined(w: Workload, at: JsonPath, c: Container | None) -> Finding:
    return hit("security-context", w, "seccompProfile Unconfined turns off the runtime's "
               "system-call filter", (*at, "seccompProfile", "type"), container=c,
               fix="use seccompProfile: {type: RuntimeDefault}")


def _baseline(w: Workload, c: Container, sc: dict[str, Any]) -> Iterator[Finding]:
    """What the baseline Pod Security profile forbids: host ports, an unconfined seccomp
    profile, an unmasked /proc."""
    for i, p in enumerate(as_list(c.data.get("ports"))):
        port = as_int(as_dict(p).get("hostPort"))
        if port:
            yield hit("security-context", w, f"hostPort {port} binds the node's port {port} to "
                      "this container: the pod reaches (and is reached on) the node's network, "
                      "and two such pods cannot share a node", (*c.path, "ports", i, "hostPort"),
                      container=c, fix="remove hostPort and reach the pods through a Service")
    if as_dict(sc.get("seccompProfile")).get("type") == "Unconfined":
        yield _unconfined(w, (*c.path, "securityContext"), c)
    if sc.get("procMount") == "Unmasked":
        yield hit("security-context", w, "procMount: Unmasked shows the container the node's "
                  "masked /proc paths", (*c.path, "securityContext", "procMount"), container=c,
                  fix="remove procMount (Default masks them)")


def _container_checks(w: Workload, c: Container) -> Iterator[Finding]:
    if c.inherits("securityContext"):
        return
    sc = as_dict(c.data.get("securityContext"))
    base = (*c.path, "securityContext")
    yield from _baseline(w, c, sc)
    yield from _user_checks(w, c, sc)
    if sc.get("privileged") is True:
        yield hit("security-context", w, "privileged: true gives the container the whole node",
                  (*base, "privileged"), container=c, severity=Severity.ERROR,
                  fix="remove privileged; the NVIDIA device plugin exposes GPUs without it")
    wanted = (("allowPrivilegeEscalation", False), ("readOnlyRootFilesystem", True))
    for key, value in wanted:
        if sc.get(key) is not value:
            yield hit("security-context", w, f"{key} is not {str(value).lower()}", (*base, key),
                      container=c, fix=f"set securityContext.{key}: {str(value).lower()}")
    yield from _capabilities(w, c, as_dict(sc.get("capabilities")), (*base, "capabilities"))
    if sc.get("readOnlyRootFilesystem") is True:
        yield from _writable_paths(w, c)


@rule(
    "security-context",
    Severity.WARNING,
    "not runAsNonRoot, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true and "
    "capabilities.drop: [ALL]; capabilities added beyond NET_BIND_SERVICE; hostPort, seccomp "
    "Unconfined, procMount Unmasked; writable paths without a volume; host namespaces; "
    "hostPath DirectoryOrCreate",
    rationale="An inference server parses untrusted input next to valuable weights and a GPU. "
    "The restricted Pod Security profile asks for these settings; a read-only root filesystem "
    "also proves the image writes only where volumes are mounted. hostNetwork, hostPID and "
    "hostIPC share the node's namespaces with the server, and a hostPath of type "
    "DirectoryOrCreate silently starts the pod on an empty directory where the node lacks it.",
    fix="set securityContext {runAsNonRoot: true, allowPrivilegeEscalation: false, "
    "readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}} and mount emptyDir volumes at "
    "/tmp and at the cache directories the server writes",
)
def security_context(w: Workload, ctx: Context) -> Iterator[Finding]:
    if w.scheduling_from is None:
        yield from _pod_checks(w)
    for c in (*w.containers, *w.init_containers):
        yield from _container_checks(w, c)


#: (section, resource, severity) every container should set.
_WANTED = (
    ("requests", "cpu", Severity.WARNING),
    ("requests", "memory", Severity.WARNING),
    ("limits", "memory", Severity.WARNING),
    ("limits", "cpu", Severity.INFO),
)


@rule(
    "resources",
    Severity.WARNING,
    "cpu/memory requests or limits missing",
    rationale="Without requests the scheduler may pack the pod next to others that starve "
    "tokenization and batching; without a memory limit a leak or a large batch takes the node's "
    "memory (and the memory-backed /dev/shm counts against it). A missing CPU limit is only "
    "info: some teams leave it out on purpose to avoid throttling. A KServe "
    "InferenceService's container without CPU or memory gets KServe's defaults (1 CPU, 2Gi) "
    "from its webhook: a report note names them, no finding.",
    fix="set resources.requests.cpu, requests.memory and limits.memory (and limits.cpu if "
    "you want throttling) on every container",
)
def resources(w: Workload, ctx: Context) -> Iterator[Finding]:
    if w.template:
        return  # the InferenceServices using a runtime set the resources
    for c in (*w.containers, *w.init_containers):
        if c.inherits("resources"):
            continue
        missing = _missing_resources(c)
        if missing and w.obj.kind == "InferenceService":
            _kserve_defaults(w, c, missing, ctx)
            continue
        for section, name, severity in missing:
            yield hit("resources", w, f"{section}.{name} is not set",
                      (*c.path, "resources", section), container=c, severity=severity,
                      fix=f"set resources.{section}.{name}")


def _missing_resources(c: Container) -> list[tuple[str, str, Severity]]:
    limits = as_dict(c.resources.get("limits"))
    return [(section, name, severity) for section, name, severity in _WANTED
            if name not in as_dict(c.resources.get(section))
            and not (section == "requests" and name in limits)]  # a request defaults to the limit


#: What KServe's InferenceService webhook sets where a predictor's container leaves it out
#: (the inferenceservice-config ConfigMap's resource defaults, KServe's built-in values).
KSERVE_DEFAULTS = {"cpu": "1", "memory": "2Gi"}


def _kserve_defaults(w: Workload, c: Container, missing: list[tuple[str, str, Severity]],
                     ctx: Context) -> None:
    """An InferenceService's container without CPU or memory is not unset: KServe's webhook
    fills them from its defaults. Said once per container, as a note that names them."""
    fields = ", ".join(f"{section}.{name}={KSERVE_DEFAULTS[name]}"
                       for section, name, _ in missing)
    ctx.note(f"resources: {w.ref}: container {c.name!r} leaves CPU/memory to KServe: its webhook "
             f"sets the inferenceservice-config ConfigMap's defaults ({fields} unless the "
             "cluster changed them): not reported; set them if the model needs more than 2Gi")
