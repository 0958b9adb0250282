"""The table of known model servers (servelab.k8s.servers) and its copy in docs/k8s-check.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.k8s.servers import KNOWN_SERVERS, default_cache, gpu_server, known_server

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
    assert default_cache("vllm/vllm-openai:v0.8.5") is None
    assert default_cache("") is None
