"""The Kubernetes objects k8s-check reads, with the file and line of every field."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servelab.textio import ascii_int
from servelab.yamlsafe import Document, JsonPath, Position

if TYPE_CHECKING:
    from servelab.k8s.imagefiles import ImageFiles
    from servelab.k8s.provenance import ImageHistory

#: A resource name that is a GPU: ``nvidia.com/gpu``, ``amd.com/gpu``, NVIDIA MIG slices, and
#: the names NVIDIA's device plugin gives shared or renamed GPUs (``nvidia.com/gpu.shared``,
#: a ``rename`` of its sharing config such as ``nvidia.com/gpu-all``).
_GPU_RESOURCE = re.compile(r"^[^/\s]+/gpu$|^nvidia\.com/mig-[\w.-]+$|^nvidia\.com/gpu[.-][\w.-]+$")


def is_gpu_resource(name: str) -> bool:
    return bool(_GPU_RESOURCE.match(name))


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


#: Kubernetes integer fields are int32/int64: larger YAML integers are not numbers it takes.
INT_LIMIT = 2**63


def as_int(value: Any) -> int | None:
    """An integer from YAML (``3`` or ``"3"``, ASCII digits only) within int64; None for
    anything else (``"²"``, ``"٣"``, a 5000-digit number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -INT_LIMIT < value < INT_LIMIT else None
    if isinstance(value, str):
        return ascii_int(value)
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


#: Where the fields of a merged object come from: a path relative to the merged mapping ->
#: the object and the path (relative to it) that wrote it (see servelab.k8s.merge).
Origins = dict[JsonPath, tuple["K8sObject", JsonPath]]


def origin_of(origins: Origins, base: JsonPath,
              path: JsonPath) -> tuple[K8sObject, JsonPath] | None:
    """The object and path that wrote *path* (relative to the object), when *path* lies under
    *base*, the merged mapping's path: the nearest recorded ancestor, the rest appended."""
    if not origins or path[:len(base)] != base:
        return None
    rel = path[len(base):]
    for n in range(len(rel), -1, -1):
        found = origins.get(rel[:n])
        if found is not None:
            return found[0], (*found[1], *rel[n:])
    return None


#: Container field groups a pod template may leave to another object (a runtime, a base config,
#: an operator), and the words the notes use for them.
GROUPS = {
    "image": "image",
    "command": "command",
    "probes": "probes",
    "securityContext": "securityContext",
    "resources": "resources",
    "mounts": "volume mounts",
}


@dataclass
class Container:
    name: str
    data: dict[str, Any]
    #: Path of the container mapping, relative to its object.
    path: JsonPath
    init: bool = False
    #: Field group (see GROUPS) -> where these pods get it from, for fields this object leaves out
    inherited: dict[str, str] = field(default_factory=dict)
    #: For a container merged from several objects (KServe's model spec and its runtime): where
    #: each field was written
    origins: Origins = field(default_factory=dict)
    #: The checked image (--image) when it is this container's: its scripts are read
    image_files: ImageFiles | None = None
    #: How the checked image (--image) was made, when it is this container's
    image_history: ImageHistory | None = None
    #: What following its start scripts did not read, and why (a bound reached): the
    #: report's coverage notes (k8s.script.container_commands fills it)
    unread: list[str] = field(default_factory=list)

    def where(self, path: JsonPath) -> tuple[K8sObject, JsonPath] | None:
        """The object and field that wrote *path* of a merged container; None otherwise."""
        return origin_of(self.origins, self.path, path)

    def inherits(self, group: str) -> str | None:
        """Where *group* comes from when this object leaves it to another one, else None."""
        return self.inherited.get(group)

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
        """The literal environment values (``value:``; not valueFrom)."""
        out: dict[str, str] = {}
        for item in as_list(self.data.get("env")):
            if isinstance(item, dict) and "name" in item and item.get("value") is not None:
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


#: Kinds whose pods take traffic (probes, Services); custom resources say it per pod template.
SERVING_KINDS = {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Pod"}


@dataclass
class Workload:
    """One pod template of an object: a Deployment's, or a part of a serving custom resource."""

    obj: K8sObject
    #: Path of the pod spec, relative to the object.
    pod_path: JsonPath
    pod: dict[str, Any]
    pod_labels: dict[str, str]
    containers: list[Container]
    init_containers: list[Container]
    serving: Container
    #: Which pod template of the object ("predictor", "head", "worker group gpu"); None: the main
    part: str | None = None
    #: Whether the pods take traffic (probes, Services apply); None: decided by the kind
    takes_traffic: bool | None = None
    #: A template for other objects' pods (ServingRuntime, LLMInferenceServiceConfig): their
    #: resources, scheduling and priority are set by the objects that use it
    template: bool = False
    #: The pod-level scheduling fields (tolerations, node selection, priority) come from here
    scheduling_from: str | None = None
    #: The model's URI (KServe storageUri, LLMInferenceService model.uri) and its path
    model_uri: tuple[str, JsonPath] | None = None
    #: Directories the platform fills with the model (KServe: /mnt/models)
    model_paths: tuple[str, ...] = ()
    #: The runtime or base config found among the manifests that these pods are completed from
    base: K8sObject | None = None
    #: GPU workloads that use this template (it then counts as a GPU workload)
    gpu_users: list[str] = field(default_factory=list)
    #: For a pod merged with its runtime's: where each pod field was written
    origins: Origins = field(default_factory=dict)
    #: The InferenceService parts judged merged with this runtime (it is then not judged alone)
    merged_into: list[str] = field(default_factory=list)
    #: A runtime given alone that the table of known servers (servelab.k8s.servers) names as a
    #: GPU server: the server's name
    known_gpu_server: str | None = None

    @property
    def pair(self) -> str | None:
        """``InferenceService/x predictor + ServingRuntime/y`` for a merged pod, else None."""
        return f"{self.ref} + {self.base.ref}" if self.base is not None and self.origins else None

    def source_of(self, path: JsonPath,
                  container: Container | None = None) -> tuple[K8sObject, JsonPath]:
        """The object and field that wrote *path* (relative to this object)."""
        for c in ([container] if container else []) + [*self.containers, *self.init_containers]:
            found = c.where(path)
            if found is not None:
                return found
        return origin_of(self.origins, self.pod_path, path) or (self.obj, path)

    @property
    def kind(self) -> str:
        return self.obj.kind

    @property
    def ref(self) -> str:
        """``Kind/name``, with the part for a custom resource's pod template."""
        return f"{self.obj.ref} {self.part}" if self.part else self.obj.ref

    @property
    def spec(self) -> dict[str, Any]:
        return as_dict(self.obj.data.get("spec"))

    @property
    def model_mesh(self) -> bool:
        """A ModelMesh runtime (``multiModel: true``): the server starts with no model, and
        ModelMesh's puller fills its models directory and loads each model once it is up."""
        return self.template and self.spec.get("multiModel") is True

    @property
    def replicas(self) -> int | None:
        """``spec.replicas`` as written (None when absent: an autoscaler may own it)."""
        return as_int(self.spec.get("replicas"))

    @property
    def is_gpu(self) -> bool:
        return bool(self.gpu_users) or bool(self.known_gpu_server) or any(
            c.gpu_resources() for c in (*self.containers, *self.init_containers))

    @property
    def serves(self) -> bool:
        """Long-running pods that take traffic (probes and Services apply); a bare Pod that
        runs to completion (restartPolicy Never or OnFailure) is a job, not a server."""
        if self.takes_traffic is not None:
            return self.takes_traffic
        if self.kind == "Pod" and self.pod.get("restartPolicy") in ("Never", "OnFailure"):
            return False
        return self.kind in SERVING_KINDS

    def schedules_itself(self) -> bool:
        """Whether this object sets its pods' GPU scheduling (not a template, not inherited)."""
        return not self.template and self.scheduling_from is None

    def inherited_notes(self) -> list[str]:
        """What these pods get from another object, one note per source."""
        notes: list[str] = []
        for c in self.containers:
            by_source: dict[str, list[str]] = {}
            for group, source in c.inherited.items():
                by_source.setdefault(source, []).append(GROUPS[group])
            notes += [f"{self.ref}: container {c.name!r} inherits {', '.join(groups)} from "
                      f"{source}" for source, groups in by_source.items()]
        if self.pair:
            notes.append(f"{self.ref}: judged merged with {self.base.ref if self.base else ''} "
                         "(KServe's merge: the predictor's fields override the runtime's)")
        if self.scheduling_from:
            notes.append(f"{self.ref}: the pod (scheduling, volumes) comes from "
                         f"{self.scheduling_from}")
        return notes

    def volume(self, name: Any) -> dict[str, Any]:
        """The pod's volume *name*; a StatefulSet's volumeClaimTemplate of that name is a
        PersistentVolumeClaim per pod (``{"name": ..., "persistentVolumeClaim": {...}}``)."""
        for v in as_list(self.pod.get("volumes")):
            if isinstance(v, dict) and v.get("name") == name:
                return v
        if self.kind == "StatefulSet":
            for t in as_list(self.spec.get("volumeClaimTemplates")):
                meta = as_dict(as_dict(t).get("metadata"))
                if name is not None and meta.get("name") == name:
                    return {"name": name, "persistentVolumeClaim": {"claimName": f"{name}-<pod>"}}
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
    #: ConfigMaps: launch scripts mounted into containers, environment values
    configmaps: list[K8sObject] = field(default_factory=list)
    #: Secrets written in the manifests (their literal data is committed with them)
    secrets: list[K8sObject] = field(default_factory=list)
    #: HorizontalPodAutoscalers: they own the replica count of the workload they target
    hpas: list[K8sObject] = field(default_factory=list)
    ignored: list[K8sObject] = field(default_factory=list)
    #: Objects of kinds k8s-check cannot read that may run pods (named in the report)
    unread: list[K8sObject] = field(default_factory=list)
    #: "Kind/name (file:line, file:line)" for objects defined more than once
    duplicates: list[str] = field(default_factory=list)
