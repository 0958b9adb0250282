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
``/opt/nim/.cache``): model-mount looks for a persistent volume there.

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


ALWAYS, GPU_TAG, GPU_RESOURCES = "always", "gpu tag", "GPU resources"

KNOWN_SERVERS: tuple[Server, ...] = (
    Server("vLLM", r"(^|/)vllm(-openai|-tpu)?$|(^|/)vllmserver(-gpu)?$|/lmcache/vllm-openai$",
           ("vllm", "vllm.entrypoints.openai.api_server"), ALWAYS),
    Server("Text Generation Inference", r"(^|/)text-generation-inference$",
           ("text-generation-launcher",), ALWAYS, cache="/data"),
    Server("NVIDIA Triton Inference Server", r"(^|/)tritonserver$", ("tritonserver",), ALWAYS),
    Server("TensorRT-LLM", r"(^|/)(tensorrt-llm|tensorrt_llm|trtllm)[\w/-]*$",
           ("trtllm-serve", "trtllm-build"), ALWAYS),
    Server("SGLang", r"(^|/)sglang$", ("sglang.launch_server",), ALWAYS),
    Server("LMDeploy", r"(^|/)lmdeploy$", ("lmdeploy",), ALWAYS),
    Server("NVIDIA NIM", r"^nim/", (), ALWAYS, cache="/opt/nim/.cache"),
    Server("KServe Hugging Face server", r"(^|/)huggingfaceserver$", ("huggingfaceserver",),
           GPU_TAG),
    Server("TorchServe", r"(^|/)torchserve(-kfs)?$", ("torchserve",), GPU_TAG),
    Server("TensorFlow Serving", r"^tensorflow/serving$|(^|/)tensorflow-serving$",
           ("tensorflow_model_server",), GPU_TAG),
    Server("MLServer", r"(^|/)mlserver$", ("mlserver",), GPU_RESOURCES),
)


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
    for server in KNOWN_SERVERS:
        if (repo and re.search(server.image, repo)) or words & set(server.commands):
            return server
    return None


def default_cache(image: str) -> str | None:
    """The download cache the server *image* runs keeps when no variable says, if known."""
    server = known_server(image, []) if image else None
    return server.cache if server is not None and server.cache else None


def gpu_server(image: str, argv: list[str]) -> Server | None:
    """The known server *image* or *argv* runs when the table says that makes it a GPU server
    (``always``; ``gpu tag`` with a ``-gpu`` tag); None otherwise."""
    server = known_server(image, argv)
    if server is None or server.gpu == GPU_RESOURCES:
        return None
    if server.gpu == GPU_TAG:
        _, tag = _repository(image) if image else ("", None)
        return server if tag is not None and re.search(r"(^|[-_.])gpu([-_.]|$)", tag) else None
    return server
