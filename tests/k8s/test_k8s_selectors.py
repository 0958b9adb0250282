"""Label selectors, int-or-percent rounding and node placement alternatives."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.k8s.load import load_inventory
from servelab.k8s.rules.gpu import _model_token, _product_matches
from servelab.k8s.selectors import node_alternatives, scaled, selector_matches, service_selects

LABELS = {"app": "llm", "tier": "gpu"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        (None, False),
        ({}, True),
        ({"matchLabels": {"app": "llm"}}, True),
        ({"matchLabels": {"app": "other"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
        ({"matchLabels": {"app": "llm"},
          "matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
    ],
)
def test_label_selector(selector: object, matches: bool) -> None:
    assert selector_matches(selector, LABELS) is matches


def test_service_selector() -> None:
    assert service_selects({"app": "llm"}, LABELS)
    assert not service_selects({}, LABELS)  # no selector: endpoints are managed by hand
    assert not service_selects({"app": "llm", "x": "y"}, LABELS)


@pytest.mark.parametrize(
    ("value", "total", "up", "expected"),
    [
        (1, 3, True, 1),
        ("2", 3, True, 2),
        ("25%", 1, False, 0),
        ("25%", 1, True, 1),
        ("50%", 3, False, 1),
        ("50%", 3, True, 2),
        ("100%", 2, True, 2),
        ("0%", 4, True, 0),
        ("lots", 4, True, None),
    ],
)
def test_scaled(value: object, total: int, up: bool, expected: int | None) -> None:
    assert scaled(value, total, round_up=up) == expected


def test_node_alternatives(tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        "  nodeSelector: {pool: gpu}\n"
        "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
        "        nodeSelectorTerms:\n"
        "          - matchExpressions: [{key: a, operator: In, values: [x]}]\n"
        "          - matchExpressions: [{key: b, operator: Gt, values: ['3']}]\n"
        "  containers: [{name: c, image: i}]\n"
    )
    [w] = load_inventory([str(manifest)]).workloads
    alts = node_alternatives(w)
    assert [[(r.key, r.operator, r.values) for r in alt] for alt in alts] == [
        [("pool", "In", ("gpu",)), ("a", "In", ("x",))],
        [("pool", "In", ("gpu",)), ("b", "Gt", ("3",))],
    ]
    assert w.obj.locate(alts[1][1].path).line == 11


@pytest.mark.parametrize(
    ("measured", "label", "matches"),
    [
        ("NVIDIA H200", "NVIDIA-H200", True),
        ("NVIDIA H200", "nvidia-h200-141gb", True),
        ("NVIDIA A100-SXM4-80GB", "nvidia-tesla-a100", True),
        ("NVIDIA L4", "NVIDIA-L40S", False),
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H200", False),
        ("NVIDIA GeForce RTX 4090", "NVIDIA-GeForce-RTX-4090", True),
    ],
)
def test_gpu_product_match(measured: str, label: str, matches: bool) -> None:
    token = _model_token(measured)
    assert token is not None
    assert _product_matches(label, token) is matches


def test_probe_budget_defaults() -> None:
    from servelab.k8s.rules.probes import budget

    assert budget({})[0] == 30  # failureThreshold 3 x periodSeconds 10
    assert budget({"initialDelaySeconds": 15, "periodSeconds": 5, "failureThreshold": 40})[0] == 215
    assert budget({"periodSeconds": "7"})[0] == 21
