"""Benchmark: what a person and a CI log see of `servelab build` on a big image (>= 0.9 GB).

The image is bench/big_image.py's: the local Debian base plus an installed CPU PyTorch tree
(about 750 MB, one layer; ``--quick``: 24 MB of stand-in files). One no-cache build each way:

* **terminal**: `servelab build` with a pty (python's pty module) as its terminal. Printed: the
  build's seconds, how many times the live line was redrawn in place, the longest time with no
  redraw while the command ran (the issue's "live": a figure of seconds, not minutes), and how
  many newlines it wrote (a live line does not scroll).
* **log**: `servelab build` with GITHUB_ACTIONS=true and stderr a pipe. Printed: the lines of
  progress against the bound steps + ceil(duration / 10 s) + 5 (steps counted from the build's
  own record: build.log's vertices, the re-gzip pass and each layer it compressed, the load).

    .venv/bin/python bench/progress_big.py [--check]   # --check: exit 1 over the bound
    .venv/bin/python bench/progress_big.py --quick     # does it run?
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import BIG_MARK, base_image, machine
from big_image import EPOCH, material

ROOT = Path(__file__).resolve().parents[1]


#: the --allow-path options the build needs: the big context (a CPU torch tree) lies outside
#: the experiment's folder, which the path rule allows only from the command line
ALLOW: list[str] = []


def experiment(tmp: Path, context: Path) -> Path:
    ALLOW[:] = ["--allow-path", f"context={context}"]
    dest = f"/opt/{BIG_MARK}/torch"
    (tmp / "Dockerfile").write_text(f"FROM {base_image()}\nCOPY . {dest}/\nENV PYTHONPATH={dest}\n")
    exp = tmp / "experiment.yaml"
    exp.write_text(
        "apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: progress-big}\n"
        "spec:\n  change: one big build, watched\n  repeats: 1\n  treatment:\n"
        f"    context: {context}\n    dockerfile: {tmp / 'Dockerfile'}\n"
        f"    allowUnpinnedBase: true\n  build: {{sourceDateEpoch: {EPOCH}}}\n")
    return exp


def argv(exp: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "servelab", "build", str(exp), "--out", str(out), "-f", "json",
            "-o", str(out.with_suffix(".json")), *ALLOW]


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "CI")}
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return {**e, **extra}


def in_pty(cmd: list[str]) -> tuple[list[tuple[float, bytes]], int, float]:
    """(time, bytes) of everything written to the terminal, the exit code, the seconds."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    t0 = time.monotonic()
    child = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env(), cwd=ROOT)
    os.close(slave)
    got: list[tuple[float, bytes]] = []
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            got.append((time.monotonic() - t0, data))
        elif child.poll() is not None:
            break
    os.close(master)
    return got, child.wait(), time.monotonic() - t0


def steps(out: Path) -> int:
    rep = out / "treatment" / "repeat-1"
    log = (rep / "build.log").read_text()
    shaped = json.loads((rep / "build.json").read_text())["export"]["layers_compressed"]
    # + the build, the re-gzip pass, docker load, the clean-up and the image it removes
    return len({m.group(1) for m in re.finditer(r"^#(\d+) ", log, re.M)}) + 5 + shaped


def terminal(exp: Path, tmp: Path) -> str:
    out = tmp / "tty"
    got, rc, took = in_pty(argv(exp, out))
    if rc != 0:
        raise SystemExit(f"servelab build failed in the pty (exit {rc})")
    frames = [(t, part.decode("utf-8", "replace")) for t, data in got
              for part in data.split(b"\r\x1b[K")[1:]]
    redraws = [t for t, _ in frames]
    gaps = [(b - a, text) for (a, text), b in zip(frames, [*redraws[1:], took], strict=True)]
    gap, before = max(gaps)
    record = json.loads((out / "treatment" / "repeat-1" / "build.json").read_text())
    newlines = sum(data.count(b"\n") for _, data in got)
    return (f"terminal: {took:.1f}s in all (build {record['build_s']:.1f}s, "
            f"{record['compressed_size'] / 1e9:.2f} GB compressed, "
            f"{(record['layers'][-1]['uncompressed_size'] or 0) / 1e9:.2f} GB new layer); "
            f"{len(redraws)} redraws in place, first after {redraws[0]:.2f}s, longest gap "
            f"after it {gap:.2f}s (after {before.strip()[:70]!r}), "
            f"{newlines} newlines")


def log(exp: Path, tmp: Path, check: bool) -> tuple[str, bool]:
    out = tmp / "log"
    t0 = time.monotonic()
    res = subprocess.run(argv(exp, out), env=env(GITHUB_ACTIONS="true"), cwd=ROOT,
                         capture_output=True, text=True, timeout=3600, check=False)
    took = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"servelab build failed: {res.stderr[-2000:]}")
    lines = res.stderr.splitlines()
    bound = steps(out) + math.ceil(took / 10) + 5
    beats = sum(1 for x in lines if " | " in x)
    ok = len(lines) <= bound
    return (f"log: {took:.1f}s, {len(lines)} lines ({beats} heartbeats) against the bound "
            f"{bound}: {'within' if ok else 'OVER'}"), ok or not check


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 24 MB stand-in (does it run?)")
    ap.add_argument("--check", action="store_true", help="exit 1 when over the line bound")
    args = ap.parse_args()
    print(f"start: {machine()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="servelab-progress-") as d:
        tmp = Path(d)
        exp = experiment(tmp, material(args.quick, tmp))
        print(terminal(exp, tmp), flush=True)
        text, ok = log(exp, tmp, args.check)
        print(text, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
