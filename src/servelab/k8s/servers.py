"""The table of known model servers: which images and commands are GPU inference servers.

k8s-check uses it for a KServe ServingRuntime or ClusterServingRuntime given without an
InferenceService that uses it: such a runtime sets no GPU resources (the InferenceService
does), so the table says whether it is a GPU server. Each entry names the server, how it is
recognised (image repository, command) and when it is a GPU server:

* ``always``: the server runs only on GPUs (its images are CUDA builds);
* ``gpu tag``: its images come in CPU and GPU builds, and the tag says which (``-gpu``);
* ``GPU resources``: CPU or GPU by configuration; a GPU server when the runtime itself requests
  a GPU (any runtime that does is one, listed here for the documentation).

An entry may also name the server's default download cache (TGI's ``/data``, NIM's
``/opt/nim/.cache``): model-mount looks for a persistent volume there. It also says whether it
answers health before any model is loaded and loads models on
first request (``lazy``: Ollama, LocalAI), and whether its model store must be writable
because the server pulls into it (``store``: Ollama, LocalAI's gallery models).

Besides the table, :func:`cpu_reason` says why a container that requests no GPU is a CPU
server by design (a CPU build of a known server, CPU torch wheels, a CPU-feature node selector).

docs/k8s-check.md ("Known GPU servers") shows this table; tests keep the two in step.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from servelab.image.ref import ImageRef


class Server(NamedTuple):
    name: str
    #: Image repositories (the path after the registry, a regular expression)
    image: str
    #: Program names or module paths in the command that identify it (exact words)
    commands: tuple[str, ...]
    #: ``always``, ``gpu tag`` or ``GPU resources``
    gpu: str
    #: Where the server keeps its model download cache when no variable says (model-mount)
    cache: str = ""
    #: Answers health before loading any model, loads on first request (no load at start)
    lazy: bool = False
    #: Command-line flags only this server takes (recognised like its command)
    flags: tuple[str, ...] = ()
    #: The model store the server writes (pulls) into: it must be writable
    store: str = ""
    #: The variable that moves that store
    store_env: str = ""


ALWAYS, GPU_TAG, GPU_RESOURCES = "always", "gpu tag", "GPU resources"

KNOWN_SERVERS: tuple[Server, ...] = (
    Server("vLLM", r"(^|/)vllm(-openai|-tpu)?$|(^|/)vllmserver(-gpu)?$|/lmcache/vllm-openai$",
           ("vllm", "vllm.entrypoints.openai.api_server"), ALWAYS,
           flags=("--gpu-memory-utilization",)),
    Server("Text Generation Inference", r"(^|/)text-generation-inference$",
           ("text-generation-launcher",), ALWAYS, cache="/data"),
    Server("Text Embeddings Inference", r"(^|/)text-embeddings-inference$",
           ("text-embeddings-router",), ALWAYS, cache="/data"),
    Server("NVIDIA Triton Inference Server", r"(^|/)tritonserver$", ("tritonserver",), ALWAYS),
    Server("TensorRT-LLM", r"(^|/)(tensorrt-llm|tensorrt_llm|trtllm)[\w/-]*$",
           ("trtllm-serve", "trtllm-build"), ALWAYS),
    Server("SGLang", r"(^|/)sglang$", ("sglang.launch_server",), ALWAYS,
           flags=("--mem-fraction-static",)),
    Server("LMDeploy", r"(^|/)lmdeploy$", ("lmdeploy",), ALWAYS),
    Server("NVIDIA NIM", r"^nim/", (), ALWAYS, cache="/opt/nim/.cache"),
    Server("KServe Hugging Face server", r"(^|/)huggingfaceserver$", ("huggingfaceserver",),
           GPU_TAG),
    Server("TorchServe", r"(^|/)torchserve(-kfs)?$", ("torchserve",), GPU_TAG),
    Server("TensorFlow Serving", r"^tensorflow/serving$|(^|/)tensorflow-serving$",
           ("tensorflow_model_server",), GPU_TAG),
    Server("MLServer", r"(^|/)mlserver$", ("mlserver",), GPU_RESOURCES),
    Server("Ollama",  # also a project's own build (aegisos-ollama, ollama-intel)
           r"(^|/)ollama$|(^|/)[\w.]+-ollama$|(^|/)ollama-(intel|ipex|rocm|cuda|gpu|cpu)$",
           ("ollama",), GPU_RESOURCES, cache="/root/.ollama",
           lazy=True, store="/root/.ollama", store_env="OLLAMA_MODELS"),
    Server("llama.cpp server", r"(^|/)llama\.cpp$|(^|/)llama-cpp-server$", ("llama-server",),
           GPU_TAG, cache="/root/.cache/llama.cpp"),
    Server("LocalAI", r"(^|/)local-?ai$", ("local-ai",), GPU_TAG, lazy=True,
           store="/build/models", store_env="MODELS_PATH"),
)
#: A tag that names a GPU build (``-gpu``, llama.cpp's ``server-cuda``, ``-rocm``).
GPU_TAG_WORDS = re.compile(r"(^|[-_.])(gpu|cuda|cu\d+|rocm|vulkan|musa)([-_.\d]|$)",
                           re.IGNORECASE)


def _repository(image: str) -> tuple[str, str | None]:
    """The repository path (no registry host) and the tag of *image*."""
    name, tag, _ = ImageRef.split(image)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        name = rest
    return name, tag


def known_server(image: str, argv: list[str]) -> Server | None:
    """The entry of the table that *image* or the command line *argv* names, if any."""
    repo, _ = _repository(image) if image else ("", None)
    words = {w.rsplit("/", 1)[-1] for w in argv}
    flags = {w.split("=", 1)[0] for w in argv if w.startswith("--")}
    for server in KNOWN_SERVERS:
        if (repo and re.search(server.image, repo)) or words & set(server.commands) or (
                flags & set(server.flags)):
            return server
    return None


def default_cache(image: str, argv: list[str] | None = None) -> str | None:
    """The download cache the server *image* (or the command *argv*) runs keeps when no
    variable says, if known."""
    server = known_server(image, argv or []) if image or argv else None
    return server.cache if server is not None and server.cache else None


def gpu_server(image: str, argv: list[str]) -> Server | None:
    """The known server *image* or *argv* runs when the table says that makes it a GPU server
    (``always``; ``gpu tag`` with a ``-gpu`` tag); None otherwise."""
    server = known_server(image, argv)
    if server is None or server.gpu == GPU_RESOURCES:
        return None
    if server.gpu == GPU_TAG:
        _, tag = _repository(image) if image else ("", None)
        return server if tag is not None and GPU_TAG_WORDS.search(tag) else None
    return server


#: An image repository or tag that names a CPU build (vLLM's ``vllm-cpu-release-repo``,
#: ``...:v0.8.5-cpu``, ``openvino``-style ``-cpu`` variants).
CPU_BUILD = re.compile(r"(^|[-_./:])cpu([-_./:]|$)", re.IGNORECASE)
#: Pip arguments that install CPU-only torch wheels.
CPU_WHEELS = re.compile(r"download\.pytorch\.org/whl/cpu|torch[=<>~!]=?[\w.]*\+cpu")
#: Node labels that select nodes by CPU features (Node Feature Discovery) or CPU model.
CPU_FEATURE_LABELS = ("feature.node.kubernetes.io/cpu-", "cpu-feature", "node.kubernetes.io/cpu")


def own_build(image: str, argv: list[str]) -> bool:
    """Whether *image* is a user's own build named after a server (``registry:5000/vllm``, a
    repository with no publisher namespace) and its command names no server: its base, and so
    whether it is a GPU build, is unknown."""
    if not image:
        return False
    repo, _ = _repository(image)
    words = {w.rsplit("/", 1)[-1] for w in argv}
    named = any(words & set(s.commands) for s in KNOWN_SERVERS)
    return "/" not in repo and not named


def cpu_reason(image: str, argv: list[str], node_keys: list[str],
               env: dict[str, str] | None = None) -> str | None:
    """Why a container that requests no GPU is a CPU server by design, or None when unknown.

    * an image whose repository or tag names a CPU build (``vllm-cpu``, ``-cpu``), or a
      command that selects the CPU device (``--device cpu``);
    * a known server whose GPU build the image is not (a tag without -gpu/-cuda), or one that
      is CPU or GPU by configuration (Ollama, MLServer) and is given no GPU;
    * CPU-only torch wheels installed by its command;
    * nodes chosen by CPU features (Node Feature Discovery's cpu-* labels);
    * vLLM's CPU backend variables (``VLLM_CPU_KVCACHE_SPACE`` and the other VLLM_CPU_*).
    """
    repo, tag = _repository(image) if image else ("", None)
    if CPU_BUILD.search(f"{repo}:{tag or ''}"):
        return "a CPU build (the image's name or tag says cpu)"
    device = next((a for i, a in enumerate(argv) if a in ("--device=cpu", "--device-type=cpu")
                   or (a in ("--device", "--device-type") and argv[i + 1:i + 2] == ["cpu"])),
                  None)
    if device is not None:
        return "its command selects the CPU device (--device cpu)"
    server = known_server(image, argv)
    if server is not None and server.gpu == GPU_RESOURCES:
        return f"{server.name} runs on CPU when it is given no GPU"
    if server is not None and server.gpu == GPU_TAG and gpu_server(image, argv) is None:
        return f"{server.name}'s CPU build (the image tag names no GPU build)"
    key = next((k for k in env or {} if k.startswith("VLLM_CPU_")), None)
    if key is not None:
        return f"its environment configures vLLM's CPU backend ({key})"
    if any(CPU_WHEELS.search(a) for a in argv):
        return "its command installs CPU-only torch wheels"
    key = next((k for k in node_keys if k.startswith(CPU_FEATURE_LABELS)), None)
    if key is not None:
        return f"its nodes are selected by CPU features ({key})"
    return None
