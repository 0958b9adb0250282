"""gpu-limit, gpu-toleration, gpu-placement, driver-compat, shm: what a GPU pod needs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import Container, Workload, as_dict, as_int, as_list
from servelab.k8s.rayenv import serve_gpu_asks
from servelab.k8s.roles import no_model
from servelab.k8s.rules.model_source import model_refs
from servelab.k8s.rules.pod import env_path
from servelab.k8s.selectors import Requirement, guaranteed, node_alternatives, requirements_on
from servelab.k8s.servers import cpu_reason, gpu_server, own_build

#: Node labels that name the GPU model.
PRODUCT_KEYS = {
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
}
#: Node labels that pin a node pool or instance type (and so the GPU model).
POOL_KEYS = {
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "nvidia.com/gpu.machine",
}
#: GPU Feature Discovery labels: driver branch, and the newest CUDA the driver supports.
SHM_PATH = "/dev/shm"  # noqa: S108 (a mount point, not a temp file)
DRIVER_KEYS = {"nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver-version.major"}
RUNTIME_KEYS = {"nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime-version.major"}


def _same(a: Any, b: Any) -> bool:
    ia, ib = as_int(a), as_int(b)
    return ia == ib if ia is not None and ib is not None else str(a) == str(b)


def _container_gpu(w: Workload, c: Container) -> Iterator[Finding]:
    base = (*c.path, "resources")
    for name, (req, lim) in c.gpu_resources().items():
        if lim is None:
            yield hit("gpu-limit", w, f"{name} is requested without a limit; Kubernetes "
                      "rejects extended resources without limits", (*base, "requests", name),
                      container=c, fix=f"set resources.limits.{name} (requests may be omitted)")
        elif req is not None and not _same(req, lim):
            yield hit("gpu-limit", w, f"{name} requests {req} but limits {lim}; GPUs cannot be "
                      "overcommitted, requests must equal limits", (*base, "requests", name),
                      container=c, fix=f"set requests.{name} equal to limits.{name}, or drop it")
        count = as_int(lim if lim is not None else req)
        if count is None or count < 1:
            where = "limits" if lim is not None else "requests"
            shown = lim if lim is not None else req
            yield hit("gpu-limit", w, f"{name} is {'null' if shown is None else shown!r}: a GPU "
                      "count must be a whole number of at least 1", (*base, where, name),
                      container=c)


@rule(
    "gpu-limit",
    Severity.ERROR,
    "the GPU resource is missing from limits, requested without a limit, or requests != limits",
    rationale="GPUs are extended resources: only limits schedule them, they cannot be "
    "overcommitted, and a serving container without one runs on CPU or not at all. Only a "
    "known GPU server (or one measured on a GPU, or llama.cpp told to offload layers) is "
    "reported for requesting none; CPU builds, other accelerators (Neuron, TPU, Gaudi, Intel "
    "GPU) and servers whose GPU need is unknown get a report note.",
    fix="set resources.limits.nvidia.com/gpu (a whole number) on the serving container; if "
    "you also set requests, make them equal",
)
def gpu_limit(w: Workload, ctx: Context) -> Iterator[Finding]:
    for c in (*w.containers, *w.init_containers):
        yield from _container_gpu(w, c)
    c = w.serving
    if not c.gpu_resources() and w.serves and w.part != "head" and not w.template and not (
            c.inherits("resources")) and no_model(w, c, ctx) is None:
        ray = list(_ray_gpu_asks(w, c, ctx))
        yield from ray or _no_gpu(w, c, ctx)


def _ray_gpu_asks(w: Workload, c: Container, ctx: Context) -> Iterator[Finding]:
    """A RayService whose Serve deployments ask for GPUs (``ray_actor_options.num_gpus``) while
    no pod of its cluster requests one: the replicas never start. Said once, at the first
    worker group."""
    if w.kind != "RayService" or not (w.part or "").startswith("worker group"):
        return
    asks = serve_gpu_asks(w.obj)
    siblings = [o for o in ctx.inventory.workloads if o.obj is w.obj]
    if not asks or any(o.is_gpu for o in siblings):
        return
    if next(o for o in siblings if (o.part or "").startswith("worker group")) is not w:
        return
    what, line = asks[0]
    yield hit("gpu-limit", w, f"the Serve deployment {what} (serveConfigV2, line {line}) asks "
              f"for a GPU, but no pod of the Ray cluster requests one ({c.name!r} of "
              f"{w.part} requests no nvidia.com/gpu): its replicas never start",
              (*c.path, "resources", "limits"), container=c,
              fix="set resources.limits.nvidia.com/gpu on the worker group that should run the "
              "GPU replicas (and rayStartParams num-gpus if it is not detected)")


def _node_keys(w: Workload) -> list[str]:
    keys = [str(k) for k in as_dict(w.pod.get("nodeSelector"))]
    return keys + [r.key for alt in node_alternatives(w) for r in alt]


#: Accelerators other than */gpu resources: AWS Neuron, Google TPU, Intel Gaudi and Intel GPUs.
ACCELERATOR = re.compile(r"^aws\.amazon\.com/neuron(core|device)?$|^google\.com/tpu$|"
                         r"^habana\.ai/gaudi$|^gpu\.intel\.com/[\w.-]+$")
#: llama.cpp's flags (and variable) that offload layers to the GPU.
GPU_LAYER_FLAGS = {"--n-gpu-layers", "-ngl", "--gpu-layers"}


def _accelerator(w: Workload, c: Container) -> str | None:
    """Why the container runs on an accelerator that is not a */gpu resource, or None."""
    for part in ("limits", "requests"):
        name = next((str(n) for n in as_dict(c.resources.get(part)) if ACCELERATOR.match(str(n))),
                    None)
        if name is not None:
            return f"it requests {name}"
    key = next((k for k in c.env() if k.startswith("NEURON_")), None)
    if key is not None:
        return f"its environment configures AWS Neuron ({key})"
    if w.obj.kind.startswith("Ray") and "neuron_cores" in json.dumps(w.obj.data, default=str):
        return "its Ray resources name neuron_cores (AWS Neuron)"
    return None


def _gpu_layers(c: Container) -> str | None:
    """llama.cpp's ``--n-gpu-layers N`` (or LLAMA_ARG_N_GPU_LAYERS) as written, when N > 0."""
    words = _words(c)
    for i, word in enumerate(words):
        flag, _, value = word.partition("=")
        if flag in GPU_LAYER_FLAGS:
            n = as_int(value if value else (words[i + 1] if i + 1 < len(words) else ""))
            if n is not None and n > 0:
                return f"{flag} {n}"
    n = as_int(c.env().get("LLAMA_ARG_N_GPU_LAYERS"))
    return f"LLAMA_ARG_N_GPU_LAYERS={n}" if n is not None and n > 0 else None


def _rpc(w: Workload, c: Container) -> str | None:
    """Where llama.cpp's offloaded layers go when not to a local GPU: ``--rpc`` backends, or
    the worker pods of a LeaderWorkerSet group (rpc-server workers)."""
    if any(word.partition("=")[0] == "--rpc" for word in _words(c)):
        return "--rpc"
    size = as_int(as_dict(as_dict(w.obj.data.get("spec")).get("leaderWorkerTemplate")).get("size"))
    if w.obj.kind == "LeaderWorkerSet" and size is not None and size > 1:
        return f"the {size - 1} worker pod(s) of its LeaderWorkerSet group"
    return None


def _no_gpu(w: Workload, c: Container, ctx: Context) -> Iterator[Finding]:
    """A serving container without a GPU: an error for a GPU server (a known one, one the
    experiment measured on a GPU, or llama.cpp told to offload layers), nothing for a CPU
    server by design or another accelerator, and a report note when the need is unknown."""
    at = (*c.path, "resources", "limits")
    said = f"the serving container {c.name!r} requests no GPU (no nvidia.com/gpu or other */gpu " \
           "resource in limits)"
    measured = ctx.measured.gpu_name if ctx.measured else None
    if measured:
        yield hit("gpu-limit", w, f"{said}: the experiment measured it on {measured}", at,
                  container=c)
        return
    other = _accelerator(w, c)
    if other is not None:
        ctx.note(f"gpu-limit: {w.ref}: container {c.name!r} requests no GPU but runs on another "
                 f"accelerator ({other}): not reported")
        return
    layers = _gpu_layers(c)
    rpc = _rpc(w, c) if layers is not None else None
    if layers is not None and rpc is not None:
        ctx.note(f"gpu-limit: {w.ref}: container {c.name!r} requests no GPU; its {layers} "
                 f"offloads to llama.cpp RPC backends ({rpc}), not a local GPU: not reported")
        return
    if layers is not None:
        yield hit("gpu-limit", w, f"container {c.name!r} asks llama.cpp to offload layers to the "
                  f"GPU ({layers}) but requests no GPU: the layers stay on the CPU, or the "
                  "server fails to start", at, container=c, fix="set resources.limits."
                  "nvidia.com/gpu, or drop the GPU-layers flag for a CPU server")
        return
    yield from _no_gpu_server(w, c, ctx, said)


def _no_gpu_server(w: Workload, c: Container, ctx: Context, said: str) -> Iterator[Finding]:
    image, argv = str(c.data.get("image") or ""), c.argv()
    reason = cpu_reason(image, argv, _node_keys(w), c.env())
    if reason is not None:
        ctx.note(f"gpu-limit: {w.ref}: container {c.name!r} requests no GPU and is a CPU server "
                 f"by design ({reason}): not reported")
        return
    server = gpu_server(image, argv)
    if server is not None and not own_build(image, argv):
        yield hit("gpu-limit", w, f"{said}: it runs {server.name}, a GPU server",
                  (*c.path, "resources", "limits"), container=c)
        return
    why = (f"{server.name} in an image built on an unknown base" if server is not None else
           "not a server servelab knows, no GPU measured, no CPU-only build seen")
    ctx.note(f"gpu-limit: {w.ref}: container {c.name!r} requests no GPU; whether it needs one "
             f"is unknown ({why}): not reported. If it serves on a GPU, set "
             "resources.limits.nvidia.com/gpu")


#: Values of NVIDIA_VISIBLE_DEVICES that show no GPU, or leave the choice to the device plugin.
NO_DEVICES = {"", "none", "void"}


def _visible(value: str) -> int | None:
    """How many GPUs NVIDIA_VISIBLE_DEVICES=*value* shows: None for ``all``; 0 for none."""
    value = value.strip()
    if value.lower() == "all":
        return None
    if value.lower() in NO_DEVICES:
        return 0
    return len([v for v in value.split(",") if v.strip()])


def _visibility(w: Workload, c: Container) -> Iterator[Finding]:
    env = c.env()
    if "NVIDIA_VISIBLE_DEVICES" not in env:
        return
    value = env["NVIDIA_VISIBLE_DEVICES"]
    shown = _visible(value)
    limit = c.gpu_count()
    if shown is not None and shown <= limit:
        return
    what = "every GPU of the node" if shown is None else f"{shown} GPU(s)"
    yield hit("gpu-visibility", w, f"NVIDIA_VISIBLE_DEVICES={value.strip()} shows {what} to "
              f"container {c.name!r}, whose nvidia.com/gpu limit is {limit}: the device "
              "plugin's isolation is bypassed, the process can use GPUs given to other pods",
              env_path(c, "NVIDIA_VISIBLE_DEVICES"), container=c)


@rule(
    "gpu-visibility",
    Severity.ERROR,
    "NVIDIA_VISIBLE_DEVICES=all (or more devices than the container's GPU limit) is set in the "
    "manifest",
    rationale="The NVIDIA device plugin gives a container the GPUs its limit asks for by "
    "setting NVIDIA_VISIBLE_DEVICES itself. A value written in the manifest (all, or a list "
    "longer than the limit) is honoured by the container toolkit on most clusters: the "
    "process sees every GPU of the node, uses memory on GPUs scheduled to other pods, and the "
    "scheduler's accounting no longer matches what runs.",
    fix="remove NVIDIA_VISIBLE_DEVICES from env and set resources.limits.nvidia.com/gpu to the "
    "number of GPUs the server needs",
)
def gpu_visibility(w: Workload, ctx: Context) -> Iterator[Finding]:
    for c in (*w.containers, *w.init_containers):
        yield from _visibility(w, c)


def _tolerates_gpu(t: dict[str, Any]) -> bool:
    effect_ok = t.get("effect") in (None, "", "NoSchedule")
    if t.get("operator") == "Exists" and not t.get("key"):
        return effect_ok
    key = str(t.get("key") or "")
    gpu_key = key.endswith("/gpu") or key == "gpu" or (key == "sku" and t.get("value") == "gpu")
    return gpu_key and effect_ok


#: Node label prefixes that show the cloud the pods are placed on.
GKE_PREFIX = "cloud.google.com/"
AKS_KEYS = ("kubernetes.azure.com/", "agentpool")


def _placed_on(w: Workload, prefixes: tuple[str, ...]) -> bool:
    keys = [str(k) for k in as_dict(w.pod.get("nodeSelector"))]
    keys += [r.key for alt in node_alternatives(w) for r in alt]
    return any(k.startswith(prefixes) for k in keys)


@rule(
    "gpu-toleration",
    Severity.INFO,
    "no toleration for a GPU taint (a warning on AKS; GKE adds it itself)",
    rationale="GPU node pools are often tainted (nvidia.com/gpu:NoSchedule by many admins and "
    "the GPU Operator's examples, sku=gpu:NoSchedule on AKS) so that other pods stay off them; "
    "a pod without the toleration stays Pending there. GKE, and clusters that run the "
    "ExtendedResourceToleration admission plugin, add the nvidia.com/gpu toleration to pods "
    "that request nvidia.com/gpu by themselves, so on those the manifest needs none: pods "
    "placed on GKE (cloud.google.com/* node labels) get a note instead of a finding, other "
    "clusters an info, AKS (whose sku=gpu taint no plugin tolerates) a warning.",
    fix="add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}] (or "
    "the taint your GPU nodes carry, e.g. sku=gpu on AKS); nothing is needed on GKE or where "
    "ExtendedResourceToleration runs",
)
def gpu_toleration(w: Workload, ctx: Context) -> Iterator[Finding]:
    if not w.is_gpu or not w.schedules_itself():
        return
    tolerations = [t for t in as_list(w.pod.get("tolerations")) if isinstance(t, dict)]
    if any(_tolerates_gpu(t) for t in tolerations):
        return
    if _placed_on(w, (GKE_PREFIX,)):
        ctx.note(f"gpu-toleration: {w.ref} runs on GKE (cloud.google.com node labels), which "
                 "adds the nvidia.com/gpu toleration to pods that request GPUs")
        return
    if _placed_on(w, AKS_KEYS):
        yield hit("gpu-toleration", w, "no toleration for AKS's GPU taint (sku=gpu:NoSchedule): "
                  "the pods stay Pending on tainted GPU node pools", w.pod_field("tolerations"),
                  severity=Severity.WARNING, fix="add tolerations: [{key: sku, operator: Equal, "
                  "value: gpu, effect: NoSchedule}]")
        return
    yield hit("gpu-toleration", w, "no toleration for a GPU taint (e.g. nvidia.com/gpu:"
              "NoSchedule): on tainted GPU nodes the pods stay Pending, unless the cluster adds "
              "it (GKE, or the ExtendedResourceToleration admission plugin)",
              w.pod_field("tolerations"))


def _model_token(gpu_name: str) -> str | None:
    """``h200`` for "NVIDIA H200", ``a100`` for "NVIDIA A100-SXM4-80GB", ``4090`` for RTX 4090."""
    tokens = re.split(r"[^a-z0-9]+", gpu_name.lower())
    return next((t for t in tokens if re.search(r"\d", t) and not t.endswith("gb")), None)


def _product_matches(value: str, token: str) -> bool:
    return token in re.split(r"[^a-z0-9]+", value.lower())


def _pins_node_type(alt: list[Requirement]) -> bool:
    return any(r.key in PRODUCT_KEYS | POOL_KEYS and r.operator == "In" and r.values for r in alt)


@rule(
    "gpu-placement",
    Severity.WARNING,
    "no nodeSelector or required node affinity pins the GPU model the experiment measured",
    rationale="Startup time, memory headroom and throughput were measured on one GPU model; "
    "on another one the probes' budgets and the resource sizes no longer hold.",
    fix="select the measured GPU: nodeSelector {nvidia.com/gpu.product: <product>} (GPU "
    "Feature Discovery's label), cloud.google.com/gke-accelerator, or the node pool / instance "
    "type that has it",
)
def gpu_placement(w: Workload, ctx: Context) -> Iterator[Finding]:
    m = ctx.measured
    if not w.is_gpu or not m or not m.gpu_name or not w.schedules_itself():
        return
    token = _model_token(m.gpu_name)
    for r in requirements_on(w, PRODUCT_KEYS):
        wrong = [v for v in r.values if token and not _product_matches(v, token)]
        if r.operator == "In" and wrong:
            yield hit("gpu-placement", w, f"{r.key} allows {', '.join(wrong)} but the experiment "
                      f"measured on {m.gpu_name}", r.path)
    if not guaranteed(w, _pins_node_type):
        place = w.pod_field("nodeSelector") if "nodeSelector" in w.pod else w.pod_field("affinity")
        yield hit("gpu-placement", w, f"the experiment measured on {m.gpu_name}, but nothing pins "
                  "the pods to that GPU model or its node pool (preferred affinity does not count)",
                  place)


def _floor_met(r: Requirement, floor: int) -> bool:
    nums = r.ints()
    if nums is None:
        return False
    if r.operator == "In":
        return min(nums) >= floor
    return r.operator == "Gt" and nums[0] >= floor - 1


@rule(
    "driver-compat",
    Severity.WARNING,
    "no node selector or affinity guarantees a driver new enough for the image's CUDA",
    rationale="A CUDA 12 image needs driver 525 or newer (CUDA 11: 450, CUDA 13: 580); on an "
    "older node it fails at the first CUDA call, after the pod was scheduled and pulled.",
    fix="require the driver branch with GPU Feature Discovery's label: matchExpressions "
    "[{key: nvidia.com/cuda.driver.major, operator: Gt, values: ['<floor minus one>']}]",
)
def driver_compat(w: Workload, ctx: Context) -> Iterator[Finding]:
    m = ctx.measured
    floor = m.min_driver_major if m else None
    cuda = m.cuda_major if m else None
    if not w.is_gpu or not m or floor is None or cuda is None or not w.schedules_itself():
        return

    def ok(alt: list[Requirement]) -> bool:
        return any(_floor_met(r, floor) for r in alt if r.key in DRIVER_KEYS) or any(
            _floor_met(r, cuda) for r in alt if r.key in RUNTIME_KEYS)

    if guaranteed(w, ok):
        return
    fix = (f"add to the required node affinity: {{key: nvidia.com/cuda.driver.major, operator: "
           f"Gt, values: ['{floor - 1}']}}")
    weak = [r for r in requirements_on(w, DRIVER_KEYS | RUNTIME_KEYS)
            if not _floor_met(r, floor if r.key in DRIVER_KEYS else cuda)]
    if weak:
        r = weak[0]
        yield hit("driver-compat", w, f"{r.key} {r.operator} {list(r.values)} allows nodes whose "
                  f"driver is older than {floor}, which CUDA {m.cuda_version} needs", r.path,
                  severity=Severity.ERROR, fix=fix)
        return
    yield hit("driver-compat", w, f"the image needs CUDA {m.cuda_version} (driver {floor} or "
              "newer) but no nodeSelector or required node affinity guarantees that driver",
              w.pod_field("affinity") if "affinity" in w.pod else w.pod_field("nodeSelector"),
              fix=fix)


def _shm_mount(c: Container) -> tuple[int, dict[str, Any]] | None:
    return next(((i, m) for i, m in c.mounts
                 if str(m.get("mountPath", "")).rstrip("/") == SHM_PATH), None)


_UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}


def quantity(value: Any) -> float | None:
    """Bytes of a Kubernetes quantity (``16Gi``, ``8G``, ``512Mi``, ``1e9``); None if unreadable."""
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][0-9]+)?)\s*([kMGTP]i?)?\s*", str(value))
    if not m:
        return None
    try:
        return float(m.group(1)) * _UNITS[m.group(2) or ""]
    except ValueError:
        return None


def _shm_size(w: Workload, c: Container, i: int, mount: dict[str, Any]) -> Iterator[Finding]:
    size = as_dict(w.volume(mount.get("name")).get("emptyDir")).get("sizeLimit")
    limit = as_dict(c.resources.get("limits")).get("memory")
    have, cap = quantity(size), quantity(limit)
    if have is None or cap is None or have <= cap:
        return
    yield hit("shm", w, f"the /dev/shm emptyDir's sizeLimit {size} is larger than the "
              f"container's memory limit {limit}: shared memory counts against that limit, so "
              "the container is OOM-killed before /dev/shm is full", (*c.path, "volumeMounts", i),
              container=c, fix=f"keep the sizeLimit below limits.memory ({limit}), and raise "
              "limits.memory by the shared memory the server needs")


#: Flags (and variables) that set tensor, pipeline or data parallelism: vLLM, SGLang, TGI, LMDeploy.
PARALLEL_FLAGS = {"--tensor-parallel-size", "-tp", "--tp", "--tp-size", "--pipeline-parallel-size",
                  "-pp", "--pp", "--pp-size", "--num-shard", "--data-parallel-size", "-dp",
                  "--dp-size"}
PARALLEL_ENV = ("NUM_SHARD", "TENSOR_PARALLEL_SIZE", "PIPELINE_PARALLEL_SIZE", "DATA_PARALLEL_SIZE")
#: Where a Ray object keeps its worker groups.
RAY_GROUPS = {"RayCluster": ("spec",), "RayService": ("spec", "rayClusterConfig"),
              "RayJob": ("spec", "rayClusterSpec")}


def _words(c: Container) -> list[str]:
    return [x for a in c.argv() for x in a.split()]


def _parallel(c: Container) -> str | None:
    """``--tensor-parallel-size 2`` (or ``=2``, NUM_SHARD=2, TGI's ``--sharded true``) as
    written, when above 1."""
    words = _words(c)
    for i, word in enumerate(words):
        flag, _, value = word.partition("=")
        value = value or (words[i + 1] if i + 1 < len(words) else "")
        if flag == "--sharded" and value.lower() == "true":
            return "--sharded true"
        if flag in PARALLEL_FLAGS:
            n = as_int(value)
            if n is not None and n > 1:
                return f"{flag} {n}"
    env = c.env()
    if env.get("SHARDED", "").lower() == "true":
        return "SHARDED=true"
    return next((f"{k}={env[k]}" for k in PARALLEL_ENV if (as_int(env.get(k)) or 0) > 1), None)


def _multi_node(w: Workload) -> str | None:
    """A LeaderWorkerSet group of more than one pod, or a Ray cluster with worker groups."""
    spec = as_dict(w.obj.data.get("spec"))
    if w.obj.kind == "LeaderWorkerSet":
        size = as_int(as_dict(spec.get("leaderWorkerTemplate")).get("size"))
        return f"the LeaderWorkerSet group has {size} pods" if size is not None and size > 1 \
            else None
    where = RAY_GROUPS.get(w.obj.kind)
    if where is None:
        return None
    cluster: Any = w.obj.data
    for key in where:
        cluster = as_dict(cluster).get(key)
    if as_list(as_dict(cluster).get("workerGroupSpecs")):
        return "the Ray cluster spans a head and worker nodes"
    return None


def shm_need(w: Workload, c: Container) -> str | None:
    """Why the serving container needs more than the default /dev/shm, or None: tensor,
    pipeline or data parallelism, more than one GPU, or a multi-node LWS or Ray group. A
    server on one GPU alone (vLLM, Triton, TGI) does not."""
    parallel = _parallel(c)
    if parallel is not None:
        return (f"parallelism is on ({parallel}) and NCCL or the server's processes share "
                "memory through it")
    if c.gpu_count() > 1:
        return (f"the container has {c.gpu_count()} GPUs and NCCL shares memory between them "
                "through it")
    group = _multi_node(w)
    if group is not None:
        return f"{group}, and NCCL and the processes on each node share memory through it"
    return None


@rule(
    "shm",
    Severity.ERROR,
    "no memory-backed emptyDir at /dev/shm where NCCL or multi-process sharing is in play, or "
    "one larger than the memory limit",
    rationale="Containers get a 64 MB /dev/shm; NCCL and the processes of a parallel server "
    "(tensor, pipeline or data parallelism above 1, TGI --sharded true, more than one GPU in "
    "the limit, a multi-node LeaderWorkerSet or Ray group) fail or slow down with it. A server "
    "on one GPU alone (vLLM, Triton, TGI, Ollama, llama.cpp, an unknown server) is not "
    "reported: its default /dev/shm suffices for one process per GPU. "
    "Memory-backed /dev/shm counts against the container's memory limit: a sizeLimit above "
    "it is never reached, the container is OOM-killed first.",
    fix="add a volume {name: dshm, emptyDir: {medium: Memory, sizeLimit: 8Gi}} and mount it at "
    "/dev/shm in the serving container (it counts against the memory limit)",
)
def shm(w: Workload, ctx: Context) -> Iterator[Finding]:
    yield from shm_oversized(w)
    c = w.serving
    if not w.is_gpu or w.pod.get("hostIPC") is True or no_model(w, c, ctx) is not None:
        return
    gpus = c.gpu_count()
    if not w.serves and gpus <= 1 and w.model_uri is None and not model_refs(w, c, ctx) and (
            _multi_node(w) is None):
        return  # a single-GPU job that loads no model (a CUDA test or benchmark)
    why = shm_need(w, c)
    if why is None:
        return
    found = _shm_mount(c)
    if found is None:
        if not c.inherits("mounts"):
            yield hit("shm", w, f"no memory-backed volume at /dev/shm, but {why}: the 64 MB "
                      "default breaks or slows it", (*c.path, "volumeMounts"), container=c)
        return
    i, mount = found
    if as_dict(w.volume(mount.get("name")).get("emptyDir")).get("medium") != "Memory":
        yield hit("shm", w, f"volume {mount.get('name')!r} at /dev/shm is not an emptyDir with "
                  "medium: Memory", (*c.path, "volumeMounts", i), container=c)


def shm_oversized(w: Workload) -> Iterator[Finding]:
    """A memory-backed /dev/shm whose sizeLimit is above its container's memory limit, in any
    container of any pod (GPU or not, a need for /dev/shm or not)."""
    for c in (*w.init_containers, *w.containers):
        found = _shm_mount(c)
        if found is not None and as_dict(w.volume(found[1].get("name")).get("emptyDir")).get(
                "medium") == "Memory":
            yield from _shm_size(w, c, *found)
