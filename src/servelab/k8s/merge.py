"""KServe's merge of an InferenceService component with its ServingRuntime, with the source
of every field.

KServe builds the predictor's pod from two objects: the runtime's container (the one named
``kserve-container``, else the first) is the base, and the InferenceService's model spec is a
strategic merge patch on it. Maps (``securityContext``, ``resources``, the probes) merge key by
key, the predictor's values winning; ``env`` merges by ``name``, ``ports`` by
``containerPort``, ``volumeMounts`` by ``mountPath``; ``args`` are the runtime's followed by
the predictor's; any other list (``command``) and any scalar (``image``) is the predictor's
when it sets one. The pod merges the runtime's ``nodeSelector``, ``affinity``,
``tolerations`` (a list without a merge key: the predictor's replaces it), ``volumes`` (by
``name``, a volume the predictor names replacing the runtime's whole) and a few other pod
fields the same way.

Each merged field remembers where it was written (:class:`Origins`), so that a finding on
the merged pod points at the runtime's line or the InferenceService's line, whichever holds
the field.
"""

from __future__ import annotations

from typing import Any

from servelab.k8s.model import K8sObject, Origins, as_dict, as_list
from servelab.yamlsafe import JsonPath

#: Lists merged item by item (strategic merge patch keys of the Kubernetes API).
MERGE_KEYS = {"env": "name", "ports": "containerPort", "volumeMounts": "mountPath",
              "volumeDevices": "devicePath", "volumes": "name"}
#: Keyed lists whose items the patch replaces whole ("retainKeys": a volume's source is the
#: patch's, never a mix of two sources).
RETAIN_KEYS = {"volumes"}
#: Lists that KServe concatenates (runtime first) instead of replacing.
CONCATENATED = {"args"}
#: The runtime's container that the model spec completes, and its workers' one.
TARGET_CONTAINER = "kserve-container"
WORKER_CONTAINER = "worker-container"
#: Pod fields a ServingRuntime gives the pods of the InferenceServices that use it.
RUNTIME_POD_FIELDS = ("nodeSelector", "affinity", "tolerations", "volumes", "imagePullSecrets",
                      "priorityClassName", "securityContext", "hostIPC", "hostNetwork",
                      "hostPID", "runtimeClassName", "schedulerName")

Loc = tuple[K8sObject, JsonPath]


class _Merge:
    """One merge: the result is built while the origins of its fields are recorded."""

    def __init__(self) -> None:
        self.origins: dict[JsonPath, Loc] = {}

    def value(self, base: Any, base_at: Loc | None, over: Any, over_at: Loc | None,
              rel: JsonPath) -> Any:
        """*over* merged onto *base*; ``None`` on either side means absent."""
        at = over_at if over is not None else base_at
        if at is not None:
            self.origins[rel] = at
        if isinstance(base, dict) and isinstance(over, dict):
            return self._mapping(base, base_at, over, over_at, rel)
        if isinstance(base, list) and isinstance(over, list) and rel:
            key = rel[-1]
            if key in CONCATENATED:
                return self._concat(base, base_at, over, over_at, rel)
            if isinstance(key, str) and MERGE_KEYS.get(key):
                return self._keyed((base, base_at), (over, over_at), rel, MERGE_KEYS[key])
        chosen, where = (over, over_at) if over is not None else (base, base_at)
        if where is not None:
            self._record(chosen, where, rel)
        return chosen

    def _record(self, data: Any, at: Loc, rel: JsonPath) -> None:
        """Every node under *data* comes from *at*."""
        self.origins[rel] = at
        items = data.items() if isinstance(data, dict) else enumerate(
            data if isinstance(data, list) else ())
        for k, v in items:
            self._record(v, (at[0], (*at[1], k)), (*rel, k))

    def _mapping(self, base: dict[str, Any], base_at: Loc | None, over: dict[str, Any],
                 over_at: Loc | None, rel: JsonPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in dict.fromkeys([*base, *over]):
            out[k] = self.value(base.get(k), _sub(base_at, k), over.get(k), _sub(over_at, k),
                                (*rel, k))
        return out

    def _concat(self, base: list[Any], base_at: Loc | None, over: list[Any],
                over_at: Loc | None, rel: JsonPath) -> list[Any]:
        out = [*base, *over]
        for i, v in enumerate(base):
            if base_at is not None:
                self._record(v, (base_at[0], (*base_at[1], i)), (*rel, i))
        for j, v in enumerate(over):
            if over_at is not None:
                self._record(v, (over_at[0], (*over_at[1], j)), (*rel, len(base) + j))
        return out

    def _keyed(self, base_side: tuple[list[Any], Loc | None],
               over_side: tuple[list[Any], Loc | None], rel: JsonPath, key: str) -> list[Any]:
        """Items with the same *key* merged, the base's order first, the new ones after."""
        (base, base_at), (over, over_at) = base_side, over_side
        first = _first_by_key(over, key)
        out: list[Any] = []
        used: set[int] = set()
        whole = rel[-1] in RETAIN_KEYS
        for i, item in enumerate(base):
            j = _lookup(first, as_dict(item).get(key))
            if j is not None:
                used.add(j)
            kept = None if whole and j is not None else item
            out.append(self.value(kept, _sub(base_at, i), over[j] if j is not None else None,
                                  _sub(over_at, j) if j is not None else None,
                                  (*rel, len(out))))
        for j, item in enumerate(over):
            if j not in used:
                out.append(self.value(None, None, item, _sub(over_at, j), (*rel, len(out))))
        return out


def _first_by_key(items: list[Any], key: str) -> dict[Any, int]:
    """Merge-key value -> index of the first item with it: one pass, so that a merge of n base
    items onto m patch items costs n + m lookups, not n x m scans. A key value that is a
    mapping or a list (no valid Kubernetes object has one) matches nothing."""
    first: dict[Any, int] = {}
    for j, item in enumerate(items):
        value = as_dict(item).get(key)
        try:
            first.setdefault(value, j)
        except TypeError:
            continue
    return first


def _lookup(first: dict[Any, int], value: Any) -> int | None:
    try:
        return first.get(value)
    except TypeError:
        return None


def _sub(at: Loc | None, key: str | int | None) -> Loc | None:
    return None if at is None or key is None else (at[0], (*at[1], key))


#: Where a runtime keeps the pod its main part and its workers part are built from, and the
#: name of the container a model spec (or an InferenceService's workerSpec) completes.
PARTS: dict[str | None, tuple[JsonPath, str]] = {
    None: (("spec",), TARGET_CONTAINER),
    "workers": (("spec", "workerSpec"), WORKER_CONTAINER),
}


def _spec(runtime: K8sObject, part: str | None) -> dict[str, Any]:
    data: Any = runtime.data
    for key in PARTS[part][0]:
        data = as_dict(data).get(str(key))
    return as_dict(data)


def target_index(runtime: K8sObject, part: str | None = None) -> int | None:
    """The index of the runtime container a model spec completes: the one named
    ``kserve-container`` (``worker-container`` for the workers), else the first; None when
    the runtime has none."""
    containers = [as_dict(c) for c in as_list(_spec(runtime, part).get("containers"))]
    if not containers:
        return None
    names = [c.get("name") for c in containers]
    name = PARTS[part][1]
    return names.index(name) if name in names else 0


def merge_container(runtime: K8sObject, index: int, isvc: K8sObject, path: JsonPath,
                    data: dict[str, Any], *,
                    part: str | None = None) -> tuple[dict[str, Any], Origins]:
    """The runtime's container *index* (of its main pod, or of its *part* "workers") with the
    model spec *data* (at *path* of *isvc*) merged onto it, as KServe does; origins relative
    to the container."""
    rt_path: JsonPath = (*PARTS[part][0], "containers", index)
    base = as_dict(as_list(_spec(runtime, part).get("containers"))[index])
    m = _Merge()
    merged = m.value(base, (runtime, rt_path), data, (isvc, path), ())
    if not merged.get("name"):
        merged["name"] = base.get("name") or PARTS[part][1]
    # a field neither side sets is reported at the runtime's container, where the runtime's
    # other InferenceServices get it too
    m.origins[()] = (runtime, rt_path)
    return merged, m.origins


def merge_pod(runtime: K8sObject, isvc: K8sObject, pod_path: JsonPath,
              own: dict[str, Any], *, part: str | None = None) -> tuple[dict[str, Any], Origins]:
    """The InferenceService component's pod fields with the runtime's merged under them."""
    spec = _spec(runtime, part)
    base = {k: spec[k] for k in RUNTIME_POD_FIELDS if k in spec}
    m = _Merge()
    merged = m.value(base, (runtime, PARTS[part][0]), own, (isvc, pod_path), ())
    return merged, m.origins


def sidecars(runtime: K8sObject, index: int) -> list[tuple[int, dict[str, Any]]]:
    """The runtime's other containers: KServe adds them to the pod as they are."""
    containers = as_list(as_dict(runtime.data.get("spec")).get("containers"))
    return [(i, c) for i, c in enumerate(containers) if i != index and isinstance(c, dict)]
