"""Every bench runs, in --quick mode, on each change: the scripts cannot rot.

--quick checks that a bench works end to end against the real parts (engine, registry, Trivy),
not its figures: small inputs, one round, no verdict. Each bench must have a quick mode and a
case here (the first test fails for a new bench without one).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
HELPERS = {"benchlib.py"}

#: bench -> (a line its quick run must print, the real parts it needs)
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "diff_speed.py": ("[big]   ratio", ()),
    "lint_speed.py": ("servelab lint (1 file, 0.02 MB)", ()),
    "lint_precision.py": ("corpus: 3 Dockerfiles", ()),
    "lint_scaling.py": ("[findings] N=200", ()),
    "hostile_sizes.py": ("against the budgets: not judged (--quick)", ()),
    "build_overhead.py": ("own time: mean", ("docker", "registry")),
    "big_image.py": ("median ratio of 1 pairs", ("docker", "registry")),
    "smoke_precision.py": ("first TCP accept - logged listen()", ("docker", "registry")),
    "scan_repeats.py": ("ratio (wall time, median of rounds)", ("docker", "registry", "trivy")),
    "run_overhead.py": ("servelab's own share", ("docker", "registry", "trivy")),
    "progress_big.py": ("against the bound", ("docker", "registry")),
    "lazy_pull.py": ("medians of 1 round(s)", ("registry",)),
    "cold_steady.py": ("1 run(s) x 1 repeat(s): target met in", ("docker", "registry")),
    "node_starts.py": ("example treatment | full: pull->ready", ("docker", "registry")),
    "verdict_aa.py": ("A/A: the verdict moved in", ("docker", "registry")),
    "verdict_runs.py": ("real change: improved in", ("docker", "registry")),
    "real_image.py": ("peak extra disk by filesystem:", ("docker", "registry", "trivy")),
}


def test_every_bench_has_a_quick_case() -> None:
    benches = {p.name for p in BENCH.glob("*.py")} - HELPERS
    assert benches == set(CASES), "add the new bench to CASES (and give it --quick)"
    for name in sorted(benches):
        text = (BENCH / name).read_text()
        assert '"--quick"' in text, f"{name} has no --quick mode"


def _params() -> list[object]:
    out = []
    for name, (_, parts) in CASES.items():
        marks = [getattr(pytest.mark, p) for p in parts]
        if parts:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(name, marks=marks, id=name.removesuffix(".py")))
    return out


@pytest.mark.parametrize("name", _params())
def test_bench_runs_in_quick_mode(name: str, request: pytest.FixtureRequest,
                                  tmp_path: Path) -> None:
    expect, parts = CASES[name]
    if "docker" in parts:
        request.getfixturevalue("docker_client")
    if "registry" in parts:
        request.getfixturevalue("base_image")
    if "trivy" in parts:
        request.getfixturevalue("trivy_bin")
    env = dict(os.environ, SERVELAB_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path))
    res = subprocess.run([sys.executable, str(BENCH / name), "--quick"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=580, check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"{name} --quick exited {res.returncode}:\n{out[-3000:]}"
    assert expect in res.stdout, out[-3000:]
    assert "Traceback" not in out
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith("servelab-bench")]
    assert left == [], f"{name} left {left} behind"


@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.trivy
@pytest.mark.slow
def test_real_image_builds_reproduce(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The vLLM bench's Dockerfile rebuilds to one digest: pip byte-compiles what it installs,
    and without ``ARG SOURCE_DATE_EPOCH`` each .pyc held its install time (the 3-repeat vLLM
    run found 3 digests, servelab's diff naming the .pyc first)."""
    for fixture in ("docker_client", "base_image", "trivy_bin"):
        request.getfixturevalue(fixture)
    env = dict(os.environ, SERVELAB_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path))
    res = subprocess.run([sys.executable, str(BENCH / "real_image.py"), "--quick", "--repeats",
                          "2", "--no-bare"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=580, check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "treatment: reproducible: 2 builds, one manifest digest" in res.stdout, out[-3000:]
