"""`servelab lint --spec`: every arm of an experiment, with its own build args."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lint_spec_lints_each_arm_with_its_build_args(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    (tmp_path / "Dockerfile").write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nUSER 10001\nCMD [\"python3\", \"app.py\"]\n")
    (tmp_path / "Dockerfile.control").write_text("FROM python\nCMD [\"python3\"]\n")
    exp.write_text(
        "apiVersion: servelab/v1\nkind: Experiment\nspec:\n  change: c\n"
        "  control: {dockerfile: Dockerfile.control, allowUnpinnedBase: true}\n"
        "  treatment:\n    buildArgs: {BASE_IMAGE: \"reg/base:1@sha256:" + "a" * 64 + "\"}\n"
        "  serve: {port: 8000, healthPath: /health}\n")
    proc = subprocess.run([sys.executable, "-m", "servelab", "lint", "--no-hadolint",
                           "--spec", str(exp), "--format", "json"],
                          capture_output=True, text=True, timeout=60, check=False)
    doc = json.loads(proc.stdout)
    by_arm: dict[str, set[str]] = {}
    for f in doc["findings"]:
        by_arm.setdefault(f["context"]["arm"], set()).add(f["rule"])
    assert {"base-unpinned", "base-latest", "root-user"} <= by_arm["control"]
    # the treatment's ARG resolves from the spec's build args: pinned, non-root, health declared
    assert "treatment" not in by_arm, by_arm.get("treatment")
    assert proc.returncode == 1
