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
