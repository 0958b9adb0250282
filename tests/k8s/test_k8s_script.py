"""Reading what a container runs at start, and the small classifiers the rules use on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.findings import Severity
from servelab.k8s import check_manifests
from servelab.k8s.load import load_inventory
from servelab.k8s.model import K8sObject
from servelab.k8s.rules.gpu import quantity
from servelab.k8s.rules.image import moving_tag
from servelab.k8s.rules.model_source import kind_of
from servelab.k8s.rules.secrets import secret_kind
from servelab.k8s.rules.start import install_of
from servelab.k8s.script import (
    Command,
    container_commands,
    expand_k8s,
    expand_shell,
    script_commands,
    tokens,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"


def _words(text: str) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for token, _, op in tokens(text):
        if op:
            out.append([])
        else:
            out[-1].append(token)
    return [w for w in out if w]


def test_tokens_split_commands() -> None:
    text = ('set -e  # strict\npip install "a==1" b && echo \'x; y\' || true\n'
            "vllm serve m \\\n  --port 8000 2>&1 | tee log; exec x\n")
    assert _words(text) == [["set", "-e"], ["pip", "install", "a==1", "b"], ["echo", "x; y"],
                            ["true"], ["vllm", "serve", "m", "--port", "8000", "2>&1"],
                            ["tee", "log"], ["exec", "x"]]
    lines = [line for token, line, op in tokens(text) if token in ("pip", "vllm", "--port")]
    assert lines == [2, 3, 4]


def test_expansion() -> None:
    env = {"MODEL_ID": "org/m", "DIR": "/models"}
    assert expand_k8s("--model=$(MODEL_ID)", env) == "--model=org/m"
    assert expand_k8s("$$(MODEL_ID) $(UNSET)", env) == "$(MODEL_ID) $(UNSET)"
    assert expand_shell("$DIR/${MODEL_ID}", env) == "/models/org/m"
    assert expand_shell("${PORT:-8000} $HOME", env) == "8000 $HOME"


def _commands(tmp_path: Path, container: str, extra: str = "") -> list[Command]:
    path = tmp_path / "pod.yaml"
    path.write_text(extra + "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                    "  volumes: [{name: launch, configMap: {name: launch, items: "
                    "[{key: start, path: run.sh}]}}]\n"
                    f"  containers:\n  - {container}\n")
    inv = load_inventory([str(path)])
    [w] = inv.workloads
    return container_commands(w, w.serving, inv)


def test_shell_forms(tmp_path: Path) -> None:
    for argv in ('["/bin/bash", "-ec"], args: ["M=/m\\nexec vllm serve $M"]',
                 '["/usr/bin/env", "bash", "-c", "M=/m; exec vllm serve $M"]'):
        cmds = _commands(tmp_path, f"{{name: c, image: i, command: {argv}}}")
        assert [c.words for c in cmds] == [("vllm", "serve", "/m")]
    [exec_form] = _commands(tmp_path, '{name: c, image: i, args: ["--model", "$(M)"], '
                                      'env: [{name: M, value: /m}]}')
    assert exec_form.words == ("--model", "/m")
    assert exec_form.where(1)[0][-2:] == ("args", 1)


def test_launch_script_from_a_configmap(tmp_path: Path) -> None:
    cm = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: launch}\ndata:\n  start: |\n"
          "    #!/bin/sh\n    apt-get install -y numactl\n    exec vllm serve /m\n---\n")
    cmds = _commands(tmp_path, '{name: c, image: i, command: ["sh", "/opt/run.sh"], '
                               "volumeMounts: [{name: launch, mountPath: /opt}]}", cm)
    assert [(c.words[0], c.line, c.obj.ref) for c in cmds[1:]] == [
        ("apt-get", 7, "ConfigMap/launch"), ("vllm", 8, "ConfigMap/launch")]


def test_script_lines_in_a_flow_scalar(tmp_path: Path) -> None:
    [w] = load_inventory([str(DATA / "realistic" / "lws-vllm-multinode.yaml")]).workloads[:1]
    cmds = script_commands(w.obj, (*w.serving.path, "command", 2),
                           str(w.serving.data["command"][2]))
    assert {c.line for c in cmds} == {31}  # a quoted string is one field: its first line


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("pip install vllm==0.6.3", "pip install vllm==0.6.3"),
        ("pip3 install -U transformers", "pip install transformers (not pinned)"),
        ("python -m pip install -r requirements.txt", "pip install requirements.txt"),
        ("uv pip install flash-attn", "pip install flash-attn (not pinned)"),
        ("pip install --no-index --find-links /wheels vllm", None),
        ("pip list", None),
        ("apt-get update", None),
        ("apt-get -y install curl", "apt-get install curl"),
        ("curl -fsSL https://x.example/i.sh | bash", "curl https://x.example/i.sh | bash"),
        ("curl -s http://localhost:8000/health", None),
        ("git clone https://github.com/o/r /tmp/r", "git clone https://github.com/o/r"),
        ("git clone https://huggingface.co/o/m /models/m", None),
    ],
)
def test_install_of(line: str, found: str | None, tmp_path: Path) -> None:
    [cmd] = [c for c in script_commands(_any_obj(tmp_path), ("spec",), line) if c.words][:1]
    if cmd.piped_to == () and "|" in line:
        pytest.fail("the pipe was not read")
    assert install_of(cmd) == found


def _any_obj(tmp_path: Path) -> K8sObject:
    path = tmp_path / "o.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
                    "spec: {containers: [{name: c, image: i}]}\n")
    return load_inventory([str(path)]).workloads[0].obj


@pytest.mark.parametrize(
    ("name", "value", "severity"),
    [
        ("HF_TOKEN", "hf_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1W", Severity.ERROR),
        ("ANYTHING", "nvapi-abcdefghijklmnopqrstuvwxyz012345", Severity.ERROR),
        ("VLLM_API_KEY", "s3cr3t-key-for-prod", Severity.WARNING),
        ("DB_PASSWORD", "hunter2hunter2", Severity.WARNING),
        ("HF_TOKEN", "$HF_TOKEN", Severity.WARNING),
        ("HF_TOKEN", "<your token>", Severity.WARNING),
        ("OPENAI_API_KEY", "EMPTY", Severity.WARNING),
        ("HUGGING_FACE_HUB_TOKEN", "changeme", Severity.WARNING),
        ("HF_TOKEN", "$(HF_TOKEN)", None),
        ("HF_TOKEN", "", None),
        ("DB_PASSWORD", "changeme", None),
        ("TOKENIZERS_PARALLELISM", "false", None),
        ("MAX_TOKENS", "4096000000", None),
        ("HF_TOKEN_PATH", "/var/run/secrets/hf/token", None),
    ],
)
def test_secret_kind(name: str, value: str, severity: Severity | None) -> None:
    kind = secret_kind(name, value)
    assert (kind[1] if kind else None) == severity


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("vllm/vllm-openai", "no tag (it pulls latest)"),
        ("registry:5000/app", "no tag (it pulls latest)"),
        ("lmsysorg/sglang:latest", "the moving tag 'latest'"),
        ("vllm/vllm-openai:nightly", "the moving tag 'nightly'"),
        ("lmcache/vllm-openai:latest-nightly", "the moving tag 'latest-nightly'"),
        ("ghcr.io/o/app:main", "the moving tag 'main'"),
        ("vllm/vllm-openai:v0.8.5", None),
        ("app:2025-05-27-v1", None),
        (f"app@sha256:{'a' * 64}", None),
    ],
)
def test_moving_tag(image: str, why: str | None) -> None:
    assert moving_tag(image) == why


@pytest.mark.parametrize(
    ("value", "kind"),
    [("/models/m", "local"), ("org/model", "hub"), ("gpt2", "hub"), ("hf://o/m", "remote"),
     ("s3://b/m", "remote"), ("pvc://claim/m", "mounted"), ("oci://r/m:1", "image"),
     ("$(MODEL_ID)", "unresolved"), ("{{.Name}}", "unresolved"), ("./m", "relative")],
)
def test_kind_of(value: str, kind: str) -> None:
    assert kind_of(value) == kind


def test_quantity() -> None:
    assert quantity("16Gi") == 16 * 2**30
    assert quantity("8G") == 8e9
    assert quantity("1e9") == 1e9
    assert quantity("lots") is None


def test_model_message_shows_the_resolved_name() -> None:
    report = check_manifests([DATA / "positive" / "model-mount-env-resolved.yaml"])
    [f] = report.findings
    assert "'meta-llama/Llama-3.1-8B-Instruct'" in f.message and "$(" not in f.message


def test_token_is_masked() -> None:
    report = check_manifests([DATA / "positive" / "plaintext-secret-hf-token.yaml"])
    [f] = report.findings
    assert "hf_X…" in f.message and "Xy7Kp2" not in f.message
    assert "secretKeyRef" in (f.fix or "")
