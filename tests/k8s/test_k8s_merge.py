"""KServe's merge of a model spec onto its runtime's container (servelab.k8s.merge)."""

from __future__ import annotations

from pathlib import Path

from servelab.k8s.load import objects_of, read_documents
from servelab.k8s.merge import merge_container, merge_pod, target_index
from servelab.k8s.model import K8sObject

RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: rt}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  volumes:
    - {name: devshm, emptyDir: {medium: Memory}}
    - {name: cache, emptyDir: {}}
  containers:
    - name: sidecar
      image: proxy:1
    - name: kserve-container
      image: vllm/vllm-openai:v0.8.5
      command: [python3, -m, vllm.entrypoints.openai.api_server]
      args: [--port=8080]
      env:
        - {name: HF_HOME, value: /cache}
        - {name: VLLM_LOGGING_LEVEL, value: INFO}
      securityContext: {runAsNonRoot: true, capabilities: {drop: [ALL]}}
      readinessProbe: {httpGet: {path: /health, port: 8080}, periodSeconds: 10}
      volumeMounts:
        - {name: devshm, mountPath: /dev/shm}
"""
ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: isvc}
spec:
  predictor:
    tolerations: [{key: sku, operator: Equal, value: gpu}]
    volumes:
      - {name: cache, persistentVolumeClaim: {claimName: hf-cache}}
    model:
      modelFormat: {name: vllm}
      args: [--max-model-len=8192]
      env:
        - {name: VLLM_LOGGING_LEVEL, value: DEBUG}
      securityContext: {readOnlyRootFilesystem: true}
      readinessProbe: {periodSeconds: 5}
      volumeMounts:
        - {name: cache, mountPath: /cache}
"""


def _obj(tmp_path: Path, name: str, text: str) -> K8sObject:
    path = tmp_path / name
    path.write_text(text)
    shown, docs = read_documents(str(path))
    [obj] = objects_of(shown, docs[0])
    return obj


def test_the_model_spec_patches_the_runtime_container(tmp_path: Path) -> None:
    rt, isvc = _obj(tmp_path, "rt.yaml", RUNTIME), _obj(tmp_path, "isvc.yaml", ISVC)
    at = target_index(rt)
    assert at == 1  # kserve-container, not the first container
    model = isvc.data["spec"]["predictor"]["model"]
    c, origins = merge_container(rt, at, isvc, ("spec", "predictor", "model"), model)
    assert c["name"] == "kserve-container" and c["image"] == "vllm/vllm-openai:v0.8.5"
    assert c["command"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert c["args"] == ["--port=8080", "--max-model-len=8192"]  # appended, not replaced
    assert c["env"] == [{"name": "HF_HOME", "value": "/cache"},
                        {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]  # by name
    assert c["securityContext"] == {"runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                                    "readOnlyRootFilesystem": True}  # key by key
    assert c["readinessProbe"] == {"httpGet": {"path": "/health", "port": 8080},
                                   "periodSeconds": 5}
    assert [m["mountPath"] for m in c["volumeMounts"]] == ["/dev/shm", "/cache"]
    # every field remembers who wrote it
    assert origins[("image",)] == (rt, ("spec", "containers", 1, "image"))
    assert origins[("args", 1)] == (isvc, ("spec", "predictor", "model", "args", 0))
    assert origins[("env", 1, "value")][0] is isvc
    assert origins[("env", 0, "value")][0] is rt
    assert origins[("securityContext", "runAsNonRoot")][0] is rt
    assert origins[("volumeMounts", 1)][0] is isvc
    assert origins[()] == (rt, ("spec", "containers", 1))  # unset fields: the runtime's


def test_the_pod_merges_the_runtime_pod_fields(tmp_path: Path) -> None:
    rt, isvc = _obj(tmp_path, "rt.yaml", RUNTIME), _obj(tmp_path, "isvc.yaml", ISVC)
    own = isvc.data["spec"]["predictor"]
    pod, origins = merge_pod(rt, isvc, ("spec", "predictor"), own)
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L4"}  # the runtime's
    assert pod["tolerations"] == [{"key": "sku", "operator": "Equal", "value": "gpu"}]  # replaced
    assert pod["volumes"] == [{"name": "devshm", "emptyDir": {"medium": "Memory"}},
                              {"name": "cache",  # replaced whole (retainKeys): one source
                               "persistentVolumeClaim": {"claimName": "hf-cache"}}]
    assert origins[("volumes", 1, "persistentVolumeClaim")][0] is isvc
    assert origins[("nodeSelector",)] == (rt, ("spec", "nodeSelector"))
