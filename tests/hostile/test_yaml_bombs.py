"""A "billion laughs" spread over many documents of one file: each document under the
per-document cap, the file over the per-file one. Every command that reads YAML (the
experiment, k8s manifests, lint settings) stops at the file and line, exit 2, within the
hostile-input promise (time and memory), where it used to build gigabytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import run_servelab

GOOD = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good"

_DOC = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: [*e]\n"
)

COMMANDS = {
    "validate": ["validate", "{f}"],
    "k8s-check": ["k8s-check", "{f}"],
    "lint --config": ["lint", "--no-hadolint", "--config", "{f}", str(GOOD / "Dockerfile")],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_many_documents_each_under_the_cap_stop_at_the_file_cap(
        command: str, tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("---\n".join([_DOC] * 300))
    argv = [a.format(f=bomb) for a in COMMANDS[command]]
    outcome = run_servelab(argv, cwd=tmp_path)
    assert not outcome.problems(), outcome.explain()
    assert outcome.code == 2, outcome.explain()
    assert f"{bomb}:12" in outcome.stderr + outcome.stdout, outcome.explain()
    assert "across its documents" in outcome.stderr + outcome.stdout


def test_a_file_of_documents_with_a_few_aliases_each_is_read(tmp_path: Path) -> None:
    """The other way: aliases that add little, in many documents, are no bomb."""
    doc = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\n"
           "data: &d {a: '1', b: '2'}\nbinaryData: *d\n")
    manifests = tmp_path / "many.yaml"
    manifests.write_text("---\n".join([doc] * 2000))
    outcome = run_servelab(["k8s-check", str(manifests)], cwd=tmp_path)
    assert not outcome.problems(), outcome.explain()
    assert "billion laughs" not in outcome.stderr + outcome.stdout


_RAY = """apiVersion: ray.io/v1
kind: RayService
metadata: {name: r%d}
spec:
  serveConfigV2: |
    a: &a [x, x, x, x, x, x, x, x, x]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    applications: [*e]
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers:
            - name: ray-head
              image: registry.example.internal/ray/chat:1.4.0@sha256:%s
"""


def test_yaml_in_strings_counts_against_the_files_cap(tmp_path: Path) -> None:
    """Each RayService's serveConfigV2 just under the cap, 300 of them: read once each and
    counted against the file's cap (it was read four times per object, each time anew,
    about 2 s an object); the ones past the cap are noted, never a silent pass."""
    manifests = tmp_path / "ray.yaml"
    manifests.write_text("---\n".join(_RAY % (i, "7" * 64) for i in range(300)))
    outcome = run_servelab(["k8s-check", str(manifests)], cwd=tmp_path)
    assert not outcome.problems(), outcome.explain()
    notes = [ln for ln in (outcome.stdout + outcome.stderr).splitlines()
             if "spec.serveConfigV2 is not readable YAML (the file's YAML aliases expand to "
             "more than 200000 values" in ln]
    assert len(notes) == 299, outcome.explain()  # the first is read; the cap stops the rest


def test_a_configmap_experiment_counts_its_spec_yaml_against_the_files_cap(
        tmp_path: Path) -> None:
    inner = "".join(f"    {line}\n" for line in _DOC.replace("f: [*e]", "g: [*e]").splitlines())
    exp = tmp_path / "experiment.yaml"
    exp.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nx-anchors:\n"
                   + "".join(f"  {line}\n" for line in _DOC.splitlines())
                   + "data:\n  change: c\n  spec.yaml: |\n" + inner)
    outcome = run_servelab(["validate", str(exp)], cwd=tmp_path)
    assert not outcome.problems(), outcome.explain()
    assert outcome.code == 2 and "aliases expand to more than" in outcome.stdout, \
        outcome.explain()
