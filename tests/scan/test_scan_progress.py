"""``servelab scan``'s progress: Trivy's scan is a step in the log, its own log lines the
detail; never on standard output; none with --quiet. Real Trivy, the fixture DB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scanfixtures import Image, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.trivy]


def test_the_scan_is_a_step_on_stderr_and_json_stays_clean(images: dict[str, Image],
                                                           trivy_cache: Path) -> None:
    target = str(images["treatment"].archive)
    done = run_cli(target, "--offline", "--cache-dir", str(trivy_cache), "--format", "json")
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # the report alone
    steps = [x for x in done.stderr.splitlines() if x.startswith("servelab: Trivy scan of ")]
    assert steps and " done in " in steps[-1], done.stderr
    assert all(not x.startswith("::") and "\x1b" not in x for x in done.stderr.splitlines())
    quiet = run_cli(target, "--offline", "--cache-dir", str(trivy_cache), "--format", "json",
                    "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    json.loads(quiet.stdout)
    assert "servelab: Trivy" not in quiet.stderr and "Trivy scan" in done.stderr
