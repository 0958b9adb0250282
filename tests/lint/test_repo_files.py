"""Files that ship with the lint feature: docs, pre-commit hooks, the bench script."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from servelab.lint import RULES

from .conftest import REPO


def test_docs_describe_every_rule_with_its_severity() -> None:
    text = (REPO / "docs" / "lint.md").read_text()
    for rid, rule in RULES.items():
        m = re.search(rf"^### `{re.escape(rid)}`\n\n\*(\w+)\.\*", text, re.M)
        assert m, f"docs/lint.md has no section for {rid}"
        assert m.group(1) == rule.severity.value
        assert rule.help_uri.endswith("#" + rid)  # GitHub's anchor for the heading


def test_pre_commit_hooks() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"servelab-lint", "servelab-validate"}
    lint = hooks["servelab-lint"]
    assert lint["entry"] == "servelab lint"
    picked = [
        p for p in ["Dockerfile", "svc/Dockerfile.gpu", "api.Dockerfile", "Dockerfile.dockerignore",
                    "README.md", "examples/experiment.yaml"]
        if re.search(lint["files"], p) and not re.search(lint["exclude"], p)
    ]
    assert picked == ["Dockerfile", "svc/Dockerfile.gpu", "api.Dockerfile"]
    validate = hooks["servelab-validate"]
    assert validate["entry"] == "servelab validate"
    assert re.search(validate["files"], "examples/experiment.yaml")


def test_bench_script_runs_and_prints_both_figures() -> None:
    done = subprocess.run(
        # case 4 on 20 kB: hadolint, timed beside it, takes minutes on the full 1 MB
        [sys.executable, str(REPO / "bench" / "lint_speed.py"), "--runs", "1",
         "--big-bytes", "20000"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "python -c pass" in done.stdout
    assert re.search(r"servelab lint \(1 file, no hadolint\)\s+[\d.]+ ms\s+target <=", done.stdout)
    followed = r"servelab lint \(1 file, 50 modules followed\)\s+[\d.]+ ms\s+target <="
    assert re.search(followed, done.stdout)
    many = r"servelab lint \(1000 files, 1 call\)\s+[\d.]+ ms\s+target < 5000"
    assert re.search(many, done.stdout)
    big = r"servelab lint \(1 file, 0.02 MB\)\s+[\d.]+ s\s+target <= 5 s.*hadolint"
    assert re.search(big, done.stdout)
