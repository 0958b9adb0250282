"""Benchmark: the "hostile sizes" of issue 31 (item 6), each command at its own cap, against
the time it must stay under.

* ``history`` on one history file at the JSON cap (32 MiB, ``SERVELAB_MAX_JSON_BYTES``), two
  shapes: many ordinary runs (one a line), and runs whose recorded inputs are as many short
  values as the schema allows (1000 a list): the most JSON nodes a byte can buy;
* ``report`` and ``compare`` on 2,000 results (1,000 a side, both arms);
* ``lint`` on a Makefile whose variables double 24 times (4^24 characters if expanded: the
  expansion budget, ``MAX_MAKE_EXPANSION``) and on a 1 MB Dockerfile (bench/lint_speed.py's);
* ``k8s-check`` on a KServe InferenceService and its ServingRuntime of about 750 KB each
  (13,000 env entries, 3,000 mounts, in opposite orders: the strategic merge), and with
  ``--image`` on an OCI layout whose 1.5 MB layer is whiteouts and opaque markers over 1,900
  scripts (the one-pass layer walk).

Before: history took 24-59 s on such files, report and compare 14-15 s on 2,000 results
(jsonschema's walk of every node, about 3 µs a node); the Makefile hung lint, the merge took
11-15 s and the whiteout layer 40 s. Each case is run as a child process
(``python -m servelab``), whole command, and must finish under its budget (``BUDGET_S``,
CPU seconds of the child, user + system, so that a busy shared machine does not decide; the
wall time is printed beside) and exit as the command should.

    .venv/bin/python bench/hostile_sizes.py [--dir DIR] [--keep] [--quick]

``--quick`` uses 1 MiB files and 100 results and does not judge the times (CI runs it to check
the script works).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CARRIED = ROOT / "tests" / "data" / "history" / "positive" / "carried" / "history.jsonl"
RESULT = ROOT / "tests" / "data" / "hostile" / "good" / "result.json"
CAP = 32 * 1024 * 1024
#: seconds each case must stay under at full size
BUDGET_S = {"history-runs": 20.0, "history-nodes": 20.0, "report-2000": 8.0,
            "compare-2000": 8.0, "lint-makefile": 3.0, "lint-1mb": 5.0,
            "k8s-kserve-merge": 15.0, "k8s-image-whiteouts": 5.0}
BASE = ("127.0.0.1:5000/servelab/python-base:bookworm@sha256:"
        "adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1")


def _entry(n: int) -> dict[str, Any]:
    d: dict[str, Any] = json.loads(CARRIED.read_text().splitlines()[0])
    d["run"]["id"] = f"run-{n}"
    d["run"]["started_at"] = f"20{10 + n % 80:02d}-{1 + n % 12:02d}-{1 + n % 28:02d}T" \
        f"{n % 24:02d}:{n % 60:02d}:00Z"
    d["arms"]["treatment"]["digests"] = [f"sha256:{n % 7:064x}"] if n % 5 else []
    return d


def history_runs(path: Path, size: int) -> int:
    """Ordinary runs, one a line, up to *size* bytes; how many."""
    n, total = 0, 0
    with path.open("w") as f:
        while True:
            line = json.dumps(_entry(n)) + "\n"
            if total + len(line) > size:
                return n
            f.write(line)
            total += len(line)
            n += 1


def history_nodes(path: Path, size: int) -> int:
    """Runs whose recorded inputs are 1000 one-character values a list: the most nodes."""
    n, total = 0, 0
    with path.open("w") as f:
        while True:
            d = _entry(n)
            d["arms"]["treatment"]["inputs"] = {f"k{i}": ["x"] * 1000 for i in range(40)}
            line = json.dumps(d, separators=(",", ":")) + "\n"
            if total + len(line) > size:
                return n
            f.write(line)
            total += len(line)
            n += 1


def results(root: Path, count: int) -> None:
    """*count* result.json files under A and under B (both arms)."""
    base = json.loads(RESULT.read_text())
    for side in ("a", "b"):
        for n in range(count):
            d = json.loads(json.dumps(base))
            d["arm"] = ("control", "treatment")[n % 2]
            d["repeat"] = n // 2 + 1
            p = root / side / d["arm"] / f"repeat-{d['repeat']}"
            p.mkdir(parents=True, exist_ok=True)
            (p / "result.json").write_text(json.dumps(d))


def lint_makefile(root: Path, levels: int) -> None:
    """A Dockerfile whose start command is ``make serve``, over doubling variables."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ["V0 = xxxxxxxxxxxxxxxx"]
    lines += [f"V{i} = $(V{i - 1})$(V{i - 1})$(V{i - 1})$(V{i - 1})" for i in range(1, levels)]
    last = f"V{levels - 1}"
    (root / "Makefile").write_text("\n".join(lines) + f"\nserve: $({last})\n\techo $({last}) "
                                   "&& pip install torch\n")
    (root / "Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /srv\nCOPY Makefile ./\n"
                                     'USER 10001\nCMD ["make", "serve"]\n')


def lint_big(path: Path, size: int) -> None:
    """bench/lint_speed.py's realistic Dockerfile of *size* bytes."""
    sys.path.insert(0, str(ROOT / "bench"))
    from lint_speed import make_big

    make_big(path, size)


def kserve(root: Path, env: int, mounts: int) -> None:
    """An InferenceService and its ServingRuntime, the lists in opposite orders."""
    root.mkdir(parents=True, exist_ok=True)
    rt = ["apiVersion: serving.kserve.io/v1alpha1", "kind: ServingRuntime",
          "metadata: {name: rt}", "spec:", "  containers:", "    - name: kserve-container",
          "      image: vllm/vllm-openai:v0.8.5", "      args: [--port=8080]", "      env:"]
    rt += [f"        - {{name: VAR_{i}, value: runtime-{i}}}" for i in range(env)]
    rt += ["      volumeMounts:"]
    rt += [f"        - {{name: v{i}, mountPath: /mnt/{i}}}" for i in range(mounts)]
    isvc = ["apiVersion: serving.kserve.io/v1beta1", "kind: InferenceService",
            "metadata: {name: isvc}", "spec:", "  predictor:", "    model:",
            "      modelFormat: {name: vllm}", "      runtime: rt", "      env:"]
    isvc += [f"        - {{name: VAR_{env - 1 - i}, value: patch-{i}}}" for i in range(env)]
    isvc += ["      volumeMounts:"]
    isvc += [f"        - {{name: p{i}, mountPath: /mnt/{mounts - 1 - i}}}"
             for i in range(mounts)]
    (root / "rt.yaml").write_text("\n".join(rt) + "\n")
    (root / "isvc.yaml").write_text("\n".join(isvc) + "\n")


def whiteout_image(root: Path, scripts: int) -> None:
    """An OCI layout: *scripts* scripts, then a layer of whiteouts and opaque markers over
    them, then the one script the entrypoint runs; and a Deployment that runs it."""
    sys.path.insert(0, str(ROOT / "tests"))
    from ocitest import E, tar_bytes, write_layout

    good = b"#!/bin/sh\nexec python -m http.server\n"
    many = [E(f"d{i % 50}/f{i}.sh", good, 0o755) for i in range(scripts)]
    outs = [E(f"d{i % 50}/.wh.f{i}.sh") for i in range(scripts)]
    outs += [E(f"d{i % 50}/.wh..wh..opq") for i in range(scripts // 4)]
    outs += [E(f"x{i}/.wh.gone{i}") for i in range(scripts // 3)]
    root.mkdir(parents=True, exist_ok=True)
    write_layout(root / "layout", [tar_bytes(many), tar_bytes(outs),
                                   tar_bytes([E("opt/start.sh", good, 0o755)])],
                 config={"config": {"Entrypoint": ["/opt/start.sh"]}})
    (root / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n"
        "  selector: {matchLabels: {app: web}}\n  template:\n"
        "    metadata: {labels: {app: web}}\n    spec:\n      containers:\n"
        "        - name: web\n          image: web:1\n")


def timed(argv: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds (user + system) of the child, its exit code, its stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "servelab", *argv], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=600, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode, proc.stderr[-400:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, help="where to write the inputs (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the inputs")
    ap.add_argument("--quick", action="store_true",
                    help="small inputs, no verdict (CI checks the script works)")
    args = ap.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="servelab-bench-sizes-"))
    work.mkdir(parents=True, exist_ok=True)
    size, count = (1024 * 1024, 100) if args.quick else (CAP - 4096, 2000)
    failed = []
    try:
        made = {"history-runs": history_runs(work / "runs.history.jsonl", size),
                "history-nodes": history_nodes(work / "nodes.history.jsonl", size)}
        results(work / "results", count)
        lint_makefile(work / "make", 24)
        lint_big(work / "big.Dockerfile", 20_000 if args.quick else 1_000_000)
        kserve(work / "kserve", *((500, 100) if args.quick else (13_000, 3_000)))
        whiteout_image(work / "image", 100 if args.quick else 1_900)
        cases = {
            "history-runs": (["history", "--format", "markdown", "runs.history.jsonl"], (0,)),
            "history-nodes": (["history", "--format", "markdown", "nodes.history.jsonl"], (0,)),
            "report-2000": (["report", "results/a", "results/b"], (0, 1, 2)),
            "compare-2000": (["compare", "results/a", "results/b"], (0, 1, 2)),
            "lint-makefile": (["lint", "--no-hadolint", "make/Dockerfile"], (0, 1)),
            "lint-1mb": (["lint", "--no-hadolint", "big.Dockerfile"], (0, 1)),
            "k8s-kserve-merge": (["k8s-check", "kserve/rt.yaml", "kserve/isvc.yaml"], (0, 1)),
            "k8s-image-whiteouts": (["k8s-check", "--image", "image/layout",
                                     "image/deploy.yaml"], (0, 1)),
        }
        print(f"inputs: history files of {size} bytes ({made['history-runs']} runs; "
              f"{made['history-nodes']} runs of 40,000 values), {count} results a side; a "
              "Makefile doubling 24 times; a Dockerfile of "
              f"{(work / 'big.Dockerfile').stat().st_size} bytes; KServe specs of "
              f"{(work / 'kserve' / 'isvc.yaml').stat().st_size} bytes; a whiteout layer")
        for name, (argv, codes) in cases.items():
            wall, seconds, code, err = timed(argv, work)
            budget = BUDGET_S[name]
            ok = code in codes and (args.quick or seconds <= budget)
            print(f"[{name}] {seconds:6.2f} CPU s, {wall:6.2f} s wall (budget {budget:g} CPU s "
                  f"at full size), exit {code}{'' if ok else '  FAILED'}")
            if not ok:
                failed.append(f"{name}: {seconds:.2f} s, exit {code}: {err}")
        print("against the budgets:", "not judged (--quick)" if args.quick else
              ("every case within its budget" if not failed else "; ".join(failed)))
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
