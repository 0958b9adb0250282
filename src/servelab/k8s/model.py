"""The Kubernetes objects k8s-check reads, with the file and line of every field."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from servelab.yamlsafe import Document, JsonPath, Position

#: A resource name that is a GPU: ``nvidia.com/gpu``, ``amd.com/gpu``, NVIDIA MIG slices.
_GPU_RESOURCE = re.compile(r"^[^/\s]+/gpu$|^nvidia\.com/mig-[\w.-]+$")


def is_gpu_resource(name: str) -> bool:
    return bool(_GPU_RESOURCE.match(name))


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    """An integer from YAML (``3`` or ``"3"``); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def json_path(path: JsonPath) -> str:
    """``spec.template.spec.containers[0].image`` for a path tuple."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class Source:
    """Where an object lives: its file, its YAML document, its path inside that document."""

    file: str
    doc: Document
    base: JsonPath = ()


@dataclass
class K8sObject:
    kind: str
    api_version: str
    name: str
    namespace: str | None
    data: dict[str, Any]
    source: Source

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def labels(self) -> dict[str, str]:
        raw = as_dict(as_dict(self.data.get("metadata")).get("labels"))
        return {str(k): str(v) for k, v in raw.items()}

    def locate(self, path: JsonPath) -> Position:
        """The position of *path* (relative to this object), or of its nearest ancestor."""
        doc = self.source.doc
        p = (*self.source.base, *path)
        while p:
            if p in doc.key_positions:
                return doc.key_positions[p]
            if p in doc.positions:
                return doc.positions[p]
            p = p[:-1]
        return doc.positions.get((), Position(doc.line, 1))

    def same_namespace(self, other: K8sObject) -> bool:
        """Objects without a namespace (as ``helm template`` writes them) go together."""
        if self.namespace is None or other.namespace is None:
            return True
        return self.namespace == other.namespace


@dataclass
class Container:
    name: str
    data: dict[str, Any]
    #: Path of the container mapping, relative to its object.
    path: JsonPath
    init: bool = False

    @property
    def resources(self) -> dict[str, Any]:
        return as_dict(self.data.get("resources"))

    def gpu_resources(self) -> dict[str, tuple[Any, Any]]:
        """GPU resource name -> (request, limit); None where absent."""
        req = as_dict(self.resources.get("requests"))
        lim = as_dict(self.resources.get("limits"))
        names = [n for n in (*lim, *req) if is_gpu_resource(str(n))]
        return {str(n): (req.get(n), lim.get(n)) for n in dict.fromkeys(names)}

    def gpu_count(self) -> int:
        return sum(as_int(lim) or as_int(req) or 0 for req, lim in self.gpu_resources().values())

    @property
    def mounts(self) -> list[tuple[int, dict[str, Any]]]:
        return [(i, m) for i, m in enumerate(as_list(self.data.get("volumeMounts")))
                if isinstance(m, dict)]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in as_list(self.data.get("env")):
            if isinstance(item, dict) and "name" in item and "value" in item:
                out[str(item["name"])] = str(item["value"])
        return out

    def argv(self) -> list[str]:
        words = (*as_list(self.data.get("command")), *as_list(self.data.get("args")))
        return [str(a) for a in words]

    def port_number(self, port: Any) -> int | None:
        """A probe or Service port: a number, or the name of one of this container's ports."""
        number = as_int(port)
        if number is not None:
            return number
        for p in as_list(self.data.get("ports")):
            if isinstance(p, dict) and p.get("name") == port:
                return as_int(p.get("containerPort"))
        return None


@dataclass
class Workload:
    """An object that runs pods: Deployment, StatefulSet, Pod, Job, ..."""

    obj: K8sObject
    #: Path of the pod spec, relative to the object.
    pod_path: JsonPath
    pod: dict[str, Any]
    pod_labels: dict[str, str]
    containers: list[Container]
    init_containers: list[Container]
    serving: Container

    @property
    def kind(self) -> str:
        return self.obj.kind

    @property
    def spec(self) -> dict[str, Any]:
        return as_dict(self.obj.data.get("spec"))

    @property
    def replicas(self) -> int | None:
        """``spec.replicas`` as written (None when absent: an autoscaler may own it)."""
        return as_int(self.spec.get("replicas"))

    @property
    def is_gpu(self) -> bool:
        return any(c.gpu_resources() for c in (*self.containers, *self.init_containers))

    @property
    def serves(self) -> bool:
        """Long-running pods that take traffic (probes, rollouts and PDBs apply)."""
        return self.kind in {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Pod"}

    def volume(self, name: Any) -> dict[str, Any]:
        for v in as_list(self.pod.get("volumes")):
            if isinstance(v, dict) and v.get("name") == name:
                return v
        return {}

    def pod_field(self, *path: str | int) -> JsonPath:
        return (*self.pod_path, *path)


@dataclass
class Inventory:
    """Everything read from the manifests, by role."""

    files: list[str] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    pdbs: list[K8sObject] = field(default_factory=list)
    priority_classes: list[K8sObject] = field(default_factory=list)
    services: list[K8sObject] = field(default_factory=list)
    ignored: list[K8sObject] = field(default_factory=list)
    #: "Kind/name (file:line, file:line)" for objects defined more than once
    duplicates: list[str] = field(default_factory=list)
