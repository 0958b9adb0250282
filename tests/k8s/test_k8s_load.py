"""Loading manifests: serving container choice, GPU resources, positions through merge keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.k8s.load import load_inventory
from servelab.k8s.model import is_gpu_resource

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("nvidia.com/mig-1g.10gb", True),
        ("cpu", False),
        # NVIDIA's device plugin advertises shared (time-sliced) GPUs as nvidia.com/gpu.shared
        # (renameByDefault) and any name its sharing config's `rename` gives
        ("nvidia.com/gpu.shared", True),
        ("nvidia.com/gpu-all", True),
        ("nvidia.com/gpumem", False),  # HAMi's GPU memory, next to nvidia.com/gpu
        ("example.com/foo", False),
    ],
)
def test_gpu_resource_names(name: str, gpu: bool) -> None:
    assert is_gpu_resource(name) is gpu


def test_helm_output_kinds_and_merge_keys() -> None:
    inv = load_inventory([str(DATA / "negative" / "helm-rendered.yaml")])
    [w] = inv.workloads
    assert w.obj.ref == "Deployment/release-name-llm-serving"
    assert [c.name for c in w.containers] == ["server", "metrics-proxy"]
    assert w.serving.name == "server"
    assert w.pod_labels["app.kubernetes.io/name"] == "llm-serving"  # through <<: *labels
    requests = w.serving.resources["requests"]
    assert requests == {"cpu": "6", "memory": "80Gi", "nvidia.com/gpu": "1"}
    assert [o.kind for o in inv.ignored] == ["ServiceAccount"]
    assert [p.ref for p in inv.pdbs] == ["PodDisruptionBudget/release-name-llm-serving"]
    # a key from a merge has no position of its own: its mapping's key is used
    line = w.obj.locate((*w.serving.path, "resources", "requests", "memory")).line
    text = (DATA / "negative" / "helm-rendered.yaml").read_text().splitlines()
    assert text[line - 1].strip() == "requests:"
    assert text[line].strip() == "<<: *gpu-limits"


def test_serving_container_choice() -> None:
    path = str(DATA / "negative" / "sidecar-first.yaml")
    [w] = load_inventory([path]).workloads
    assert [c.name for c in w.containers] == ["auth-proxy", "vllm"]
    assert w.serving.name == "vllm"
    [w] = load_inventory([path], serving_container="auth-proxy").workloads
    assert w.serving.name == "auth-proxy"


def test_positions_are_file_lines_across_documents() -> None:
    path = DATA / "positive" / "helm-rendered-flaws.yaml"
    [w] = load_inventory([str(path)]).workloads
    line = w.obj.locate((*w.serving.path, "image")).line
    assert "image: nvcr.io/nvidia/tritonserver" in path.read_text().splitlines()[line - 1]
