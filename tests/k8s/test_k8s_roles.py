"""Which containers are no model server (servelab.k8s.roles): clients, idle pods, simulators."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.k8s import check_manifests
from servelab.k8s.checks import Context
from servelab.k8s.load import load_inventory
from servelab.k8s.roles import CLIENT, IDLE, SIMULATOR, role


def _role(tmp_path: Path, image: str, command: list[str] | None = None,
          env: dict[str, str] | None = None) -> str | None:
    container: dict[str, object] = {"name": "c", "image": image}
    if command is not None:
        container["command"] = command
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
               "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [container]}}}}
    path = tmp_path / "d.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    inv = load_inventory([path], None)
    w = inv.workloads[0]
    found = role(w, w.serving, Context(inv))
    return found.kind if found else None


@pytest.mark.parametrize(("image", "command", "env", "kind"), [
    ("curlimages/curl:8.5.0", None, None, CLIENT),
    ("python:3.12", ["sh", "-c", "pip install openai==1.30.0 && python /app/q.py"], None, CLIENT),
    ("python:3.12", ["python", "/app/run.py"], {"OPENAI_API_BASE": "http://vllm:8000/v1"}, CLIENT),
    ("vllm/vllm-openai:v0.8.5", ["vllm", "bench", "serve", "--model", "org/m"], None, CLIENT),
    ("grafana/k6:0.50.0", ["k6", "run", "/s/load.js"], None, CLIENT),
    ("python:3.12", ["python", "benchmarks/benchmark_serving.py", "--model", "org/m"], None,
     CLIENT),
    ("ubuntu:22.04", ["sleep", "infinity"], None, IDLE),
    ("ubuntu:22.04", ["sh", "-c", "apt-get update && sleep 3600"], None, IDLE),
    ("busybox:1.36", ["sh", "-c", "while true; do sleep 30; done"], None, IDLE),
    ("vllm/vllm-openai:v0.8.5", ["sleep", "infinity"], None, IDLE),
    ("ghcr.io/llm-d/llm-d-inference-sim:v0.3.0", None, None, SIMULATOR),
    ("registry.example/ml/openai-mock:1.0", None, None, SIMULATOR),
])
def test_no_model_server(tmp_path: Path, image: str, command: list[str] | None,
                         env: dict[str, str] | None, kind: str) -> None:
    assert _role(tmp_path, image, command, env) == kind


@pytest.mark.parametrize(("image", "command", "env"), [
    ("vllm/vllm-openai:v0.8.5", ["vllm", "serve", "org/m"], None),
    ("vllm/vllm-openai:v0.8.5", None, {"OPENAI_API_BASE": "http://other:8000/v1"}),
    ("python:3.12", ["sh", "-c", "python /app/serve.py & sleep infinity"], None),
    ("python:3.12", ["sh", "-c", "until curl -sf http://db:5432; do sleep 2; done; "
                     "python /app/serve.py"], None),
    ("ollama/ollama:0.5.7", ["sh", "-c", "ollama serve & sleep 5; ollama pull llama3; wait"],
     None),
    ("registry.example/ml/similarity-search:1.0", None, None),
])
def test_model_servers(tmp_path: Path, image: str, command: list[str] | None,
                       env: dict[str, str] | None) -> None:
    assert _role(tmp_path, image, command, env) is None


def test_a_client_gets_no_server_findings_and_a_note(tmp_path: Path) -> None:
    path = tmp_path / "client.yaml"
    path.write_text(json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "q"},
        "spec": {"selector": {"matchLabels": {"a": "q"}}, "template": {
            "metadata": {"labels": {"a": "q"}}, "spec": {"containers": [{
                "name": "q", "image": "curlimages/curl:8.5.0",
                "command": ["curl", "-sf", "http://vllm:8000/v1/models"]}]}}}}),
        encoding="utf-8")
    report = check_manifests([path])
    rules = {f.rule_id for f in report.findings}
    assert not rules & {"probe-target", "startup-probe-budget", "model-mount", "gpu-limit", "shm"}
    assert any("is not a model server" in n for n in report.notes), report.notes
