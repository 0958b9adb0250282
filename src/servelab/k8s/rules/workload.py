"""disruption, priority, rollout, service-port: how the workload lives in the cluster."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import K8sObject, Workload, as_dict, as_int, as_list
from servelab.k8s.selectors import scaled, selector_matches, service_selects
from servelab.k8s.servers import known_server

#: PriorityClasses every cluster has.
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical", "system-node-critical"}
#: Workloads whose pods are replaced, not just deleted, on eviction (a PDB applies).
REPLICATED = {"Deployment", "StatefulSet", "ReplicaSet"}


class Replicas(NamedTuple):
    """How many pods the workload runs: a fixed count, or an autoscaler's range."""

    low: int
    high: int
    #: How the count is known, for messages ("2 replica(s)", "HPA/x: 2 to 8 replicas")
    said: str


def _hpa_of(w: Workload, ctx: Context) -> K8sObject | None:
    for hpa in ctx.inventory.hpas:
        target = as_dict(as_dict(hpa.data.get("spec")).get("scaleTargetRef"))
        if (hpa.same_namespace(w.obj) and target.get("name") == w.obj.name
                and target.get("kind") in (None, w.kind)):
            return hpa
    return None


def replicas(w: Workload, ctx: Context) -> Replicas:
    """The replica count an HPA gives the workload (its minReplicas to maxReplicas), else
    ``spec.replicas``, else Kubernetes' default of 1."""
    hpa = _hpa_of(w, ctx)
    if hpa is not None:
        spec = as_dict(hpa.data.get("spec"))
        low = as_int(spec.get("minReplicas"))
        low = 1 if low is None else low
        high = as_int(spec.get("maxReplicas"))
        high = low if high is None or high < low else high
        return Replicas(low, high, f"{hpa.ref} scales it from {low} to {high} replica(s)")
    if w.replicas is not None:
        return Replicas(w.replicas, w.replicas, f"{w.replicas} replica(s)")
    return Replicas(1, 1, "replicas unset (Kubernetes' default: 1)")


def _pdb_blocks(pdb: K8sObject, count: Replicas) -> tuple[str, bool] | None:
    """Why *pdb* allows no voluntary eviction, and whether at every replica count (or only at
    the autoscaler's lower counts); None when it allows one."""
    spec = as_dict(pdb.data.get("spec"))
    if "maxUnavailable" in spec:
        value = spec["maxUnavailable"]
        n = scaled(value, count.high, round_up=True)
        return (f"maxUnavailable {value}", True) if n == 0 else None
    if "minAvailable" not in spec:
        return None
    value = spec["minAvailable"]
    at_high = scaled(value, count.high, round_up=True)
    at_low = scaled(value, count.low, round_up=True)
    if at_high is not None and at_high >= count.high:
        return f"minAvailable {value} with {count.said}", True
    if at_low is not None and at_low >= count.low:
        return f"minAvailable {value} with {count.said}: at {count.low} replica(s)", False
    return None


@rule(
    "disruption",
    Severity.WARNING,
    "no PodDisruptionBudget selects the pods, or the one that does blocks every eviction",
    rationale="A node drain (upgrade, autoscaler, spot reclaim) evicts pods through the "
    "eviction API. Without a PDB every replica may go at once, and each takes the whole model "
    "load to come back; a PDB that allows no eviction makes drains hang until someone deletes "
    "the pod by hand. Two PDBs on the same pods make evictions fail.",
    fix="add one PodDisruptionBudget selecting the pods with maxUnavailable: 1 (and run at "
    "least 2 replicas so a drain does not mean an outage)",
)
def disruption(w: Workload, ctx: Context) -> Iterator[Finding]:
    if w.kind not in REPLICATED:
        return
    pdbs = [p for p in ctx.inventory.pdbs if p.same_namespace(w.obj)
            and selector_matches(as_dict(p.data.get("spec")).get("selector"), w.pod_labels)]
    if not pdbs:
        yield hit("disruption", w, "no PodDisruptionBudget selects these pods: a drain may evict "
                  "every replica at once", ("metadata", "name"))
        return
    distinct = {(p.namespace, p.name) for p in pdbs}
    if len(distinct) > 1:
        names = ", ".join(sorted({p.ref for p in pdbs}))
        yield hit("disruption", w, f"{len(distinct)} PodDisruptionBudgets select these pods "
                  f"({names}): the eviction API refuses to evict them", ("metadata", "name"),
                  fix="keep exactly one PodDisruptionBudget per set of pods")
    count = replicas(w, ctx)
    for p in pdbs:
        found = _pdb_blocks(p, count)
        if found is None:
            continue
        why, always = found
        key = "maxUnavailable" if "maxUnavailable" in as_dict(p.data.get("spec")) else (
            "minAvailable")
        said = (f"{p.ref} blocks every eviction ({why}): node drains hang" if always else
                f"{p.ref} blocks evictions while the autoscaler runs the fewest pods ({why}): "
                "node drains hang until it scales up")
        yield hit("disruption", w, said, ("spec", key), at=p,
                  fix="allow one eviction: maxUnavailable: 1, with at least 2 replicas (an "
                  "HPA's minReplicas above the PDB's minAvailable)")


@rule(
    "priority",
    Severity.WARNING,
    "a GPU workload has no priorityClassName, or names one that does not exist",
    rationale="GPU nodes are scarce: without a priority the serving pods wait behind (or are "
    "preempted by) batch jobs; a priorityClassName that does not exist makes admission reject "
    "every pod.",
    fix="set priorityClassName to a PriorityClass for serving (and ship that PriorityClass with "
    "the manifests)",
)
def priority(w: Workload, ctx: Context) -> Iterator[Finding]:
    if not w.is_gpu or not w.schedules_itself():
        return
    classes = ctx.inventory.priority_classes
    name = w.pod.get("priorityClassName")
    if not name:
        default = next((pc for pc in classes if pc.data.get("globalDefault") is True), None)
        said = f"; pods get the global default {default.name}" if default else ""
        yield hit("priority", w, f"no priorityClassName on a GPU workload{said}",
                  w.pod_field("priorityClassName"),
                  severity=Severity.INFO if default else None)
        return
    known = {pc.name for pc in classes} | BUILTIN_PRIORITY_CLASSES
    if classes and str(name) not in known:
        yield hit("priority", w, f"PriorityClass {name!r} is not among the given manifests "
                  f"(found: {', '.join(sorted(pc.name for pc in classes))}): admission rejects "
                  "pods that name a missing class", w.pod_field("priorityClassName"),
                  severity=Severity.ERROR, fix="fix the name, or add the PriorityClass")


def _zero(value: Any) -> bool:
    """Whether an int-or-percent is written as zero (``0``, ``"0%"``)."""
    return scaled(value, 100, round_up=False) == 0


def _rolling(w: Workload, ctx: Context, strategy: dict[str, Any], count: int) -> Iterator[Finding]:
    ru = as_dict(strategy.get("rollingUpdate"))
    base = ("spec", "strategy", "rollingUpdate")
    max_unavailable, max_surge = ru.get("maxUnavailable", "25%"), ru.get("maxSurge", "25%")
    if _zero(max_unavailable) and _zero(max_surge):
        yield hit("rollout", w, f"maxUnavailable {max_unavailable} and maxSurge {max_surge} are "
                  "both 0: the rollout cannot progress (Kubernetes rejects it)", base,
                  severity=Severity.ERROR)
        return
    unavailable = scaled(max_unavailable, count, round_up=False)
    surge = scaled(max_surge, count, round_up=True)
    if unavailable == 0 and surge == 0:
        unavailable = 1  # both round to 0: the Deployment controller lets one pod go
    if unavailable is not None and unavailable >= count:
        yield hit("rollout", w, f"maxUnavailable {max_unavailable} with {count} replica(s): a "
                  "rollout stops every old pod before a new one is ready, an outage as long as "
                  "the model load", (*base, "maxUnavailable") if "maxUnavailable" in ru else base,
                  fix="set maxUnavailable: 0 and maxSurge: 1 (with a free GPU), or run more "
                  "replicas")
    if surge and w.is_gpu:
        gpus = w.serving.gpu_count() or 1
        yield hit("rollout", w, f"maxSurge {max_surge} starts {surge} extra pod(s) "
                  f"during a rollout, each needing {gpus} free GPU(s): without spare GPU "
                  "capacity the new pod stays Pending and the rollout stalls",
                  (*base, "maxSurge"), severity=Severity.INFO,
                  fix="keep a spare GPU for rollouts, or use maxSurge: 0 with maxUnavailable: 1 "
                  "and at least 2 replicas")


@rule(
    "rollout",
    Severity.WARNING,
    "the Deployment's rollout strategy loses service or needs a free GPU",
    rationale="Each new pod needs the full model load before it is ready. With one replica, "
    "maxUnavailable > 0 (or Recreate) means no pod serves during that time; maxSurge > 0 means "
    "the new pod needs a GPU that the old one still holds.",
    fix="with one replica use maxUnavailable: 0 and maxSurge: 1 and keep a spare GPU; "
    "otherwise run 2+ replicas with maxUnavailable: 1 and maxSurge: 0",
)
def rollout(w: Workload, ctx: Context) -> Iterator[Finding]:
    if w.kind != "Deployment":
        return
    strategy = as_dict(w.spec.get("strategy"))
    count = replicas(w, ctx).low
    if count == 0:
        ctx.note(f"rollout: {w.ref}: scaled to zero (replicas: 0): a rollout stops no serving "
                 "pod, its strategy is not judged")
        return
    if strategy.get("type", "RollingUpdate") == "Recreate":
        worst = ctx.measured.worst_startup_s if ctx.measured else None
        said = f" (measured: up to {worst:g}s)" if worst is not None else ""
        server = known_server(str(w.serving.data.get("image") or ""), w.serving.argv())
        load = "the new pod's start" if server is not None and server.lazy and worst is None \
            else "the model load"
        yield hit("rollout", w, f"strategy Recreate stops every pod before starting new ones: an "
                  f"outage as long as {load}{said}", ("spec", "strategy", "type"))
        return
    yield from _rolling(w, ctx, strategy, count)


def _service_ports(w: Workload, svc: K8sObject) -> Iterator[tuple[int, Any, int | None]]:
    for i, p in enumerate(as_list(as_dict(svc.data.get("spec")).get("ports"))):
        if not isinstance(p, dict):
            continue
        target = p.get("targetPort", p.get("port"))
        numbers = [c.port_number(target) for c in (w.serving, *w.containers)]
        yield i, target, next((n for n in numbers if n is not None), None)


@rule(
    "service-port",
    Severity.WARNING,
    "a Service selecting the pods does not reach the port the experiment served on",
    rationale="Probes and measurements used one port; a Service whose targetPort is another "
    "one, or a port name no container declares, sends requests nowhere.",
    fix="set the Service's targetPort to the serving port (or to the name of that "
    "containerPort)",
)
def service_port(w: Workload, ctx: Context) -> Iterator[Finding]:
    if not w.serves:
        return
    m = ctx.measured
    for svc in ctx.inventory.services:
        spec = as_dict(svc.data.get("spec"))
        if not svc.same_namespace(w.obj) or not service_selects(spec.get("selector"), w.pod_labels):
            continue
        reached: list[int] = []
        for i, target, number in _service_ports(w, svc):
            if number is None:
                yield hit("service-port", w, f"targetPort {target!r} is not a port of any "
                          "container", ("spec", "ports", i, "targetPort"), at=svc)
            else:
                reached.append(number)
        if m and m.port and reached and m.port not in reached:
            yield hit("service-port", w, f"{svc.ref} reaches port(s) "
                      f"{', '.join(map(str, reached))}, not {m.port} where the experiment served",
                      ("spec", "ports"), at=svc)
