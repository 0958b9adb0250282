"""Read multi-document Kubernetes YAML (plain, ``helm template`` output, ``kind: List``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from servelab.errors import InputError, UsageError
from servelab.k8s.model import (
    Container,
    Inventory,
    K8sObject,
    Source,
    Workload,
    as_dict,
    json_path,
)
from servelab.yamlsafe import Document, JsonPath, load_documents, read_text

#: Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: dict[str, JsonPath] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

STDIN = "-"


def expand_paths(paths: Sequence[str | Path]) -> list[str]:
    """Files to read: files as given, ``*.yaml``/``*.yml`` under directories, ``-`` for stdin."""
    out: list[str] = []
    for raw in paths:
        p = Path(raw)
        if str(raw) != STDIN and p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.suffix in {".yaml", ".yml"} and q.is_file())
            if not found:
                raise InputError("directory holds no .yaml or .yml file", file=str(p))
            out += [str(q) for q in found]
        else:
            out.append(str(raw))
    if not out:
        raise UsageError("no manifest given", hint="pass one or more YAML files, or - for stdin")
    return out


def read_documents(name: str) -> tuple[str, list[Document]]:
    """The name to show for *name* and its documents."""
    if name == STDIN:
        text = sys.stdin.read()
        name = "<stdin>"
    else:
        text = read_text(Path(name), what="manifest")
    docs = load_documents(text, name)
    if not docs:
        raise InputError(
            "no YAML document (the file is empty or only comments)",
            file=name,
            hint="pass the rendered manifests (e.g. the output of helm template or kustomize "
            "build)",
        )
    return name, docs


def objects_of(name: str, doc: Document) -> Iterator[K8sObject]:
    """The Kubernetes objects of one document (the items, for ``kind: List``)."""
    data = doc.data
    items = data.get("items") if isinstance(data, dict) and data.get("kind") == "List" else None
    if isinstance(items, list):
        for i, item in enumerate(items):
            yield _object(name, doc, item, ("items", i))
        return
    yield _object(name, doc, data, ())


def _object(name: str, doc: Document, data: Any, base: JsonPath) -> K8sObject:
    if not isinstance(data, dict) or not _is_k8s(data):
        raise InputError(
            "not a Kubernetes object: a manifest needs string 'apiVersion' and 'kind' fields",
            file=name,
            line=doc.position(base).line,
            hint="pass Kubernetes manifests (rendered, e.g. by helm template), not values files "
            "or other YAML",
        )
    kind, api = str(data["kind"]), str(data["apiVersion"])
    source = Source(name, doc, base)
    meta = as_dict(data.get("metadata"))
    obj_name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    ns = meta.get("namespace")
    return K8sObject(kind, api, str(obj_name), str(ns) if ns else None, data, source)


def _is_k8s(data: dict[str, Any]) -> bool:
    kind, api = data.get("kind"), data.get("apiVersion")
    return isinstance(kind, str) and isinstance(api, str) and bool(kind) and bool(api)


def _bad(obj: K8sObject, path: JsonPath, what: str) -> InputError:
    pos = obj.locate(path)
    return InputError(
        f"{obj.ref}: {what}",
        file=obj.source.file,
        line=pos.line,
        column=pos.column,
        hint="Kubernetes rejects this object too; render and validate it (kubectl apply "
        "--dry-run=server) before checking it",
    )


def _dig(data: Any, path: JsonPath) -> Any:
    for part in path:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _containers(
    obj: K8sObject, pod: dict[str, Any], pod_path: JsonPath, key: str
) -> list[Container]:
    raw = pod.get(key)
    if raw is None and key == "initContainers":
        return []
    if not isinstance(raw, list) or (key == "containers" and not raw):
        raise _bad(obj, (*pod_path, key), f"{json_path((*pod_path, key))} must be a non-empty list")
    out: list[Container] = []
    for i, c in enumerate(raw):
        path = (*pod_path, key, i)
        if not isinstance(c, dict):
            raise _bad(obj, path, f"{json_path(path)} is not a mapping")
        out.append(Container(str(c.get("name") or f"#{i}"), c, path, init=key == "initContainers"))
    return out


def pick_serving(containers: list[Container], wanted: str | None) -> Container:
    """The container named *wanted*, else the first one with a GPU, else the first one."""
    if wanted:
        for c in containers:
            if c.name == wanted:
                return c
    for c in containers:
        if c.gpu_resources():
            return c
    return containers[0]


def workload_of(obj: K8sObject, serving_container: str | None) -> Workload | None:
    pod_path = POD_SPEC_PATHS.get(obj.kind)
    if pod_path is None:
        return None
    pod = _dig(obj.data, pod_path)
    if not isinstance(pod, dict):
        raise _bad(obj, pod_path, f"{json_path(pod_path)} is missing or not a mapping")
    template = () if obj.kind == "Pod" else pod_path[:-1]
    labels_path = (*template, "metadata", "labels")
    labels = {str(k): str(v) for k, v in as_dict(_dig(obj.data, labels_path)).items()}
    containers = _containers(obj, pod, pod_path, "containers")
    inits = _containers(obj, pod, pod_path, "initContainers")
    serving = pick_serving(containers, serving_container)
    return Workload(obj, pod_path, pod, labels, containers, inits, serving)


def _sort(inv: Inventory, obj: K8sObject, serving_container: str | None) -> None:
    workload = workload_of(obj, serving_container)
    if workload is not None:
        inv.workloads.append(workload)
    elif obj.kind == "PodDisruptionBudget":
        inv.pdbs.append(obj)
    elif obj.kind == "PriorityClass":
        inv.priority_classes.append(obj)
    elif obj.kind == "Service":
        inv.services.append(obj)
    else:
        inv.ignored.append(obj)


def _where(obj: K8sObject) -> str:
    return f"{obj.source.file}:{obj.locate(()).line}"


def _duplicates(objects: list[K8sObject]) -> list[str]:
    seen: dict[tuple[str, str | None, str], list[K8sObject]] = {}
    for obj in objects:
        seen.setdefault((obj.kind, obj.namespace, obj.name), []).append(obj)
    return [f"{group[0].ref} ({', '.join(_where(o) for o in group)})"
            for group in seen.values() if len(group) > 1]


def load_inventory(paths: Iterable[str], serving_container: str | None = None) -> Inventory:
    """Read every file; bad YAML or a non-Kubernetes document raises InputError (exit 2)."""
    inv = Inventory()
    objects: list[K8sObject] = []
    for name in paths:
        shown, docs = read_documents(name)
        inv.files.append(shown)
        for doc in docs:
            objects += objects_of(shown, doc)
    for obj in objects:
        _sort(inv, obj, serving_container)
    inv.duplicates = _duplicates(objects)
    if not inv.workloads:
        raise InputError(
            "no workload found: none of the manifests is a Deployment, StatefulSet, Pod, Job, "
            "CronJob, ReplicaSet or DaemonSet",
            file=inv.files[0] if len(inv.files) == 1 else None,
            hint="pass the manifests of the serving workload, together with its "
            "PodDisruptionBudget, PriorityClass and Service if you have them",
        )
    if serving_container and not any(
        c.name == serving_container for w in inv.workloads for c in w.containers
    ):
        raise UsageError(
            f"no container named {serving_container!r} in any workload",
            hint="check --container; the names found are: "
            + ", ".join(sorted({c.name for w in inv.workloads for c in w.containers})),
        )
    return inv
