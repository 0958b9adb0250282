"""Where each kind keeps its pod templates: plain workloads and the serving custom resources.

A Deployment has one pod template at a fixed path. The serving custom resources have several
(KServe's predictor, transformer and explainer; a Ray cluster's head and worker groups; a
LeaderWorkerSet's leader and workers; an LLMInferenceService's decode, prefill and worker
pods), and some leave fields to another object: an InferenceService's ``predictor.model``
gets its image, command and probes from a ServingRuntime, an LLMInferenceService its
``main`` container from LLMInferenceServiceConfigs (``baseRefs``), a Ray pod its probes from
the KubeRay operator. Those fields are marked inherited, with where they come from, so that
the rules neither guess them nor report them missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from servelab.k8s.merge import merge_container, merge_pod, sidecars, target_index
from servelab.k8s.model import K8sObject, Origins, as_dict, as_int, as_list
from servelab.yamlsafe import JsonPath

#: Plain workload kinds and where they keep their pod spec.
PLAIN: dict[str, JsonPath] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

KSERVE = "serving.kserve.io"
RAY = "ray.io"
LWS = "leaderworkerset.x-k8s.io"
KNATIVE = "serving.knative.dev"

#: Custom resource kinds read, by API group (named in the documentation and --help).
READ_KINDS: dict[str, tuple[str, ...]] = {
    KSERVE: ("InferenceService", "ServingRuntime", "ClusterServingRuntime",
             "LLMInferenceService", "LLMInferenceServiceConfig"),
    RAY: ("RayService", "RayCluster", "RayJob"),
    LWS: ("LeaderWorkerSet",),
    KNATIVE: ("Service",),
}

#: Kinds that run no pods of their own: read for their role (PDB, Service, ...) or ignored.
NO_PODS = frozenset({
    "APIService", "Certificate", "ClusterIssuer", "ClusterRole", "ClusterRoleBinding",
    "ConfigMap", "CustomResourceDefinition", "DestinationRule", "EndpointSlice", "Endpoints",
    "Event", "Gateway", "GatewayClass", "GRPCRoute", "HorizontalPodAutoscaler", "HTTPRoute",
    "InferenceModel", "InferenceObjective", "InferencePool", "Ingress", "IngressClass", "Issuer",
    "Lease", "LimitRange", "MutatingWebhookConfiguration", "Namespace", "NetworkPolicy",
    "PersistentVolume", "PersistentVolumeClaim", "PodDisruptionBudget", "PodMonitor",
    "PriorityClass", "PrometheusRule", "ResourceQuota", "Role", "RoleBinding", "RuntimeClass",
    "ScaledObject", "Secret", "Service", "ServiceAccount", "ServiceMonitor", "StorageClass",
    "TriggerAuthentication", "ValidatingWebhookConfiguration", "VerticalPodAutoscaler",
    "VirtualService",
})

#: KServe's model framework fields of a component: each one describes one container.
FRAMEWORKS = ("model", "huggingface", "sklearn", "xgboost", "lightgbm", "tensorflow", "pytorch",
              "triton", "onnx", "pmml", "paddle", "art", "alibi")
#: Where KServe puts the model of a storageUri or model.uri.
KSERVE_MODEL_DIR = "/mnt/models"
#: where ModelMesh's puller puts the models of a multi-model runtime (its models-dir volume)
MODELMESH_MODEL_DIR = "/models"
PROBES = ("readinessProbe", "livenessProbe", "startupProbe")
#: What a KServe model spec or an LLMInferenceService's main container may leave to its
#: runtime or base config (see model.GROUPS).
CONTAINER_GROUPS = ("image", "command", "probes", "securityContext", "resources", "mounts")
KUBERAY_PROBES = "the KubeRay operator (it adds readiness and liveness probes to Ray containers)"
KUBERAY_SHM = "the KubeRay operator (it mounts a memory-backed /dev/shm in Ray containers)"
NOT_GIVEN = "not among the manifests: not checked"


def api_group(obj: K8sObject) -> str:
    return obj.api_version.split("/", 1)[0] if "/" in obj.api_version else ""


def reads(obj: K8sObject) -> bool:
    """Whether *obj* is of a kind whose pods k8s-check reads."""
    group = api_group(obj)
    if obj.kind in PLAIN:
        return group in ("", "apps", "batch")
    return obj.kind in READ_KINDS.get(group, ())


def runs_no_pods(obj: K8sObject) -> bool:
    """A kind known to run no pods (a Service, a ConfigMap, ...): not worth naming as unread."""
    return obj.kind in NO_PODS and api_group(obj) != KNATIVE


@dataclass
class PodTemplate:
    """One pod template of an object, and what it leaves to others."""

    pod_path: JsonPath
    labels: dict[str, str]
    part: str | None = None
    takes_traffic: bool | None = None
    template: bool = False
    #: A container described outside the pod's containers list (KServe's predictor.model)
    lead: tuple[JsonPath, dict[str, Any]] | None = None
    #: The pod may list no containers: they come from a runtime or a base config
    containers_optional: bool = False
    #: The container that gets the fields it leaves out from elsewhere (None: the lead or first)
    inheriting: str | None = None
    #: Field group -> where the inheriting container gets it when it leaves it out
    inherit: dict[str, str] = field(default_factory=dict)
    scheduling_from: str | None = None
    model_uri: tuple[str, JsonPath] | None = None
    model_paths: tuple[str, ...] = ()
    base: K8sObject | None = None
    #: The pod spec as found at pod_path (not a mapping when malformed), with what a runtime
    #: adds; None: read it at pod_path
    pod: Any = None
    #: A pod merged with its runtime's: where the lead container's and the pod's fields were
    #: written, and the runtime's other containers (path in the runtime, data)
    lead_origins: Origins = field(default_factory=dict)
    pod_origins: Origins = field(default_factory=dict)
    extra: list[tuple[JsonPath, dict[str, Any]]] = field(default_factory=list)


def dig(data: Any, path: JsonPath) -> Any:
    """The value at *path* (keys and list indexes), None where it is absent."""
    for part in path:
        if isinstance(data, dict) and isinstance(part, str):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


def _labels(obj: K8sObject, path: JsonPath) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_dict(dig(obj.data, path)).items()}


class Index:
    """The objects of every manifest, to find the runtimes and configs that others refer to."""

    def __init__(self, objects: list[K8sObject]) -> None:
        self.objects = objects

    def find(self, kinds: tuple[str, ...], name: str, near: K8sObject) -> K8sObject | None:
        """The object of one of *kinds* named *name* (namespaced ones in *near*'s namespace)."""
        for obj in self.objects:
            if obj.kind in kinds and obj.name == name and api_group(obj) == KSERVE and (
                    obj.kind.startswith("Cluster") or obj.same_namespace(near)):
                return obj
        return None

    def runtime(self, name: str | None, model: ModelFormat | None,
                near: K8sObject) -> K8sObject | None:
        """The ServingRuntime an InferenceService names (a namespaced one before a cluster one,
        as KServe looks them up), or the one KServe selects for *model*."""
        if name:
            return (self.find(("ServingRuntime",), name, near)
                    or self.find(("ClusterServingRuntime",), name, near))
        if model is None:
            return None
        for kind in ("ServingRuntime", "ClusterServingRuntime"):
            found = [o for o in self.objects if o.kind == kind and api_group(o) == KSERVE
                     and (kind.startswith("Cluster") or o.same_namespace(near))
                     and model.supported_by(o)]
            if found:  # namespaced runtimes first; within a kind, the highest priority
                found.sort(key=lambda o: o.name)
                return max(found, key=lambda o: _priority(o, model.name))
        return None


@dataclass(frozen=True)
class ModelFormat:
    """An InferenceService's model format (``modelFormat: {name, version}``) and protocol."""

    name: str
    version: str | None = None
    protocol: str = "v1"

    def supported_by(self, runtime: K8sObject) -> bool:
        """KServe's selection: an enabled single-model runtime that auto-selects this format
        (and this version, when the model names one) and speaks the model's protocol."""
        spec = as_dict(runtime.data.get("spec"))
        if spec.get("disabled") is True or spec.get("multiModel") is True:
            return False
        protocols = [str(p) for p in as_list(spec.get("protocolVersions"))] or ["v1"]
        if self.protocol not in protocols:
            return False
        labels = set()
        for item in as_list(spec.get("supportedModelFormats")):
            f = as_dict(item)
            if f.get("autoSelect") is True:
                labels.add(str(f.get("name")))
                if f.get("version") is not None:
                    labels.add(f"{f.get('name')}:{f.get('version')}")
        return (f"{self.name}:{self.version}" if self.version else self.name) in labels


def _priority(runtime: K8sObject, fmt: str) -> int:
    """The runtime's priority for a model format (0 when it sets none: it then comes last)."""
    for item in as_list(as_dict(runtime.data.get("spec")).get("supportedModelFormats")):
        f = as_dict(item)
        if str(f.get("name", "")) == fmt and f.get("autoSelect") is True:
            return as_int(f.get("priority")) or 0
    return 0


def pod_templates(obj: K8sObject, index: Index) -> list[PodTemplate]:
    """The pod templates of *obj* (empty for a kind without pods or one not read)."""
    group = api_group(obj)
    if obj.kind in PLAIN and group in ("", "apps", "batch"):
        path = PLAIN[obj.kind]
        labels = (*path[:-1], "metadata", "labels") if obj.kind != "Pod" else ("metadata", "labels")
        return [PodTemplate(path, _labels(obj, labels))]
    readers = {
        (KSERVE, "InferenceService"): _inference_service,
        (KSERVE, "ServingRuntime"): _serving_runtime,
        (KSERVE, "ClusterServingRuntime"): _serving_runtime,
        (KSERVE, "LLMInferenceService"): _llm_inference_service,
        (KSERVE, "LLMInferenceServiceConfig"): _llm_inference_service,
        (RAY, "RayService"): _ray,
        (RAY, "RayCluster"): _ray,
        (RAY, "RayJob"): _ray,
        (LWS, "LeaderWorkerSet"): _leader_worker_set,
        (KNATIVE, "Service"): _knative,
    }
    reader = readers.get((group, obj.kind))
    return list(reader(obj, index)) if reader else []


# --- KServe ------------------------------------------------------------------------------------

def _storage_uri(comp: dict[str, Any], fw: str | None,
                 base: JsonPath) -> tuple[str, JsonPath] | None:
    if fw and isinstance(as_dict(comp[fw]).get("storageUri"), str):
        return str(comp[fw]["storageUri"]), (*base, fw, "storageUri")
    for i, c in enumerate(as_list(comp.get("containers"))):
        for j, e in enumerate(as_list(as_dict(c).get("env"))):
            if as_dict(e).get("name") == "STORAGE_URI" and isinstance(e.get("value"), str):
                return str(e["value"]), (*base, "containers", i, "env", j, "value")
    return None


def model_format(model: dict[str, Any], fw: str) -> ModelFormat | None:
    """The model format KServe selects a runtime for (a framework field names its own)."""
    if fw != "model":
        return ModelFormat(fw)
    fmt = as_dict(model.get("modelFormat"))
    if not fmt.get("name"):
        return None
    version = fmt.get("version")
    return ModelFormat(str(fmt["name"]), str(version) if version is not None else None,
                       str(model.get("protocolVersion") or "v1"))


def _runtime_source(index: Index, obj: K8sObject, model: dict[str, Any],
                    fw: str) -> tuple[K8sObject | None, str]:
    name = model.get("runtime")
    fmt = model_format(model, fw)
    runtime = index.runtime(str(name) if name else None, fmt, obj)
    if runtime is not None:
        return runtime, f"{runtime.ref}, checked there"
    if name:
        return None, f"ServingRuntime or ClusterServingRuntime {name!r}, {NOT_GIVEN}"
    shown = f"{fmt.name}:{fmt.version}" if fmt and fmt.version else (fmt.name if fmt else "")
    return None, f"the runtime KServe selects for model format {shown!r}, {NOT_GIVEN}"


def _inference_service(obj: K8sObject, index: Index) -> Iterator[PodTemplate]:
    spec = as_dict(obj.data.get("spec"))
    for name in ("predictor", "transformer", "explainer"):
        comp = spec.get(name)
        if not isinstance(comp, dict):
            continue
        base: JsonPath = ("spec", name)
        labels = {**obj.labels, "serving.kserve.io/inferenceservice": obj.name, "component": name}
        fw = next((k for k in FRAMEWORKS if isinstance(comp.get(k), dict)), None)
        uri = _storage_uri(comp, fw, base)
        if fw is None:
            yield PodTemplate(base, labels, part=name, takes_traffic=True, model_uri=uri,
                              model_paths=(KSERVE_MODEL_DIR,))
            continue
        model = as_dict(comp[fw])
        runtime, source = _runtime_source(index, obj, model, fw)
        groups = CONTAINER_GROUPS
        merged = _merged(obj, base, comp, fw, runtime)
        if merged is not None:
            yield PodTemplate(base, labels, part=name, takes_traffic=True, model_uri=uri,
                              model_paths=(KSERVE_MODEL_DIR,), base=runtime, **merged)
        else:
            yield PodTemplate(
                base, labels, part=name, takes_traffic=True, lead=((*base, fw), model),
                containers_optional=True, inheriting=str(model.get("name") or "kserve-container"),
                inherit=dict.fromkeys(groups, source), model_uri=uri,
                model_paths=(KSERVE_MODEL_DIR,), base=runtime,
                pod=merge_pod(runtime, obj, base, comp)[0] if runtime else None)
        workers = comp.get("workerSpec")
        if not isinstance(workers, dict):
            continue
        wpath: JsonPath = (*base, "workerSpec")
        merged_workers = _merged_workers(obj, wpath, workers, runtime)
        if merged_workers is not None:
            yield PodTemplate(wpath, labels, part=f"{name} workers", takes_traffic=False,
                              model_uri=uri, model_paths=(KSERVE_MODEL_DIR,), base=runtime,
                              **merged_workers)
        else:
            yield PodTemplate(
                wpath, labels, part=f"{name} workers", takes_traffic=False,
                containers_optional=True, inherit=dict.fromkeys(groups, source),
                model_uri=uri, model_paths=(KSERVE_MODEL_DIR,), base=runtime)


def _merged(obj: K8sObject, base: JsonPath, comp: dict[str, Any], fw: str,
            runtime: K8sObject | None) -> dict[str, Any] | None:
    """The fields of a component's PodTemplate when its runtime is in the input: the model
    spec merged onto the runtime's container, the pod onto the runtime's pod fields."""
    at = target_index(runtime) if runtime is not None else None
    if runtime is None or at is None:
        return None
    data, origins = merge_container(runtime, at, obj, (*base, fw), as_dict(comp[fw]))
    pod, pod_origins = merge_pod(runtime, obj, base, comp)
    return {"lead": ((*base, fw), data), "lead_origins": origins, "pod": pod,
            "pod_origins": pod_origins, "containers_optional": True,
            "extra": [(("spec", "containers", i), c) for i, c in sidecars(runtime, at)]}


def _merged_workers(obj: K8sObject, wpath: JsonPath, workers: dict[str, Any],
                    runtime: K8sObject | None) -> dict[str, Any] | None:
    """The predictor's workers merged with the runtime's workerSpec, as KServe builds the
    worker pod: the runtime's ``worker-container`` patched by the InferenceService's first
    worker container, the pods merged, and that one container in the pod."""
    at = target_index(runtime, "workers") if runtime is not None else None
    if runtime is None or at is None:
        return None
    own = as_list(workers.get("containers"))
    data, origins = merge_container(runtime, at, obj, (*wpath, "containers", 0),
                                    as_dict(own[0]) if own else {}, part="workers")
    pod, pod_origins = merge_pod(runtime, obj, wpath, workers, part="workers")
    pod.pop("containers", None)
    return {"lead": ((*wpath, "containers", 0), data), "lead_origins": origins, "pod": pod,
            "pod_origins": pod_origins, "containers_optional": True}


def _serving_runtime(obj: K8sObject, index: Index) -> Iterator[PodTemplate]:
    mesh = as_dict(obj.data.get("spec")).get("multiModel") is True
    yield PodTemplate(("spec",), {}, takes_traffic=True, template=True,
                      model_paths=(KSERVE_MODEL_DIR, MODELMESH_MODEL_DIR) if mesh else
                      (KSERVE_MODEL_DIR,))
    if isinstance(as_dict(obj.data.get("spec")).get("workerSpec"), dict):
        yield PodTemplate(("spec", "workerSpec"), {}, part="workers", takes_traffic=False,
                          template=True, model_paths=(KSERVE_MODEL_DIR,))


#: LLMInferenceService pod templates: (part, path, takes traffic, always present).
_LLM_PARTS: tuple[tuple[str | None, JsonPath, bool, bool], ...] = (
    (None, ("spec", "template"), True, True),
    ("workers", ("spec", "worker"), False, False),
    ("prefill", ("spec", "prefill", "template"), True, False),
    ("prefill workers", ("spec", "prefill", "worker"), False, False),
    ("scheduler", ("spec", "router", "scheduler", "template"), True, False),
)


def _base_refs(obj: K8sObject, index: Index) -> tuple[K8sObject | None, str]:
    spec = as_dict(obj.data.get("spec"))
    names = [str(as_dict(r).get("name")) for r in as_list(spec.get("baseRefs"))
             if as_dict(r).get("name")]
    if not names:
        return None, f"KServe's well-known LLMInferenceServiceConfigs, {NOT_GIVEN}"
    found = [index.find(("LLMInferenceServiceConfig",), n, obj) for n in names]
    shown = "LLMInferenceServiceConfig " + ", ".join(names)
    if all(found):
        return found[0], f"{shown}, checked there"
    return next((f for f in found if f), None), f"{shown}, {NOT_GIVEN}"


def _llm_inference_service(obj: K8sObject, index: Index) -> Iterator[PodTemplate]:
    config = obj.kind == "LLMInferenceServiceConfig"
    base, source = _base_refs(obj, index) if not config else (None, "")
    uri = as_dict(as_dict(obj.data.get("spec")).get("model")).get("uri")
    model_uri = (str(uri), ("spec", "model", "uri")) if isinstance(uri, str) else None
    groups = CONTAINER_GROUPS
    for part, path, traffic, always in _LLM_PARTS:
        pod = dig(obj.data, path)
        if not isinstance(pod, dict) and not (always and not config):
            continue
        scheduler = part == "scheduler"
        yield PodTemplate(
            path, _labels(obj, ("metadata", "labels")), part=part, takes_traffic=traffic,
            template=config, containers_optional=True, inheriting=None if scheduler else "main",
            inherit={} if config or scheduler else dict.fromkeys(groups, source),
            scheduling_from=None if isinstance(pod, dict) else source,
            model_uri=None if scheduler else model_uri,
            model_paths=(KSERVE_MODEL_DIR,), base=base, pod=None if isinstance(pod, dict) else {})


# --- KubeRay, LeaderWorkerSet, Knative ---------------------------------------------------------

def _ray(obj: K8sObject, index: Index) -> Iterator[PodTemplate]:
    base: JsonPath = {"RayService": ("spec", "rayClusterConfig"), "RayCluster": ("spec",),
                      "RayJob": ("spec", "rayClusterSpec")}[obj.kind]
    cluster = as_dict(dig(obj.data, base))
    serving = obj.kind == "RayService"
    probes = {"mounts": KUBERAY_SHM, **({"probes": KUBERAY_PROBES} if serving else {})}
    head = (*base, "headGroupSpec", "template")
    if isinstance(dig(obj.data, (*head, "spec")), dict):
        yield PodTemplate((*head, "spec"), {**_labels(obj, (*head, "metadata", "labels")),
                                            "ray.io/node-type": "head"},
                          part="head", takes_traffic=serving, inherit=probes)
    for i, group in enumerate(as_list(cluster.get("workerGroupSpecs"))):
        tpl = (*base, "workerGroupSpecs", i, "template")
        if not isinstance(dig(obj.data, (*tpl, "spec")), dict):
            continue
        name = str(as_dict(group).get("groupName") or i)
        yield PodTemplate((*tpl, "spec"), {**_labels(obj, (*tpl, "metadata", "labels")),
                                           "ray.io/node-type": "worker", "ray.io/group": name},
                          part=f"worker group {name}", takes_traffic=serving, inherit=probes)


def _leader_worker_set(obj: K8sObject, index: Index) -> Iterator[PodTemplate]:
    base: JsonPath = ("spec", "leaderWorkerTemplate")
    own = {"leaderworkerset.sigs.k8s.io/name": obj.name}
    leader = (*base, "leaderTemplate")
    worker = (*base, "workerTemplate")
    if isinstance(dig(obj.data, (*leader, "spec")), dict):
        yield PodTemplate((*leader, "spec"), {**_labels(obj, (*leader, "metadata", "labels")),
                                              **own}, part="leader", takes_traffic=True)
        if as_int(dig(obj.data, (*base, "size"))) == 1:
            return  # a group of one is its leader alone: the worker template makes no pod
        yield PodTemplate((*worker, "spec"), {**_labels(obj, (*worker, "metadata", "labels")),
                                              **own}, part="workers", takes_traffic=False)
        return
    yield PodTemplate((*worker, "spec"), {**_labels(obj, (*worker, "metadata", "labels")), **own},
                      part="leader and workers", takes_traffic=True)


def _knative(obj: K8sObject, index: Index) -> Iterator[PodTemplate]:
    yield PodTemplate(("spec", "template", "spec"),
                      _labels(obj, ("spec", "template", "metadata", "labels")), takes_traffic=True)


def base_part(part: str | None) -> str | None:
    """The part of a runtime or base config that completes *part* of the object using it."""
    if part in ("predictor", "transformer", "explainer"):
        return None
    if part and part.split()[0] in ("predictor", "transformer", "explainer"):
        return "workers"
    return part


def missing(data: dict[str, Any], group: str) -> bool:
    """Whether a container leaves *group* to its runtime or base config."""
    if group == "image":
        return not data.get("image")
    if group == "probes":
        return any(p not in data for p in PROBES)
    if group == "resources":
        return not as_dict(data.get("resources"))
    if group == "mounts":
        return True  # the base's volume mounts are merged with the container's own
    return group not in data
