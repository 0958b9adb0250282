"""Text output at volume: a fix is printed once per rule per file, at the rule's first finding
in that file; JSON and SARIF still carry it on every finding. Fixtures: a Dockerfile where one
rule fires five times (positive) and two files where it fires once each (negative)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "text-volume"


def _lint(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SERVELAB_DEBUG"}
    return subprocess.run([sys.executable, "-m", "servelab", "lint", "--no-hadolint", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def _fixes_per_file(text: str) -> dict[str, list[str]]:
    """The fix lines under each file's findings, in order."""
    fixes: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("    fix: "):
            fixes.setdefault(current, []).append(line)
        elif ": " in line and not line.startswith(" "):
            current = line.split(":", 1)[0]
    return fixes


def test_one_fix_per_rule_in_a_file_where_it_fires_often() -> None:
    path = DATA / "positive" / "Dockerfile"
    text = _lint(str(path))
    assert text.returncode in (0, 1), text.stderr
    findings = [ln for ln in text.stdout.splitlines() if "[unpinned-packages]" in ln
                and not ln.startswith(" ")]
    assert len(findings) >= 3  # the rule fires on every RUN of the fixture
    fixes = _fixes_per_file(text.stdout)[str(path)]
    assert len(fixes) == 1, fixes
    assert f"(for all {len(findings)} [unpinned-packages] findings in this file)" in fixes[0]
    # the fix sits right under the rule's first finding
    lines = text.stdout.splitlines()
    assert lines[lines.index(findings[0]) + 1] == fixes[0]


def test_json_and_sarif_keep_the_fix_on_every_finding() -> None:
    path = str(DATA / "positive" / "Dockerfile")
    doc = json.loads(_lint("-f", "json", path).stdout)
    mine = [f for f in doc["findings"] if f["rule"] == "unpinned-packages"]
    assert len(mine) >= 3
    assert all(f.get("fix") for f in mine)
    sarif = json.loads(_lint("-f", "sarif", path).stdout)
    results = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "unpinned-packages"]
    assert len(results) == len(mine)
    assert all("Fix:" in r["message"]["text"] for r in results)


def test_each_file_keeps_its_own_fix() -> None:
    files = sorted(str(p) for p in (DATA / "negative").rglob("Dockerfile"))
    text = _lint(*files)
    fixes = _fixes_per_file(text.stdout)
    assert sorted(fixes) == files
    for f in files:
        assert len(fixes[f]) == 1
        assert "for all" not in fixes[f][0]  # one finding there: no count
