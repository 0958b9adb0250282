"""Ray's runtime environments, held as YAML in strings: a RayService's ``serveConfigV2``
(``applications[].runtime_env``, each deployment's ``ray_actor_options.runtime_env`` and Ray
Serve LLM's ``args.llm_configs[].runtime_env``) and a
RayJob's ``runtimeEnvYAML``. Ray applies them when the application or job starts: ``pip``,
``uv`` and ``conda`` install packages, ``working_dir`` and ``py_modules`` URLs download code,
``env_vars`` set the environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from servelab.errors import InputError
from servelab.k8s.model import K8sObject, as_dict, as_list
from servelab.k8s.script import field_line
from servelab.yamlsafe import Document, JsonPath, embedded_documents

#: Keys of a Serve application's ``args`` that name the model (vLLM apps, Ray Serve LLM).
MODEL_ARGS = {"model", "model_id", "model_source", "model_path", "model-path", "model-id"}


@dataclass(frozen=True)
class Embedded:
    """A YAML document held in a string field, with file lines for its values."""

    obj: K8sObject
    path: JsonPath
    text: str
    doc: Document

    def line(self, inner: JsonPath) -> int:
        """The file line of the key (or item) at *inner* of the embedded document."""
        return field_line(self.obj, self.path, self.text, self.doc.key_position(inner).line)


@dataclass(frozen=True)
class RuntimeEnv:
    """One runtime_env mapping, where it applies and where it is written."""

    data: dict[str, Any]
    where: str
    source: Embedded
    inner: JsonPath

    def line(self, key: str | None = None) -> int:
        return self.source.line((*self.inner, key) if key else self.inner)


def embedded(obj: K8sObject, path: JsonPath) -> Embedded | None:
    """The YAML document in the string at *path* of *obj* (None: absent or not YAML)."""
    data: Any = obj.data
    for part in path:
        data = as_dict(data).get(str(part))
    if not isinstance(data, str) or not data.strip():
        return None
    try:  # read once per object, its aliases counted against the file's cap
        docs = embedded_documents(obj.source.doc, (*obj.source.base, *path),
                                  f"{obj.source.file}: {obj.ref} {'.'.join(map(str, path))}")
    except InputError:
        return None
    return Embedded(obj, path, data, docs[0]) if docs else None


def env_field(obj: K8sObject) -> JsonPath:
    """Where *obj* (a RayService or RayJob) keeps its runtime environments."""
    return ("spec", "runtimeEnvYAML") if obj.kind == "RayJob" else ("spec", "serveConfigV2")


def unreadable(obj: K8sObject) -> bool:
    """Whether *obj* has a serveConfigV2 / runtimeEnvYAML string that is not YAML."""
    text = as_dict(obj.data.get("spec")).get(str(env_field(obj)[1]))
    return isinstance(text, str) and bool(text.strip()) and embedded(obj, env_field(obj)) is None


def why_unreadable(obj: K8sObject) -> str:
    """Why *obj*'s serveConfigV2 / runtimeEnvYAML was not read (after :func:`unreadable`):
    the reader's words, e.g. a YAML error or the file's alias cap reached."""
    got = obj.source.doc.embedded.get((*obj.source.base, *env_field(obj)))
    if not isinstance(got, InputError):
        return "not YAML"
    where = "".join(f":{n}" for n in (got.line, got.column) if n is not None)
    bare = got.message.removeprefix(f"{got.file}{where}: " if got.file else "")
    return bare.split(" (", 1)[0]


def runtime_envs(obj: K8sObject) -> list[RuntimeEnv]:
    """Every runtime_env of a RayService's serveConfigV2 or a RayJob's runtimeEnvYAML."""
    found = embedded(obj, env_field(obj))
    if found is None:
        return []
    if obj.kind == "RayJob":
        return [RuntimeEnv(as_dict(found.doc.data), "the job", found, ())]
    return list(_serve_envs(found))


def _serve_envs(serve: Embedded) -> Iterator[RuntimeEnv]:
    for i, item in enumerate(as_list(as_dict(serve.doc.data).get("applications"))):
        app = as_dict(item)
        name = f"application {app.get('name', i)!r}"
        if isinstance(app.get("runtime_env"), dict):
            yield RuntimeEnv(app["runtime_env"], name, serve, ("applications", i, "runtime_env"))
        for inner, env in _arg_envs(app.get("args"), ("applications", i, "args")):
            yield RuntimeEnv(env, f"{name} args.{_shown(inner[3:])}", serve, inner)
        for j, dep in enumerate(as_list(app.get("deployments"))):
            env = as_dict(as_dict(as_dict(dep).get("ray_actor_options")).get("runtime_env"))
            if env:
                yield RuntimeEnv(env, f"{name} deployment {as_dict(dep).get('name', j)!r}",
                                 serve, ("applications", i, "deployments", j,
                                         "ray_actor_options", "runtime_env"))


def _arg_envs(data: Any, path: JsonPath) -> Iterator[tuple[JsonPath, dict[str, Any]]]:
    """(path, mapping) of each runtime_env inside a Serve application's ``args``: Ray Serve
    LLM's ``llm_configs[].runtime_env`` (each model's replicas start with it)."""
    if isinstance(data, dict):
        for k, v in data.items():
            if str(k) == "runtime_env" and isinstance(v, dict):
                yield (*path, k), v
            else:
                yield from _arg_envs(v, (*path, k))
    elif isinstance(data, list):
        for n, v in enumerate(data):
            yield from _arg_envs(v, (*path, n))


def _shown(path: JsonPath) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def serve_model_args(obj: K8sObject) -> list[tuple[str, int]]:
    """(value, file line) of each Serve application argument that names a model."""
    serve = embedded(obj, ("spec", "serveConfigV2")) if obj.kind == "RayService" else None
    if serve is None:
        return []
    out: list[tuple[str, int]] = []
    for i, app in enumerate(as_list(as_dict(serve.doc.data).get("applications"))):
        out += [(v, serve.line(p)) for v, p in _model_values(as_dict(app).get("args"),
                                                              ("applications", i, "args"))]
        for j, dep in enumerate(as_list(as_dict(app).get("deployments"))):
            # a deployment's user_config (engine_args.model of a vLLM deployment)
            out += [(v, serve.line(p)) for v, p in _model_values(
                as_dict(dep).get("user_config"), ("applications", i, "deployments", j,
                                                  "user_config"))]
    return out


def serve_gpu_asks(obj: K8sObject) -> list[tuple[str, int]]:
    """(deployment, file line) of each Serve deployment of a RayService whose
    ``ray_actor_options.num_gpus`` is above 0: its replicas need a GPU in the cluster."""
    serve = embedded(obj, ("spec", "serveConfigV2")) if obj.kind == "RayService" else None
    if serve is None:
        return []
    out: list[tuple[str, int]] = []
    for i, app in enumerate(as_list(as_dict(serve.doc.data).get("applications"))):
        for j, dep in enumerate(as_list(as_dict(app).get("deployments"))):
            gpus = as_dict(as_dict(dep).get("ray_actor_options")).get("num_gpus")
            try:
                asks = float(gpus) > 0 if gpus is not None and not isinstance(gpus, bool) \
                    else False
            except (TypeError, ValueError):
                asks = False
            if asks:
                path = ("applications", i, "deployments", j, "ray_actor_options", "num_gpus")
                out.append((f"{as_dict(dep).get('name') or j} num_gpus {gpus}",
                            serve.line(path)))
    return out


def _model_values(data: Any, path: JsonPath) -> Iterator[tuple[str, JsonPath]]:
    if isinstance(data, dict):
        for k, v in data.items():
            if str(k) in MODEL_ARGS and isinstance(v, str):
                yield v, (*path, k)
            else:
                yield from _model_values(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _model_values(v, (*path, i))
