"""The serving custom resources: their pod templates, what they inherit, and kinds not read."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from servelab.errors import InputError
from servelab.findings import Finding
from servelab.k8s import check_manifests
from servelab.k8s.load import load_inventory

DIGEST = "sha256:781e11251585a07e04025a4d33a12f1c77fd83541349952558d361c6956db0f8"
#: A complete pod spec with flaws the pod-level rules see: a hub model, a pip install at start,
#: a privileged container, a TCP startup probe, liveness == readiness, /dev/shm on disk, a
#: writable /tmp missing, a sidecar on latest, a token in plain text.
POD: dict[str, Any] = {
    "containers": [
        {
            "name": "server",
            "image": f"registry.example.internal/llm/vllm-serve:0.6.3@{DIGEST}",
            "command": ["/bin/sh", "-c"],
            "args": ["pip install vllm-flash-attn\nexec vllm serve Qwen/Qwen2.5-7B-Instruct "
                     "--port 8000"],
            "env": [{"name": "HF_TOKEN", "value": "hf_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3"}],
            "startupProbe": {"tcpSocket": {"port": 8000}, "failureThreshold": 60},
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
            "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}},
            "securityContext": {"privileged": True, "readOnlyRootFilesystem": True,
                                "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
            "resources": {"requests": {"cpu": "4", "memory": "16Gi"},
                          "limits": {"memory": "16Gi", "nvidia.com/gpu": 2}},
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        },
        {
            "name": "metrics",
            "image": "prom/statsd-exporter:latest",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                          "limits": {"memory": "64Mi"}},
            "securityContext": {"readOnlyRootFilesystem": False, "runAsNonRoot": True,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
        },
    ],
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "volumes": [{"name": "dshm", "emptyDir": {"sizeLimit": "8Gi"}}],
}
#: Rules that depend on the kind itself (rollouts and PDBs are the Deployment's).
KIND_RULES = {"disruption", "rollout", "service-port"}


def _tpl() -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "llm"}}, "spec": copy.deepcopy(POD)}


def _embed(kind: str) -> tuple[dict[str, Any], str]:
    """A manifest of *kind* holding POD, and the JSON path of the pod spec in it."""
    meta = {"name": "llm"}
    if kind == "Deployment":
        return ({"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
                 "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llm"}},
                          "template": _tpl()}}, "spec.template.spec")
    if kind == "LeaderWorkerSet":
        return ({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": kind, "metadata": meta,
                 "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": _tpl(),
                                                   "workerTemplate": _tpl()}}},
                "spec.leaderWorkerTemplate.leaderTemplate.spec")
    if kind == "RayService":
        head = {"spec": {"containers": [{"name": "head", "image": "r/ray:1"}]}}
        return ({"apiVersion": "ray.io/v1", "kind": kind, "metadata": meta,
                 "spec": {"rayClusterConfig": {"headGroupSpec": {"template": head},
                                               "workerGroupSpecs": [
                                                   {"groupName": "gpu", "template": _tpl()}]}}},
                "spec.rayClusterConfig.workerGroupSpecs[0].template.spec")
    if kind == "InferenceService":
        return ({"apiVersion": "serving.kserve.io/v1beta1", "kind": kind, "metadata": meta,
                 "spec": {"predictor": copy.deepcopy(POD)}}, "spec.predictor")
    if kind == "LLMInferenceService":
        pod = copy.deepcopy(POD)
        pod["containers"][0]["name"] = "main"
        return ({"apiVersion": "serving.kserve.io/v1alpha1", "kind": kind, "metadata": meta,
                 "spec": {"model": {"uri": "pvc://weights"}, "template": pod}}, "spec.template")
    assert kind == "KnativeService"
    return ({"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": meta,
             "spec": {"template": _tpl()}}, "spec.template.spec")


def _findings(tmp_path: Path, kind: str) -> set[tuple[str, str, str, str]]:
    doc, pod_path = _embed(kind)
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    report = check_manifests([path])
    out: set[tuple[str, str, str, str]] = set()
    for f in report.findings:
        where = f.context["path"]
        if f.rule_id in KIND_RULES or not where.startswith(pod_path):
            continue
        message = f.message.replace("'main'", "'server'").replace("main:", "server:")
        out.add((f.rule_id, f.severity.value, message, where[len(pod_path):]))
    return out


@pytest.mark.parametrize("kind", ["LeaderWorkerSet", "RayService", "InferenceService",
                                  "LLMInferenceService", "KnativeService"])
def test_the_same_pod_spec_gives_the_same_findings(tmp_path: Path, kind: str) -> None:
    baseline = _findings(tmp_path, "Deployment")
    rules = {r for r, *_ in baseline}
    assert {"model-mount", "start-install", "probe-target", "security-context", "shm",
            "image-not-digest", "plaintext-secret", "priority"} <= rules
    if kind == "InferenceService":  # KServe's webhook fills CPU and memory: a note instead
        assert any(f[0] == "resources" for f in baseline)
        baseline = {f for f in baseline if f[0] != "resources"}
    assert _findings(tmp_path, kind) == baseline


def _inv(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return load_inventory([str(path)])


def test_parts_of_each_resource(tmp_path: Path) -> None:
    docs = [_embed(k)[0] for k in ("LeaderWorkerSet", "RayService", "InferenceService")]
    docs[2]["spec"]["transformer"] = {"containers": [{"name": "t", "image": "t:1"}]}
    inv = _inv(tmp_path, yaml.safe_dump_all(docs))
    assert [w.ref for w in inv.workloads] == [
        "LeaderWorkerSet/llm leader", "LeaderWorkerSet/llm workers", "RayService/llm head",
        "RayService/llm worker group gpu", "InferenceService/llm predictor",
        "InferenceService/llm transformer"]
    assert [w.serves for w in inv.workloads] == [True, False, True, True, True, True]
    lws = inv.workloads[0]
    assert lws.pod_labels == {"app": "llm", "leaderworkerset.sigs.k8s.io/name": "llm"}


def test_runtime_found_is_merged_into_the_inference_service(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "k8s" / "positive"
    inv = load_inventory([str(data / "kserve-cluster-runtime.yaml")])
    runtime, isvc = inv.workloads
    assert runtime.template and runtime.merged_into == ["InferenceService/flan-t5 predictor"]
    assert isvc.base is runtime.obj and isvc.is_gpu
    assert isvc.pair == "InferenceService/flan-t5 predictor + ClusterServingRuntime/hf-server"
    c = isvc.serving
    assert not c.inherited  # nothing left to guess: the runtime is in the input
    assert c.data["image"] == "kserve/huggingfaceserver:latest"  # the runtime's
    assert str(c.data["resources"]["limits"]["nvidia.com/gpu"]) == "1"  # the predictor's
    img = c.where((*c.path, "image"))
    assert img is not None and img[0] is runtime.obj
    res = c.where((*c.path, "resources", "limits"))
    assert res is not None and res[0] is isvc.obj
    assert isvc.pod["tolerations"]  # its own, merged with the runtime's (none)
    report = check_manifests([data / "kserve-cluster-runtime.yaml"])
    assert any("judged with each InferenceService that uses it" in n for n in report.notes)


def test_runtime_missing_is_named_not_guessed(tmp_path: Path) -> None:
    doc, _ = _embed("InferenceService")
    doc["spec"]["predictor"] = {"model": {"modelFormat": {"name": "huggingface"},
                                          "args": ["--model_id=org/model"],
                                          "resources": {"limits": {"nvidia.com/gpu": 1}}}}
    path = tmp_path / "isvc.yaml"
    path.write_text(yaml.safe_dump(doc))
    report = check_manifests([path])
    rules = {f.rule_id for f in report.findings}
    assert "image-not-digest" not in rules and "probe-target" not in rules and "shm" not in rules
    assert any("inherits image, command, probes, securityContext, volume mounts from the "
               "runtime KServe selects for model format 'huggingface', not among the manifests"
               in n for n in report.notes)
    [hub] = [f for f in report.findings if f.rule_id == "model-mount"]
    assert "'org/model'" in hub.message


def test_llm_service_without_template(tmp_path: Path) -> None:
    path = tmp_path / "llm.yaml"
    path.write_text("apiVersion: serving.kserve.io/v1alpha2\nkind: LLMInferenceService\n"
                    "metadata: {name: phi}\nspec:\n  model: {uri: 'hf://microsoft/phi-4'}\n"
                    "  baseRefs: [{name: base}]\n")
    report = check_manifests([path])
    assert [(f.rule_id, f.line) for f in report.findings] == [("model-mount", 5)]
    assert any("the pod (scheduling, volumes) comes from LLMInferenceServiceConfig base, not "
               "among the manifests" in n for n in report.notes)


def test_unread_kinds_are_named(tmp_path: Path) -> None:
    nim = ("apiVersion: apps.nvidia.com/v1alpha1\nkind: NIMService\nmetadata: {name: llama}\n"
           "spec: {image: {repository: nvcr.io/nim/meta/llama3-8b-instruct, tag: '1.0.0'}}\n")
    path = tmp_path / "nim.yaml"
    path.write_text(nim)
    with pytest.raises(InputError) as info:
        check_manifests([path])
    assert "NIMService/llama (apps.nvidia.com/v1alpha1)" in str(info.value)
    assert "RayService" in str(info.value.hint)
    doc, _ = _embed("Deployment")
    path.write_text(nim + "---\n" + yaml.safe_dump(doc))
    notes = check_manifests([path]).notes
    assert "not read (kinds k8s-check cannot read; their pods are not checked): " \
           "NIMService/llama (apps.nvidia.com/v1alpha1)" in notes


def test_known_kinds_without_pods_are_only_counted(tmp_path: Path) -> None:
    doc, _ = _embed("Deployment")
    extra = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\napiVersion: autoscaling/v2" \
            "\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\n---\n"
    inv = _inv(tmp_path, extra + yaml.safe_dump(doc))
    assert not inv.unread
    assert not inv.ignored  # read for what they say: the Secret's data, the HPA's replica range
    assert [o.kind for o in inv.secrets] == ["Secret"]
    assert [o.kind for o in inv.hpas] == ["HorizontalPodAutoscaler"]


def _script_user(kind: str) -> str:
    return f"""apiVersion: v1
kind: ConfigMap
metadata: {{name: launch}}
data:
  run.sh: |
    pip install flash-attn
    exec vllm serve /models/m
---
{kind}
"""


def test_a_configmap_script_used_by_two_pods_is_reported_once(tmp_path: Path) -> None:
    container = {"name": "c", "image": f"i:1@{DIGEST}", "command": ["bash", "/launch/run.sh"],
                 "resources": {"limits": {"nvidia.com/gpu": 1}},
                 "volumeMounts": [{"name": "launch", "mountPath": "/launch"}]}
    tpl = {"spec": {"containers": [container],
                    "volumes": [{"name": "launch", "configMap": {"name": "launch"}}]}}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "x"}, "spec": {"leaderWorkerTemplate": {
               "leaderTemplate": tpl, "workerTemplate": copy.deepcopy(tpl)}}}
    path = tmp_path / "m.yaml"
    path.write_text(_script_user(yaml.safe_dump(lws)))
    found: list[Finding] = [f for f in check_manifests([path]).findings
                            if f.rule_id == "start-install"]
    assert [(f.line, f.context["object"]) for f in found] == [(6, "ConfigMap/launch")]
    assert found[0].context["workload"] == "LeaderWorkerSet/x leader"


def test_object_level_findings_name_no_part(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "k8s" / "positive"
    report = check_manifests([data / "rayservice-runtime-env.yaml"])
    serve = [f for f in report.findings if f.context["path"] == "spec.serveConfigV2"]
    assert len(serve) == 3 and all("part" not in f.context for f in serve)
    pod = [f for f in report.findings if "workerGroupSpecs" in f.context["path"]]
    assert pod and all(f.context["part"] == "worker group gpu" for f in pod)


def test_a_serve_config_that_is_not_yaml_is_noted(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "k8s" / "positive"
    text = (data / "rayservice-runtime-env.yaml").read_text()
    broken = text.replace("    - name: chat\n", "    - name: [chat\n", 1)
    path = tmp_path / "ray.yaml"
    path.write_text(broken)
    report = check_manifests([path])
    assert not [f for f in report.findings if f.context["path"] == "spec.serveConfigV2"]
    [note] = [n for n in report.notes if "is not readable YAML" in n]
    assert note.startswith("start-install: RayService/chat: spec.serveConfigV2 is not "
                           "readable YAML (malformed YAML: ")
    assert note.endswith("): its runtime_env was not checked")


def test_a_runtime_is_judged_once_per_inference_service_that_uses_it() -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "k8s" / "positive"
    report = check_manifests([data / "kserve-autoselect-pairs.yaml"])
    shm = [f for f in report.findings if f.rule_id == "shm"]
    assert {f.context["object"] for f in shm} == {"ClusterServingRuntime/hf-vllm-fast"}
    assert sorted(f.context["pair"] for f in shm) == [
        "InferenceService/qwen-batch predictor + ClusterServingRuntime/hf-vllm-fast",
        "InferenceService/qwen-chat predictor + ClusterServingRuntime/hf-vllm-fast"]
    assert any("qwen-embed predictor: judged merged with "
               "ClusterServingRuntime/kserve-huggingfaceserver" in n for n in report.notes)
