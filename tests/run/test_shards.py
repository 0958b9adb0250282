"""Shards: `servelab run --shard ARM:N` runs one arm's repeat, and `servelab report` merges the
shards' directories into the verdict and summary one machine gives."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "experiment.yaml"

#: what must be equal between one machine's summary and the shards' merge of the same results
SAME = ("verdict", "reasons", "exit_code", "reproducible", "digest", "size_bytes",
        "startup_p50_s", "findings", "repeats", "arms", "not_tested", "skipped")


def _servelab(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "servelab", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def _as_shard(src: Path, arm: str, n: int, dest: Path) -> Path:
    """One repeat of a whole run, copied as the shard that ran only it."""
    d = dest / f"{arm}-{n}"
    shutil.copytree(src / arm / f"repeat-{n}", d / arm / f"repeat-{n}")
    p = d / arm / f"repeat-{n}" / "result.json"
    r = json.loads(p.read_text())
    r["run"]["shard"] = {"arm": arm, "repeat": n, "of": r["experiment"]["repeats"]}
    p.write_text(json.dumps(r))
    return d


def _metrics(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: summary.get(k) for k in SAME} | {
        k: v for k, v in summary.items() if k.startswith(("pulled_", "node_"))}


@pytest.mark.docker
@pytest.mark.trivy
def test_shards_merge_to_the_single_machine_verdict(tmp_path: Path, docker_client: object,
                                                    fixture_trivy_cache: Path) -> None:
    common = ["--stages", "build,scan,smoke", "--repeats", "2", "--offline",
              "--trivy-cache-dir", str(fixture_trivy_cache), "--format", "json"]
    single = tmp_path / "single"
    one = _servelab("run", str(EXAMPLE), "--out", str(single), *common)
    assert one.returncode in (0, 1), one.stderr[-3000:]
    whole = json.loads((single / "summary.json").read_text())
    # the run's final clean-up is timed, within the run's own span
    span = (datetime.fromisoformat(whole["run"]["finished_at"])
            - datetime.fromisoformat(whole["run"]["started_at"])).total_seconds()
    assert isinstance(whole["cleanup_s"], float) and 0 <= whole["cleanup_s"] < span

    # the same measurements as shards: the merge is exactly the one-machine summary
    split = [_as_shard(single, a, n, tmp_path / "split") for a in ("control", "treatment")
             for n in (1, 2)]
    merged = _servelab("report", "--format", "json", "--out", str(tmp_path / "m1"),
                       *map(str, split))
    assert merged.returncode == whole["exit_code"], merged.stderr[-2000:]
    m = json.loads(merged.stdout)
    assert _metrics(m) == _metrics(whole)
    assert [(r["arm"], r["repeat"]) for r in m["results"]] == [
        (r["arm"], r["repeat"]) for r in whole["results"]]  # ABBA, as one machine runs
    assert m["reproducibility"]["treatment"]["reproducible"] == \
        whole["reproducibility"]["treatment"]["reproducible"]
    assert (tmp_path / "m1" / "summary.md").read_text().count("treatment") > 0

    # real shards, one arm and repeat each (run here one after the other)
    shards = []
    for arm, n in (("control", 1), ("treatment", 1), ("treatment", 2), ("control", 2)):
        out = tmp_path / "shards" / f"{arm}-{n}"
        res = _servelab("run", str(EXAMPLE), "--out", str(out), "--shard", f"{arm}:{n}",
                        *common)
        assert res.returncode == 0, res.stderr[-3000:]
        s = json.loads((out / "summary.json").read_text())
        assert s["verdict"] == "shard" and s["shard"] == {"arm": arm, "repeat": n, "of": 2}
        assert isinstance(s["cleanup_s"], float) and s["cleanup_s"] >= 0
        assert [(r["arm"], r["repeat"]) for r in s["results"]] == [(arm, n)]
        shards.append(out)
    rep = _servelab("report", "--format", "json", *map(str, shards))
    merged2 = json.loads(rep.stdout)
    print(json.dumps({k: (merged2[k], whole[k]) for k in ("verdict", "reasons")}))
    assert rep.returncode == merged2["exit_code"]
    # the same images: the same digests and sizes, so the same verdict on them
    for arm in ("control", "treatment"):
        assert {r["image"]["digest"] for r in merged2["results"] if r["arm"] == arm} == \
            {r["image"]["digest"] for r in whole["results"] if r["arm"] == arm}
    for k in ("verdict", "digest", "size_bytes", "findings", "reproducible", "arms"):
        assert merged2[k] == whole[k], k
    assert merged2["shards"] == 4

    # a missing shard is bad input, never a verdict
    short = _servelab("report", *map(str, shards[:3]))
    assert short.returncode == 2 and "missing: control 2" in short.stderr
