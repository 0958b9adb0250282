"""The table of known model servers (servelab.k8s.servers) and its copy in docs/k8s-check.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.k8s.servers import (
    KNOWN_SERVERS,
    cpu_reason,
    default_cache,
    gpu_server,
    known_server,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "k8s-check.md"


@pytest.mark.parametrize(
    ("image", "argv", "server"),
    [
        ("vllm/vllm-openai:v0.8.5", [], "vLLM"),
        ("registry.example.internal:5000/mirror/vllm/vllm-openai:v0.8.5@sha256:" + "a" * 64, [],
         "vLLM"),
        ("", ["python3", "-m", "vllm.entrypoints.openai.api_server"], "vLLM"),
        ("registry.example.internal/llm/serve:1.0", ["vllm", "serve", "/mnt/models"], "vLLM"),
        ("ghcr.io/huggingface/text-generation-inference:3.0.1", [], "Text Generation Inference"),
        ("nvcr.io/nvidia/tritonserver:24.08-py3", [], "NVIDIA Triton Inference Server"),
        ("lmsysorg/sglang:v0.4.6", [], "SGLang"),
        ("nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3", [], "NVIDIA NIM"),
        ("kserve/huggingfaceserver:v0.15.2-gpu", [], "KServe Hugging Face server"),
        ("pytorch/torchserve-kfs:0.9.0-gpu", [], "TorchServe"),
    ],
)
def test_known_gpu_servers(image: str, argv: list[str], server: str) -> None:
    found = gpu_server(image, argv)
    assert found is not None and found.name == server


@pytest.mark.parametrize(
    ("image", "argv"),
    [
        ("kserve/huggingfaceserver:v0.15.2", []),  # the CPU build: GPU only with resources
        ("pytorch/torchserve-kfs:0.9.0", []),
        ("seldonio/mlserver:1.6.1", []),  # GPU resources decide
        ("kserve/sklearnserver:v0.15.2", []),
        ("registry.example.internal/team/serving:1.0", []),  # not tensorflow/serving
        ("registry.example.internal/llm/gateway:1.4", ["--upstream=http://vllm:8000"]),
    ],
)
def test_not_gpu_servers(image: str, argv: list[str]) -> None:
    assert gpu_server(image, argv) is None


def test_mlserver_is_known_but_gpu_by_resources() -> None:
    found = known_server("seldonio/mlserver:1.6.1", [])
    assert found is not None and found.gpu == "GPU resources"


def test_the_docs_list_every_known_server() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Known GPU servers", 1)[1].split("\n## ", 1)[0]
    for server in KNOWN_SERVERS:
        row = next((line for line in section.splitlines() if line.startswith(f"| {server.name} |")),
                   None)
        assert row is not None, f"docs/k8s-check.md lacks a row for {server.name}"
        assert f"| {server.gpu} |" in row, f"{server.name}: the docs say another condition"
        cells = [c.strip().strip("`") for c in row.strip("|").split("|")]
        assert cells[-1] == server.cache, f"{server.name}: the docs give another cache"
    assert "src/servelab/k8s/servers.py" in section


def test_default_caches_come_from_the_table() -> None:
    assert default_cache("ghcr.io/huggingface/text-generation-inference:3.0.1") == "/data"
    assert default_cache("nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3") == "/opt/nim/.cache"
    assert default_cache("docker.io/ollama/ollama:0.5.4") == "/root/.ollama"
    assert default_cache("vllm/vllm-openai:v0.8.5") is None
    assert default_cache("") is None


@pytest.mark.parametrize(
    ("image", "argv", "nodes", "reason"),
    [
        ("ghcr.io/ggml-org/llama.cpp:server", [], [], "llama.cpp server's CPU build"),
        ("docker.io/tensorflow/serving:2.14.1", [], [], "TensorFlow Serving's CPU build"),
        ("docker.io/ollama/ollama:0.5.4", [], [], "Ollama runs on CPU"),
        ("python:3.12-slim", ["sh", "-c", "pip install torch --index-url "
                              "https://download.pytorch.org/whl/cpu && python serve.py"], [],
         "CPU-only torch wheels"),
        ("python:3.12-slim", ["pip", "install", "torch==2.5.1+cpu"], [], "CPU-only torch wheels"),
        ("registry.example.internal/x/embedder:1", [],
         ["feature.node.kubernetes.io/cpu-cpuid.AVX512F"], "CPU features"),
        ("public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.8.5", ["vllm", "serve", "m"], [],
         "a CPU build"),  # vLLM's CPU backend: vllm is in the command, the image says cpu
        ("vllm/vllm-openai:v0.8.5", ["vllm", "serve", "m", "--device", "cpu"], [],
         "CPU device"),
    ],
)
def test_cpu_servers_by_design(image: str, argv: list[str], nodes: list[str],
                               reason: str) -> None:
    found = cpu_reason(image, argv, nodes)
    assert found is not None and reason in found


@pytest.mark.parametrize(
    ("image", "argv"),
    [
        ("ghcr.io/ggml-org/llama.cpp:server-cuda", []),  # the CUDA build is a GPU server
        ("tensorflow/serving:2.14.1-gpu", []),
        ("registry.example.internal/x/embedder:1", []),  # unknown: not CPU by design
        ("registry.example.internal/llm/serve:1", ["--gpu-memory-utilization", "0.9"]),  # vLLM
    ],
)
def test_not_cpu_by_design(image: str, argv: list[str]) -> None:
    assert cpu_reason(image, argv, []) is None


def test_the_table_says_who_loads_lazily() -> None:
    vllm = known_server("", ["--gpu-memory-utilization=0.9"])
    ollama = known_server("docker.io/ollama/ollama:0.5.4", [])
    assert vllm is not None and not vllm.lazy and not vllm.store
    assert ollama is not None and ollama.lazy and ollama.store


@pytest.mark.parametrize("image", ["aegisos-ollama:latest", "registry.local/ollama-intel:0.5",
                                   "docker.io/ollama/ollama:0.5.4"])
def test_ollama_builds_of_a_project_are_ollama(image: str) -> None:
    found = known_server(image, [])
    assert found is not None and found.name == "Ollama" and found.lazy


@pytest.mark.parametrize("image", ["ghcr.io/open-webui/ollama-webui:main", "ollama-proxy:1"])
def test_ollama_front_ends_are_not_ollama(image: str) -> None:
    assert known_server(image, []) is None


def test_text_embeddings_inference_is_known_and_its_cache_is_data() -> None:
    gpu = known_server("ghcr.io/huggingface/text-embeddings-inference:1.5", [])
    assert gpu is not None and gpu.cache == "/data"
    assert cpu_reason("ghcr.io/huggingface/text-embeddings-inference:1.5", [], []) is None
    cpu = cpu_reason("ghcr.io/huggingface/text-embeddings-inference:cpu-1.5", [], [])
    assert cpu is not None and "CPU build" in cpu
