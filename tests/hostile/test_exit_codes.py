"""Exit codes and routes the issue found wrong: pin on an unreachable registry, pin --check and
lint on the same FROM line, summaries without results."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.image.pin import pin_file, scan_froms
from servelab.lint import LintConfig, lint_paths

from .harness import run_servelab

GOOD = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good"


def test_pin_exits_3_when_the_registry_cannot_be_reached(tmp_path: Path) -> None:
    """Its help says 3 (a missing capability), not 1 (an unpinned base): port 1 on loopback
    refuses the connection at once."""
    df = tmp_path / "Dockerfile"
    df.write_text("FROM 127.0.0.1:1/app:1\nUSER 10001\n")
    outcome = run_servelab(["pin", str(df)], cwd=tmp_path)
    assert outcome.code == 3, outcome.explain()
    assert "not reachable" in outcome.stderr and "internal error" not in outcome.stderr
    assert df.read_text() == "FROM 127.0.0.1:1/app:1\nUSER 10001\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".home", ".tmp", "Dockerfile"]


def test_a_tag_the_registry_does_not_know_is_a_finding() -> None:
    def missing(image: str) -> str:
        from servelab.errors import InputError

        raise InputError(f"{image} was not found in the registry (HTTP 404)")

    df = GOOD.parent / "dockerfile" / "arg-default-from.Dockerfile"
    report = pin_file(df, check=True, resolve=missing)
    assert report.exit_code == 1


def test_pin_check_and_lint_agree_on_an_arg_default(tmp_path: Path) -> None:
    df = tmp_path / "Dockerfile"
    df.write_text("ARG TAG=3.11\nFROM ${BASE:-python:${TAG}}\nUSER 10001\n")
    [fl] = scan_froms(df.read_text())
    assert (fl.status, fl.resolved) == ("arg", "python:3.11")
    pin = pin_file(df, check=True)
    lint = lint_paths([df], config=LintConfig(), hadolint=False)
    unpinned = [f for f in lint.findings if f.rule_id == "base-unpinned"]
    assert pin.exit_code == 1 and unpinned
    assert [f.rule_id for f in pin.findings.findings] == ["base-unpinned"]
    assert pin.findings.findings[0].severity == unpinned[0].severity


def test_compare_and_report_refuse_a_summary_without_results(tmp_path: Path) -> None:
    empty = tmp_path / "summary.json"
    empty.write_text(json.dumps({"schemaVersion": 1, "results": []}))
    for argv in (["compare", str(empty), str(empty)], ["report", str(empty)]):
        outcome = run_servelab(argv, cwd=tmp_path)
        assert outcome.code == 2, outcome.explain()
        assert "same digest" not in outcome.stdout
        assert "should be non-empty" in outcome.stderr
