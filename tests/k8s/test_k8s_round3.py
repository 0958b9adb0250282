"""Cases from the third round of real manifests (eval/realworld m3xx), in miniature: a
StatefulSet's per-pod claim holds the hub cache, and a LeaderWorkerSet group of one has no
worker pods."""

from __future__ import annotations

from pathlib import Path

from servelab.k8s import check_manifests

VLLM = "vllm/vllm-openai:v0.11.0@sha256:" + "ab" * 32

STATEFULSET = f"""\
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: vllm}}
spec:
  serviceName: vllm
  replicas: 2
  selector: {{matchLabels: {{app: vllm}}}}
  template:
    metadata: {{labels: {{app: vllm}}}}
    spec:
      containers:
        - name: vllm
          image: {VLLM}
          args: ["--model=Qwen/Qwen2.5-3B-Instruct-AWQ"]
          env:
            - {{name: HF_HOME, value: /models/hf-cache}}
          resources:
            limits: {{nvidia.com/gpu: "1"}}
          volumeMounts:
            - {{name: {{VOLUME}}, mountPath: /models/hf-cache}}
  volumeClaimTemplates:
    - metadata: {{name: model-cache}}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {{requests: {{storage: 50Gi}}}}
"""


def _rules(tmp_path: Path, text: str, rule: str) -> list[str]:
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    return [f.message for f in check_manifests([path]).findings if f.rule_id == rule]


def test_a_volume_claim_template_keeps_the_hub_cache(tmp_path: Path) -> None:
    assert _rules(tmp_path, STATEFULSET.replace("{VOLUME}", "model-cache"), "model-mount") == []
    # the same mount naming no volume of the pod nor a claim template: no persistent cache
    found = _rules(tmp_path, STATEFULSET.replace("{VOLUME}", "scratch"), "model-mount")
    assert len(found) == 1 and "Qwen/Qwen2.5-3B-Instruct-AWQ" in found[0], found


LWS = f"""\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: vllm}}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: {{SIZE}}
    leaderTemplate:
      spec:
        containers:
          - name: leader
            image: {VLLM}
            resources: {{limits: {{nvidia.com/gpu: "1"}}}}
    workerTemplate:
      spec:
        containers:
          - name: worker
            image: vllm/vllm-openai:latest
            resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""


def test_a_group_of_one_has_no_worker_pods(tmp_path: Path) -> None:
    one = _rules(tmp_path, LWS.replace("{SIZE}", "1"), "image-not-digest")
    assert one == []  # the worker template (on latest) makes no pod
    two = _rules(tmp_path, LWS.replace("{SIZE}", "2"), "image-not-digest")
    assert len(two) == 1 and "latest" in two[0], two


ISVC = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: bloom}
spec:
  predictor:
    model:
      modelFormat: {name: triton}
      runtime: tritonserver-ft
      storageUri: pvc://models/bloom
      resources: {limits: {nvidia.com/gpu: "1"}}
  transformer:
    containers:
      - name: kserve-container
        image: registry.example.internal/bloom-transformer:latest
        command: [python, transformer.py]
"""


def test_a_cpu_transformer_in_front_of_a_gpu_predictor_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "isvc.yaml"
    path.write_text(ISVC, encoding="utf-8")
    report = check_manifests([path])
    front = [f for f in report.findings if "transformer" in str(f.context) + f.message]
    rules = {f.rule_id for f in front}
    assert {"image-not-digest", "security-context", "probe-target"} <= rules, rules
    assert rules <= {"image-not-digest", "security-context", "probe-target", "host-path",
                     "plaintext-secret"}, rules
    assert any("in front of the GPU predictor" in n and "transformer" in n
               for n in report.notes), report.notes


TFSERVING = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: tfserving}
spec:
  replicas: 1
  selector: {matchLabels: {app: tfs}}
  template:
    metadata: {labels: {app: tfs}}
    spec:
      containers:
        - name: tfs
          image: tensorflow/serving:2.14.1-gpu
          command: [/usr/bin/tensorflow_model_server]
          args: [--port=9000, --model_name=finance, --model_base_path=gs://bucket/tfserving/]
          resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_tf_serving_reads_its_model_base_path_from_a_bucket(tmp_path: Path) -> None:
    found = _rules(tmp_path, TFSERVING, "model-mount")
    assert len(found) == 1 and "gs://bucket/tfserving/" in found[0], found
    local = TFSERVING.replace("gs://bucket/tfserving/", "/models/finance")
    found = _rules(tmp_path, local, "model-mount")
    assert len(found) == 1 and "on no volume" in found[0], found
