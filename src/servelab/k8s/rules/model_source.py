"""model-mount: where the weights come from, and that the server cannot change them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from servelab.findings import Finding, Severity
from servelab.k8s.model import Container, Workload, as_dict
from servelab.k8s.registry import Context, hit, rule
from servelab.k8s.rules.pod import covers, env_path, is_read_only_source
from servelab.yamlsafe import JsonPath

#: Command-line flags whose value names the model (vLLM, SGLang, TGI, Triton, TorchServe...).
MODEL_FLAGS = (
    "--model", "--model-path", "--model-dir", "--model-id", "--model-repository",
    "--model-store", "--model_name_or_path", "--checkpoint", "--weights",
)
MODEL_ENV = ("MODEL", "MODEL_PATH", "MODEL_DIR", "MODEL_ID", "MODEL_REPOSITORY", "HF_MODEL_ID")
CACHE_FLAGS = ("--download-dir", "--download_dir", "--huggingface-hub-cache")
CACHE_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE")
#: Volume names or mount paths that hold a model.
MODEL_NAME = re.compile(r"model|weight|checkpoint|ckpt", re.IGNORECASE)
#: Commands that download at run time.
DOWNLOAD = re.compile(
    r"huggingface-cli\s+download|\bhf\s+download|snapshot_download|hf_hub_download|\bwget\b|"
    r"\bcurl\b|\baws\s+s3\s+(cp|sync)\b|\bs5cmd\b|\bgsutil\b|\bgcloud\s+storage\s+cp\b|"
    r"\bazcopy\b|\brclone\s+(copy|sync)\b|\bgit\s+(clone|lfs)\b|\boras\s+pull\b"
)
#: Volume sources that outlive the pod: a cache filled once is reused by the next start.
PERSISTENT_SOURCES = ("persistentVolumeClaim", "hostPath", "csi", "nfs", "image")

ALTERNATIVES = (
    "put the weights on a PersistentVolumeClaim (ReadOnlyMany) filled once, in an OCI image "
    "volume (Kubernetes 1.31+), or in a node-local cache (hostPath or a CSI cache driver), "
    "and mount it readOnly"
)


def _flag_values(argv: list[str], flags: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                yield i + 1, argv[i + 1]
            elif arg.startswith(flag + "="):
                yield i, arg.split("=", 1)[1]


def model_refs(c: Container) -> list[tuple[int | str, str]]:
    """(argv index or env name, value) of every place that names the model."""
    argv = c.argv()
    refs: list[tuple[int | str, str]] = list(_flag_values(argv, MODEL_FLAGS))
    for i, arg in enumerate(argv[:-1]):
        if arg == "serve" and not argv[i + 1].startswith("-"):
            refs.append((i + 1, argv[i + 1]))  # vllm serve <model>
    env = c.env()
    refs += [(name, env[name]) for name in MODEL_ENV if env.get(name)]
    return refs


def _ref_path(c: Container, where: int | str) -> JsonPath:
    if isinstance(where, str):
        return env_path(c, where)
    command = c.data.get("command")
    n = len(command) if isinstance(command, list) else 0
    return (*c.path, "command", where) if where < n else (*c.path, "args", where - n)


def _persistent_cache(w: Workload, c: Container) -> bool:
    """A writable, persistent volume holds the download cache: only the first start downloads."""
    env = c.env()
    paths = [env[k] for k in CACHE_ENV if k in env] + [v for _, v in _flag_values(c.argv(),
                                                                                  CACHE_FLAGS)]
    for _, m in c.mounts:
        mount = str(m.get("mountPath", ""))
        volume = w.volume(m.get("name"))
        if not any(k in volume for k in PERSISTENT_SOURCES):
            continue
        if "/.cache" in mount or any(covers(mount, p) for p in paths):
            return True
    return False


def _init_downloads(w: Workload, serving: Container) -> Iterator[Finding]:
    shared = {m.get("name") for _, m in serving.mounts}
    for init in w.init_containers:
        text = " ".join(init.argv())
        if not DOWNLOAD.search(text):
            continue
        volumes = [w.volume(m.get("name")) for _, m in init.mounts if m.get("name") in shared]
        if any(k in v for v in volumes for k in PERSISTENT_SOURCES):
            continue
        yield hit("model-mount", w, f"init container {init.name!r} downloads the model at every "
                  "pod start (into a volume that dies with the pod): slow starts, and a "
                  "registry or hub outage stops scale-up", init.path, container=init,
                  fix=ALTERNATIVES)


def _model_mounts(c: Container, local: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """Mounts holding the model paths named on the command line, else mounts named like one."""
    if local:
        return [(i, m) for i, m in c.mounts
                if any(covers(str(m.get("mountPath", "")), p) for p in local)]
    return [(i, m) for i, m in c.mounts
            if MODEL_NAME.search(f"{m.get('name', '')} {m.get('mountPath', '')}")]


def _local(w: Workload, c: Container, local: list[str]) -> Iterator[Finding]:
    mounts = _model_mounts(c, local)
    if not mounts:
        said = f"model path {local[0]} is" if local else "the model is"
        yield hit("model-mount", w, f"{said} on no volume: it is baked into the image or "
                  "downloaded at start", (*c.path, "volumeMounts"), container=c, fix=ALTERNATIVES)
        return
    for i, m in mounts:
        if m.get("readOnly") is True or is_read_only_source(as_dict(w.volume(m.get("name")))):
            continue
        yield hit("model-mount", w, f"model volume {m.get('name')!r} at {m.get('mountPath')} is "
                  "mounted writable: the server could change the weights it was tested with",
                  (*c.path, "volumeMounts", i), container=c,
                  fix="set readOnly: true on the model's volumeMount")


@rule(
    "model-mount",
    Severity.WARNING,
    "the model volume is missing or writable, or the model is downloaded at every start",
    rationale="Weights belong outside the image and must not change under a running server. "
    "Downloading them at each start (an init container into an emptyDir, or the server pulling "
    "from a hub) makes every start as slow as the download and ties scale-up to the hub.",
    fix="mount the model from a PersistentVolumeClaim, an OCI image volume or a node-local "
    "cache, with readOnly: true",
)
def model_mount(w: Workload, ctx: Context) -> Iterator[Finding]:
    c = w.serving
    yield from _init_downloads(w, c)
    refs = model_refs(c)
    remote = [(where, v) for where, v in refs if not v.startswith("/")]
    if not remote:
        yield from _local(w, c, [v for _, v in refs])
        return
    if any(DOWNLOAD.search(" ".join(i.argv())) for i in w.init_containers):
        return
    if _persistent_cache(w, c):
        return
    where, value = remote[0]
    yield hit("model-mount", w, f"the server fetches model {value!r} from a hub or bucket at every "
              "start: no volume keeps a copy", _ref_path(c, where), container=c, fix=ALTERNATIVES)
