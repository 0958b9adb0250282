"""model-mount: where the weights come from, and that the server cannot change them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from servelab.findings import Finding, Severity
from servelab.k8s.checks import Context, hit, rule
from servelab.k8s.model import Container, K8sObject, Workload, as_dict, as_list
from servelab.k8s.rayenv import runtime_envs, serve_model_args
from servelab.k8s.roles import no_model
from servelab.k8s.rules.pod import covers, env_path, is_read_only_source
from servelab.k8s.script import HOOK_NOTE, Command, container_commands, env_values
from servelab.k8s.servers import default_cache, known_server
from servelab.lint.downloads import offline
from servelab.yamlsafe import JsonPath

#: Command-line flags whose value names the model (vLLM, SGLang, TGI, Triton, TorchServe,
#: KServe's Hugging Face server...).
MODEL_FLAGS = (
    "--model", "--model-path", "--model_path", "--model-dir", "--model-id", "--model_id",
    "--model-repository", "--model-store", "--model_name_or_path", "--checkpoint", "--weights",
    "--model_base_path", "--model-base-path",  # TensorFlow Serving
    "-hf", "-hfr", "--hf-repo", "--model-url", "-mu",  # llama.cpp: downloaded at start
)
MODEL_ENV = ("MODEL", "MODEL_PATH", "MODEL_DIR", "MODEL_ID", "MODEL_REPOSITORY", "HF_MODEL_ID",
             "LLAMA_ARG_HF_REPO", "LLAMA_ARG_MODEL_URL")
CACHE_FLAGS = ("--download-dir", "--download_dir", "--huggingface-hub-cache")
CACHE_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE",
             "NIM_CACHE_PATH", "OLLAMA_MODELS", "LLAMA_CACHE")
#: Volume names or mount paths that hold a model.
MODEL_NAME = re.compile(r"model|weight|checkpoint|ckpt", re.IGNORECASE)
#: Programs (and subcommands) that download a model or other artifacts.
FETCHERS: dict[str, tuple[str, ...]] = {
    "huggingface-cli": ("download",), "hf": ("download",), "aws": ("s3",), "s5cmd": ("cp", "sync"),
    "gsutil": ("cp", "rsync"), "gcloud": ("storage",), "azcopy": ("copy", "cp", "sync"),
    "rclone": ("copy", "sync"), "git": ("clone", "lfs"), "oras": ("pull",),
    "ollama": ("pull", "run"), "wget": (), "curl": (),
}
#: ``python -m <module>`` modules named like a model downloader (``mlops.downloader``,
#: ``kserve.storage``, ``pkg.initializers.model``)
DOWNLOADER_MODULE = re.compile(r"download|initiali[sz]er|(^|\.)storage(\.|$)|fetch|puller",
                               re.IGNORECASE)
#: flags of such a module (and of an init container's args) that name the model's source
SOURCE_FLAGS = ("--model-uri", "--model_uri", "--storage-uri", "--storage_uri", "--uri",
                "--src", "--source", "--repo-id", "--repo_id", "--model-id", "--model_id",
                "--model", "--model-name", "--model_name")
#: images of init containers that download what their args name (KServe's and Kubeflow's)
INITIALIZER_IMAGE = re.compile(r"storage-initiali[sz]er|model-initiali[sz]er|model-downloader",
                               re.IGNORECASE)
#: Volume sources that outlive the pod: a cache filled once is reused by the next start. A
#: generic ephemeral volume (``ephemeral.volumeClaimTemplate``) is a claim deleted with its pod:
#: not one of them.
PERSISTENT_SOURCES = ("persistentVolumeClaim", "hostPath", "csi", "nfs", "image")
#: URI schemes whose model is downloaded at every start (KServe's storage initializer).
DOWNLOADED_SCHEMES = ("hf", "s3", "gs", "http", "https", "azure", "abfs", "abfss", "wasbs")
#: Servers whose /mnt/models is filled by KServe (the storageUri is judged instead).
LOCALHOST = re.compile(r"^(https?://)?(localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])([:/]|$)")

ALTERNATIVES = (
    "put the weights on a PersistentVolumeClaim (ReadOnlyMany) filled once, in an OCI image "
    "volume (Kubernetes 1.31+), or in a node-local cache (hostPath or a CSI cache driver), "
    "and mount it readOnly"
)
URI_FIX = (
    "load the model once instead of at every start: storageUri: pvc://<claim>/<path> (a PVC "
    "filled by a Job) or oci://<registry>/<model-image> (a modelcar, cached per node)"
)


@dataclass(frozen=True)
class ModelRef:
    """A place that names the model: its value (variables resolved) and where it is written."""

    value: str
    path: JsonPath
    obj: K8sObject | None = None
    line: int | None = None
    #: Where it was found when not in the field itself (a script inside the image)
    note: str = ""


def _flag_values(argv: list[str] | tuple[str, ...],
                 flags: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                yield i + 1, argv[i + 1]
            elif arg.startswith(flag + "="):
                yield i, arg.split("=", 1)[1]


def _served(words: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """``vllm serve MODEL``, ``trtllm-serve MODEL``, ``lmdeploy serve api_server MODEL``."""
    for i, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        skip = {"vllm": ("serve",), "lmdeploy": ("serve", "api_server"), "trtllm-serve": ()}.get(
            name)
        at = i + 1 + len(skip) if skip is not None else len(words)
        if skip is not None and words[i + 1:at] == skip and at < len(words) and not words[
                at].startswith("-"):
            yield at, words[at]


def _command_refs(cmd: Command) -> Iterator[ModelRef]:
    for i, value in [*_flag_values(cmd.words, MODEL_FLAGS), *_served(cmd.words)]:
        path, line = cmd.where(i)
        yield ModelRef(value, path, cmd.obj, line, cmd.note)


def _entrypoint_model(w: Workload, c: Container) -> list[ModelRef]:
    """vLLM's image runs ``vllm serve`` as its ENTRYPOINT: with no ``command``, a first
    ``args`` word that is no flag is the model (``args: [org/model, --port=8000]``)."""
    args = as_list(c.data.get("args"))
    server = known_server(str(c.data.get("image") or ""), [])
    if "command" in c.data or not args or server is None or server.name != "vLLM":
        return []
    first = str(args[0])
    if first.startswith("-") or first in ("serve", "vllm") or " " in first:
        return []
    return [ModelRef(first, (*c.path, "args", 0))]


def model_refs(w: Workload, c: Container, ctx: Context) -> list[ModelRef]:
    """Every place that names the model the container loads, variables resolved."""
    refs = [r for cmd in container_commands(w, c, ctx.inventory) for r in _command_refs(cmd)]
    refs += _entrypoint_model(w, c)
    env = env_values(w, c, ctx.inventory)
    refs += [ModelRef(env[n], env_path(c, n)) for n in MODEL_ENV if env.get(n)]
    if c is w.serving and w.kind == "RayService" and ctx.leads(w):
        refs += [ModelRef(v, ("spec", "serveConfigV2"), w.obj, line)
                 for v, line in serve_model_args(w.obj)]
        refs += [ModelRef(str(e.data["env_vars"][n]), ("spec", "serveConfigV2"), w.obj,
                          e.source.line((*e.inner, "env_vars", n)))
                 for e in runtime_envs(w.obj) for n in MODEL_ENV
                 if as_dict(e.data.get("env_vars")).get(n)]
    return refs


def kind_of(value: str) -> str:
    """local, relative, mounted (pvc://), image (oci://), remote (a URL), hub (an id) or
    unresolved (a variable the manifests do not set)."""
    if "$" in value or "{{" in value:
        return "unresolved"
    if value.startswith("/"):
        return "local"
    if value.startswith(("./", "../", "~")):
        return "relative"
    scheme = value.split("://", 1)[0].lower() if "://" in value else ""
    if scheme:
        return {"pvc": "mounted", "oci": "image"}.get(scheme, "remote")
    # a hub id, or one with a quantization tag (llama.cpp's -hf org/model-GGUF:Q4_K_M), or
    # with a placeholder owner (<your-hf-user>/model): a hub repository either way
    return "hub" if re.fullmatch(r"[\w.-]+(/[\w.-]+)?|[\w.-]+/[\w.-]+:[\w.-]+|"
                                 r"<[\w .-]+>/[\w.-]+", value) else "unresolved"


def loads_model(w: Workload) -> bool:
    """A server or a GPU workload: not a CPU job such as a benchmark client (whose --model
    names the served model it queries)."""
    return w.serves or w.is_gpu or w.model_uri is not None


def _hub_source(words: tuple[str, ...] | list[str]) -> str | None:
    """The model source a downloader is given: a URI of a scheme downloaded at every start
    (hf://, s3://, ...), or a hub id or URL after a source flag (``--model-uri org/m``)."""
    for w in words:
        scheme = w.split("://", 1)[0].lower() if "://" in w else ""
        if scheme in DOWNLOADED_SCHEMES and not LOCALHOST.match(w):
            return w
    for _, value in _flag_values(words, SOURCE_FLAGS):
        if kind_of(value) in ("hub", "remote") and not LOCALHOST.match(value):
            return value
    return None


def _module_download(words: tuple[str, ...]) -> str | None:
    """``python -m <pkg>.downloader --model-uri <hub id>``: a downloader module given a
    model source, as written; else None."""
    if "-m" not in words or not re.fullmatch(r"python[\d.]*", words[0].rsplit("/", 1)[-1]):
        return None
    at = words.index("-m")
    module = words[at + 1] if at + 1 < len(words) else ""
    if not DOWNLOADER_MODULE.search(module) or _hub_source(words[at + 2:]) is None:
        return None
    return " ".join(words[:6]) + (" ..." if len(words) > 6 else "")


def initializer_fetch(c: Container) -> str | None:
    """An init container of a downloader image (KServe's storage-initializer) given no
    command, only args naming a model source: ``storage-initializer hf://org/m /mnt/models``."""
    image = str(c.data.get("image") or "")
    if "command" in c.data or not INITIALIZER_IMAGE.search(image):
        return None
    args = [str(a) for a in as_list(c.data.get("args"))]
    source = _hub_source(args)
    name = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    return f"{name} {source}" if source else None


def fetch_of(cmd: Command) -> str | None:
    """The download a command makes (a model, code or artifact), as written; else None."""
    subs = FETCHERS.get(cmd.program)
    words = cmd.words
    if subs is None:
        if (module := _module_download(words)) is not None:
            return module
        return "snapshot_download" if any("snapshot_download" in w for w in words) else None
    if subs and (len(words) < 2 or words[1] not in subs):
        return None
    if cmd.program in ("curl", "wget"):
        urls = [w for w in words[1:] if "://" in w]
        if not urls or all(LOCALHOST.match(u) or ".svc" in u for u in urls) or cmd.piped_to:
            return None
        if cmd.program == "curl" and not {"-o", "-O", "--output", "--remote-name"} & set(words):
            return None
    return " ".join(words[:4]) + (" ..." if len(words) > 4 else "")


def _target(cmd: Command) -> str | None:
    """The directory a download writes to, when its command line says."""
    for flag in ("--local-dir", "--cache-dir", "-P", "--directory-prefix", "-o", "-O"):
        for _, v in _flag_values(cmd.words, (flag,)):
            return v
    last = cmd.words[-1]
    return last if last.startswith("/") and cmd.program not in ("curl", "wget") else None


def _persistent(w: Workload, c: Container, path: str) -> bool:
    return any(covers(str(m.get("mountPath", "")), path)
               and any(k in w.volume(m.get("name")) for k in PERSISTENT_SOURCES)
               for _, m in c.mounts)


def _cache_paths(w: Workload, c: Container, ctx: Context) -> list[str]:
    env = env_values(w, c, ctx.inventory)
    paths = [env[k] for k in CACHE_ENV if k in env]
    for cmd in container_commands(w, c, ctx.inventory):
        paths += [v for _, v in _flag_values(cmd.words, CACHE_FLAGS)]
    image = str(c.data.get("image") or "")
    cache = default_cache(image, c.argv())  # the table of known servers (servelab.k8s.servers)
    return paths + ([cache] if cache else [])


def _persistent_cache(w: Workload, c: Container, ctx: Context) -> bool:
    """A persistent volume holds the download cache: only the first start downloads."""
    paths = _cache_paths(w, c, ctx)
    for _, m in c.mounts:
        mount = str(m.get("mountPath", ""))
        if not any(k in w.volume(m.get("name")) for k in PERSISTENT_SOURCES):
            continue
        if "/.cache" in mount or any(covers(mount, p) for p in paths):
            return True
    return False


def _revision(cmd: Command) -> str:
    if cmd.program in ("huggingface-cli", "hf") and "--revision" not in " ".join(cmd.words):
        return " (no --revision: whatever the repository holds at that moment)"
    return ""


def dies_with_pod(w: Workload, init: Container) -> bool:
    """Whether what *init* writes for the serving container is lost with the pod: no volume
    they share outlives it."""
    shared = {m.get("name") for _, m in w.serving.mounts}
    volumes = [w.volume(m.get("name")) for _, m in init.mounts if m.get("name") in shared]
    return not any(k in v for v in volumes for k in PERSISTENT_SOURCES)


def _init_downloads(w: Workload, ctx: Context) -> Iterator[Finding]:
    """One finding per init container that downloads into a volume that dies with the pod."""
    for init in w.init_containers:
        fetches = [cmd for cmd in container_commands(w, init, ctx.inventory) if fetch_of(cmd)]
        what = f"{fetch_of(fetches[0])}{_revision(fetches[0])}" if fetches else \
            initializer_fetch(init)
        if what is None or not dies_with_pod(w, init):
            continue
        message = (f"init container {init.name!r} downloads at every pod start ({what}) into "
                   "a volume that dies with the pod: slow starts, and a registry or hub outage "
                   "stops scale-up")
        if fetches:  # at the command that downloads
            yield hit("model-mount", w, message, fetches[0].path, container=init,
                      at=fetches[0].obj, line=fetches[0].line, fix=ALTERNATIVES)
        else:
            yield hit("model-mount", w, message, init.path, container=init, fix=ALTERNATIVES)


def _script_downloads(w: Workload, c: Container, ctx: Context) -> Iterator[Finding]:
    """The serving container's own start script downloads the model."""
    for cmd in container_commands(w, c, ctx.inventory):
        what = fetch_of(cmd)
        if what is None or (cmd.program in ("git", "curl", "wget")
                            and "huggingface.co" not in cmd.text):
            continue  # code and files: start-install's business
        target = _target(cmd)
        if _persistent(w, c, target) if target else _persistent_cache(w, c, ctx):
            continue
        where = f"into {target}, on no persistent volume" if target else "into a cache that " \
            "dies with the pod"
        who = "the postStart hook" if HOOK_NOTE in cmd.note else "the start command"
        yield hit("model-mount", w, f"{who} downloads the model at every start "
                  f"({what}{_revision(cmd)}){cmd.note.replace(HOOK_NOTE, '')} {where}", cmd.path,
                  container=c, at=cmd.obj, line=cmd.line, fix=ALTERNATIVES)


def _model_mounts(w: Workload, c: Container, local: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """Mounts holding the model paths named on the command line, else mounts named like one."""
    if local:
        return [(i, m) for i, m in c.mounts
                if any(covers(str(m.get("mountPath", "")), p) for p in local)]
    return [(i, m) for i, m in c.mounts
            if MODEL_NAME.search(f"{m.get('name', '')} {m.get('mountPath', '')}")
            and not is_read_only_source(w.volume(m.get("name")))]


def _filled_caches(w: Workload, c: Container, ctx: Context) -> list[str]:
    """The download caches the server fills (HUGGINGFACE_HUB_CACHE=/data, TGI's /data):
    writable by design, unless HF_HUB_OFFLINE=1 (or TRANSFORMERS_OFFLINE=1, as lint reads
    them) says it only reads them."""
    if offline(env_values(w, c, ctx.inventory)):
        return []
    return _cache_paths(w, c, ctx)


def _local(w: Workload, c: Container, local: list[str], fetched: bool,  # noqa: PLR0917
           self_fetched: bool, caches: Sequence[str] = ()) -> Iterator[Finding]:
    """Model paths on no volume, or on a writable one (unless the server's own start script
    downloads into it: then the download is the finding; nor a download cache the server
    fills, *caches*)."""
    provided = [p for p in local if any(covers(d, p) for d in w.model_paths)]
    local = [p for p in local if p not in provided]
    mounts = _model_mounts(w, c, local)
    if local and not mounts and not fetched:
        yield hit("model-mount", w, f"model path {local[0]} is on no volume: it is baked into "
                  "the image or downloaded at start", (*c.path, "volumeMounts"), container=c,
                  fix=ALTERNATIVES)
        return
    store = writable_store(w, c)
    for i, m in mounts:
        if local and not self_fetched and _unfilled(w, c, m) and not (
                store is not None and covers(str(m.get("mountPath", "")), store[1])) and not any(
                covers(str(m.get("mountPath", "")), p) for p in caches):
            yield hit("model-mount", w, f"model path {local[0]} is on the emptyDir "
                      f"{m.get('name')!r}, which nothing in the pod fills (no init container, "
                      "sidecar, start script or hook writes to it): the server starts without "
                      "the model", (*c.path, "volumeMounts", i), container=c, fix=ALTERNATIVES)
            continue
        if self_fetched or m.get("readOnly") is True or is_read_only_source(
                as_dict(w.volume(m.get("name")))):
            continue
        if store is not None and covers(str(m.get("mountPath", "")), store[1]):
            continue  # the server pulls into its store: writable by design (see _store)
        if any(covers(str(m.get("mountPath", "")), p) for p in caches) and not any(
                im.get("name") == m.get("name") for i in w.init_containers for _, im in i.mounts):
            continue  # the hub cache it fills itself (an init container's fill: read it only)
        yield hit("model-mount", w, f"model volume {m.get('name')!r} at {m.get('mountPath')} is "
                  "mounted writable: the server could change the weights it was tested with",
                  (*c.path, "volumeMounts", i), container=c,
                  fix="set readOnly: true on the model's volumeMount")


def _unfilled(w: Workload, c: Container, mount: dict[str, Any]) -> bool:
    """An emptyDir volume that no other container of the pod (an init container, a sidecar)
    mounts: it starts empty, and only the server itself could write to it."""
    name = mount.get("name")
    if "emptyDir" not in w.volume(name):
        return False
    return not any(m.get("name") == name for o in (*w.init_containers, *w.containers)
                   if o is not c for _, m in o.mounts)


def writable_store(w: Workload, c: Container) -> tuple[str, str] | None:
    """(server, path) of the model store a known server pulls into (Ollama's /root/.ollama, or
    where OLLAMA_MODELS moves it): it must be writable."""
    server = known_server(str(c.data.get("image") or ""), c.argv())
    if server is None or not server.store:
        return None
    env = c.env()
    return server.name, env.get(server.store_env) or server.store


def _store(w: Workload, c: Container, ctx: Context) -> None:
    """A store the server pulls into, on an emptyDir or no volume, when nothing in the manifest
    pulls at start (a pull at start is reported where it runs): users fill it at run time, so
    losing it with the pod is a choice, not a download at every start. Said as a note."""
    found = writable_store(w, c)
    if found is None:
        return
    name, path = found
    mount = next(((i, m) for i, m in c.mounts if covers(str(m.get("mountPath", "")), path)), None)
    if mount is not None and _persistent(w, c, path):
        return
    where = (f"an emptyDir (volume {mount[1].get('name')!r})" if mount is not None else
             "no volume (the container's own filesystem)")
    ctx.note(f"model-mount: {w.ref}: {name}'s model store {path} in container {c.name!r} is on "
             f"{where}, but nothing in the manifest pulls at start (no pull in the command, a "
             "postStart hook or an init container): models pulled at run time are lost with the "
             "pod; not reported. Keep the store on a PersistentVolumeClaim to keep them")


def _uri(w: Workload, ctx: Context) -> Iterator[Finding]:
    """KServe downloads a storageUri / model.uri at every start, unless it is a PVC or image."""
    if w.model_uri is None or not ctx.leads(w):
        return
    uri, path = w.model_uri
    if kind_of(uri) != "remote" or uri.split("://", 1)[0].lower() not in DOWNLOADED_SCHEMES:
        return
    pin = " (no revision pinned)" if uri.startswith("hf://") and ":" not in uri[5:] else ""
    yield hit("model-mount", w, f"the model {uri}{pin} is downloaded at every pod start (KServe's "
              "storage initializer copies it into an emptyDir): slow starts, and a hub or bucket "
              "outage stops scale-up", path, fix=URI_FIX)


def _remote(w: Workload, c: Container, ctx: Context, ref: ModelRef) -> Iterator[Finding]:
    if _persistent_cache(w, c, ctx):
        return
    shown = f" from {ref.value.split('://', 1)[0]}://" if "://" in ref.value else " from a hub"
    yield hit("model-mount", w, f"the server fetches model {ref.value!r}{shown} at every start"
              f"{ref.note}: no volume keeps a copy", ref.path, container=c, at=ref.obj,
              line=ref.line, fix=ALTERNATIVES)


@rule(
    "model-mount",
    Severity.WARNING,
    "the model volume is missing or writable, or the model is downloaded at every start",
    rationale="Weights belong outside the image and must not change under a running server. "
    "Downloading them at each start (an init container into an emptyDir: huggingface-cli, "
    "ollama pull, python -m <pkg>.downloader --model-uri <hub id>, a storage-initializer "
    "image; a start script or postStart hook; KServe's storage initializer for an hf://, "
    "s3:// or gs:// storageUri; or the server pulling from a hub) makes every start as slow "
    "as the download and ties scale-up to the hub. Reported per container and per source.",
    fix="mount the model from a PersistentVolumeClaim, an OCI image volume or a node-local "
    "cache, with readOnly: true",
)
def model_mount(w: Workload, ctx: Context) -> Iterator[Finding]:
    if not loads_model(w) or no_model(w, w.serving, ctx) is not None:
        return
    yield from _uri(w, ctx)
    init = list(_init_downloads(w, ctx))
    yield from init
    script = list(_script_downloads(w, w.serving, ctx))
    yield from script
    if not init and not script:  # a pull at start is already the finding
        _store(w, w.serving, ctx)
    yield from _named(w, ctx, script=bool(script))


def _named(w: Workload, ctx: Context, *, script: bool) -> Iterator[Finding]:
    """Where the model the server is pointed at comes from: a hub, a bucket, a volume."""
    c = w.serving
    kinds = [(kind_of(r.value), r) for r in model_refs(w, c, ctx)]
    for _, r in (kr for kr in kinds if kr[0] == "unresolved"):
        ctx.note(f"model-mount: {w.ref}: the model is named by {r.value!r}, a value the "
                 "manifests do not set: not checked")
    fetched = [cmd.text for i in (*w.init_containers, c)
               for cmd in container_commands(w, i, ctx.inventory) if fetch_of(cmd)]
    fetched += [f for f in map(initializer_fetch, w.init_containers) if f]
    remote = [r for k, r in kinds if k in ("hub", "remote")]
    if remote:
        # per source: an init container's download, or the server's own start script or
        # hook, hides the server's pull only when it fetches that same model (the finding
        # is then the download's)
        if not any(remote[0].value in text for text in fetched):
            yield from _remote(w, c, ctx, remote[0])
        return
    # an init container's download cannot put the model at a path on none of the server's
    # volumes: only the server's own start script can (per source, again)
    yield from _local(w, c, [r.value for k, r in kinds if k == "local"], script, script,
                      caches=_filled_caches(w, c, ctx))
