"""Read multi-document Kubernetes YAML (plain, ``helm template`` output, ``kind: List``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from servelab.errors import InputError, UsageError
from servelab.k8s.kinds import (
    PLAIN,
    READ_KINDS,
    Index,
    PodTemplate,
    api_group,
    base_part,
    dig,
    missing,
    pod_templates,
    reads,
    runs_no_pods,
)
from servelab.k8s.model import (
    Container,
    Inventory,
    K8sObject,
    Source,
    Workload,
    as_dict,
    json_path,
)
from servelab.k8s.servers import gpu_server
from servelab.yamlsafe import Document, JsonPath, load_documents, read_text

RUNTIMES = ("ServingRuntime", "ClusterServingRuntime")

#: The kinds whose pods are read, for messages.
READ_KINDS_TEXT = ", ".join([*PLAIN, *(k for kinds in READ_KINDS.values() for k in kinds
                                       if k != "Service"), "Knative Service"])

STDIN = "-"


def unread_refs(inv: Inventory) -> list[str]:
    """``Kind/name (apiVersion)`` of each object whose kind k8s-check cannot read."""
    return [f"{o.ref} ({o.api_version})" for o in inv.unread]


def _walk(root: Path, skipped: list[str]) -> list[Path]:
    """The ``*.yaml``/``*.yml`` files under *root*, symbolic links not followed out of it: a
    link (file or folder) whose target is outside *root* is left out and named in *skipped*
    (a repository's manifests never reach files elsewhere on the machine); folder links are
    not descended (what they point to inside *root* is walked anyway)."""
    top = root.resolve()

    def inside(q: Path) -> bool:
        try:
            return q.resolve().is_relative_to(top)
        except (OSError, RuntimeError):  # a link loop
            return False

    found: list[Path] = []
    for here, dirs, files in os.walk(root, followlinks=False):
        for name in sorted([*dirs, *files]):
            q = Path(here) / name
            if q.is_symlink() and not inside(q) and (
                    name in dirs or q.suffix in {".yaml", ".yml"}):
                skipped.append(f"{q} -> {q.readlink()}")
        found += [q for name in files if (q := Path(here) / name).suffix in {".yaml", ".yml"}
                  and not (q.is_symlink() and not inside(q)) and q.is_file()]
    return sorted(found)


def expand_paths(paths: Sequence[str | Path], skipped: list[str] | None = None) -> list[str]:
    """Files to read: files as given, ``*.yaml``/``*.yml`` under directories (no symbolic link
    followed out of the directory: those go to *skipped*), ``-`` for stdin."""
    out: list[str] = []
    for raw in paths:
        p = Path(raw)
        if str(raw) != STDIN and p.is_dir():
            found = _walk(p, skipped if skipped is not None else [])
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
    text = read_text(Path(name), what="manifest", stdin_ok=True)
    if name == STDIN:
        name = "<stdin>"
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


def workloads_of(obj: K8sObject, serving_container: str | None, index: Index) -> list[Workload]:
    """One workload per pod template of *obj* (none for a kind without pods or not read)."""
    return [_workload(obj, t, serving_container) for t in pod_templates(obj, index)]


def _workload(obj: K8sObject, t: PodTemplate, serving_container: str | None) -> Workload:
    pod = t.pod if t.pod is not None else dig(obj.data, t.pod_path)
    if not isinstance(pod, dict):
        raise _bad(obj, t.pod_path, f"{json_path(t.pod_path)} is missing or not a mapping")
    containers = _template_containers(obj, t, pod)
    inits = _containers(obj, pod, t.pod_path, "initContainers")
    serving = pick_serving(containers, serving_container)
    return Workload(obj, t.pod_path, pod, t.labels, containers, inits, serving, part=t.part,
                    takes_traffic=t.takes_traffic, template=t.template,
                    scheduling_from=t.scheduling_from, model_uri=t.model_uri,
                    model_paths=t.model_paths, base=t.base, origins=t.pod_origins,
                    known_gpu_server=_known_gpu_server(obj, t, serving))


def _known_gpu_server(obj: K8sObject, t: PodTemplate, serving: Container) -> str | None:
    """The known GPU server a ServingRuntime runs (see servelab.k8s.servers), else None."""
    if obj.kind not in RUNTIMES or not t.template:
        return None
    found = gpu_server(str(serving.data.get("image") or ""), serving.argv())
    return found.name if found else None


def _template_containers(obj: K8sObject, t: PodTemplate, pod: dict[str, Any]) -> list[Container]:
    """The pod's containers, the lead one first; those the template leaves out are inherited."""
    optional = t.containers_optional and not pod.get("containers")
    listed = [] if optional else _containers(obj, pod, t.pod_path, "containers")
    if t.lead is not None:
        path, data = t.lead
        name = str(data.get("name") or "") if t.lead_origins else ""
        listed.insert(0, Container(name or t.inheriting or "kserve-container", data, path,
                                   origins=t.lead_origins))
    if t.base is not None:  # a runtime's other containers, added to the merged pod
        listed += [Container(str(data.get("name") or f"#{path[-1]}"), data, path,
                             origins={(): (t.base, path)}) for path, data in t.extra]
    if not listed:  # the whole container comes from a runtime or base config
        listed = [Container(t.inheriting or "main", {}, (*t.pod_path, "containers", 0))]
    heirs = [listed[0]] if t.lead is not None or t.inheriting is None else [
        c for c in listed if c.name == t.inheriting]
    for c in heirs:
        c.inherited = {g: src for g, src in t.inherit.items() if missing(c.data, g)}
    return listed


def _sort(inv: Inventory, obj: K8sObject, serving_container: str | None, index: Index) -> None:
    workloads = workloads_of(obj, serving_container, index)
    if workloads:
        inv.workloads += workloads
    elif obj.kind == "PodDisruptionBudget":
        inv.pdbs.append(obj)
    elif obj.kind == "PriorityClass":
        inv.priority_classes.append(obj)
    elif obj.kind == "Service":
        inv.services.append(obj)
    elif obj.kind == "ConfigMap":
        inv.configmaps.append(obj)
    elif obj.kind == "Secret" and api_group(obj) == "":
        inv.secrets.append(obj)
    elif obj.kind == "HorizontalPodAutoscaler":
        inv.hpas.append(obj)
    elif runs_no_pods(obj) or reads(obj):
        inv.ignored.append(obj)
    else:
        inv.unread.append(obj)


def _link(inv: Inventory) -> None:
    """Templates used by GPU workloads count as GPU workloads; a runtime judged merged with
    the InferenceServices that use it is not judged alone."""
    for w in inv.workloads:
        if w.base is None or w.template:
            continue
        for t in inv.workloads:
            if t.obj is not w.base or t.part != base_part(w.part):
                continue
            if w.origins:
                t.merged_into.append(w.ref)
            elif w.is_gpu:
                t.gpu_users.append(w.ref)


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
    index = Index(objects)
    for obj in objects:
        _sort(inv, obj, serving_container, index)
    _link(inv)
    inv.duplicates = _duplicates(objects)
    if not inv.workloads and (inv.unread or not objects):
        unread = f" (kinds it cannot read: {', '.join(unread_refs(inv))})" if inv.unread else ""
        raise InputError(
            "no workload found: none of the manifests is a kind whose pods k8s-check reads"
            + unread,
            file=inv.files[0] if len(inv.files) == 1 else None,
            hint="pass the manifests of the serving workload (" + READ_KINDS_TEXT + "), "
            "together with its PodDisruptionBudget, PriorityClass and Service if you have them; "
            "for another kind, check the pods it creates (kubectl get pod NAME -o yaml)",
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
