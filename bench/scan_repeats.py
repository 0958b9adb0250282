"""Does scanning 3 repeats of a reproducible build cost about one scan?

Builds one image of at least 100 MB (compressed; the example's base image plus incompressible
data) three times with the same SOURCE_DATE_EPOCH into three OCI layout directories (equal
digests), then times, from fresh Trivy caches holding the fixture DB (tests/trivydb.py):

* servelab: ``servelab scan A B C --offline --json ... --sbom ...`` (one process; equal
  digests are scanned once);
* bare Trivy: ``trivy image --input A --format json`` and ``trivy image --input A --format
  cyclonedx``, the two commands that produce the same JSON and CycloneDX output once, with
  the same flags (offline, no telemetry, vuln+secret scanners, all packages listed).

Each round times both sides back to back (order alternated), so load from other processes
hits both alike; the figure is the median of the rounds' ratios, for wall-clock time and for
CPU time (user + system of every process, Trivy included: steadier on a busy machine).
Target: <= 1.15.
Run: python bench/scan_repeats.py [--runs 3] [--check] (needs Docker with buildx, the local
registry's base image from scripts/bootstrap.sh, and Trivy). ``--quick``: one round on a 1 MB
pad, no size floor, no verdict (CI runs it to check the script works).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import trivydb  # noqa: E402
from servelab import proc  # noqa: E402
from servelab.scan.trivy import OFFLINE_FLAGS, QUIET_FLAGS  # noqa: E402

TARGET = 1.15
MIN_BYTES = 100 * 1024 * 1024
EPOCH = "1700000000"
COMMON = [*QUIET_FLAGS, *OFFLINE_FLAGS, "--no-progress", "--config", "", "--ignorefile", "",
          "--scanners", "vuln,secret", "--list-all-pkgs", "--show-suppressed",
          "--timeout", "1800s"]


def _base_image() -> str:
    for line in (REPO / "examples" / "build-args.env").read_text().splitlines():
        if line.startswith("BASE_IMAGE="):
            return line.split("=", 1)[1].strip()
    raise SystemExit("no BASE_IMAGE in examples/build-args.env: run scripts/bootstrap.sh")


def _layout_bytes(layout: Path) -> int:
    index = json.loads((layout / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((layout / "blobs" / "sha256" / digest).read_text())
    return sum(int(x["size"]) for x in [manifest["config"], *manifest["layers"]])


def _build(ctx: Path, dest: Path) -> str:
    proc.run(
        ["docker", "buildx", "build", "--network", "none", "--provenance=false",
         "--label", "servelab.run-id=bench-scan-repeats",
         "--output", f"type=oci,dest={dest},tar=false,rewrite-timestamp=true", str(ctx)],
        env={"SOURCE_DATE_EPOCH": EPOCH, "BUILDX_NO_DEFAULT_ATTESTATIONS": "1"},
        timeout=1800,
    )
    index = json.loads((dest / "index.json").read_text())
    return str(index["manifests"][0]["digest"])


def _make_image(work: Path, pad_bytes: int) -> list[Path]:
    ctx = work / "ctx"
    ctx.mkdir(exist_ok=True)
    # seeded, so every bench run builds the same layer (the build cache does not grow)
    payload = random.Random(20261130).randbytes(pad_bytes)  # noqa: S311 (not a secret)
    (ctx / "payload.bin").write_bytes(payload)
    (ctx / "Dockerfile").write_text(
        f"FROM {_base_image()}\nCOPY payload.bin /opt/bench/payload.bin\n"
    )
    layouts = [work / f"repeat-{i}" for i in (1, 2, 3)]
    digests = {_build(ctx, d) for d in layouts}
    if len(digests) != 1:
        raise SystemExit(f"the three builds differ: {sorted(digests)}")
    return layouts


def _fresh_cache(db: Path, root: Path) -> Path:
    cache = Path(tempfile.mkdtemp(dir=root, prefix="cache-"))
    shutil.copytree(db / "db", cache / "db")
    return cache


def _servelab(layouts: list[Path], cache: Path, out: Path) -> list[str]:
    script = Path(sys.executable).with_name("servelab")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "servelab"]
    return [*head, "scan", *map(str, layouts), "--offline", "--cache-dir", str(cache),
            "--fail-on", "none", "--json", str(out / "result.json"),
            "--sbom", str(out / "sbom.cdx.json"), "--out-dir", str(out / "files")]


def _bare(layout: Path, cache: Path, out: Path) -> list[list[str]]:
    trivy = shutil.which("trivy") or str(Path(sys.executable).with_name("trivy"))
    base = [trivy, "image", *COMMON, "--cache-dir", str(cache), "--input", str(layout)]
    return [[*base, "--format", "json", "--output", str(out / "trivy.json")],
            [*base, "--format", "cyclonedx", "--output", str(out / "sbom.cdx.json")]]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(commands: list[list[str]]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of every process started, Trivy included)."""
    start, cpu = time.perf_counter(), _cpu()
    for cmd in commands:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"failed ({done.returncode}): {cmd}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, _cpu() - cpu


def _line(name: str, xs: list[float]) -> str:
    return f"{name}: median {statistics.median(xs):.2f}s  " + " ".join(f"{x:.2f}" for x in xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="rounds (median of the ratios)")
    ap.add_argument("--check", action="store_true", help=f"exit 1 when the ratio > {TARGET}")
    ap.add_argument("--metric", choices=["cpu", "wall"], default="wall",
                    help="which ratio --check judges (default: wall; cpu is steadier on a "
                    "busy machine)")
    ap.add_argument("--pad-mb", type=int, default=64,
                    help="incompressible MB added to the base image (default: 64)")
    ap.add_argument("--quick", action="store_true",
                    help="one round, 1 MB pad, no verdict: checks the script, not the figures")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.pad_mb, args.check = 1, 1, False
    work = Path(tempfile.mkdtemp(prefix="servelab-bench-scan-"))
    try:
        layouts = _make_image(work, args.pad_mb * 1024 * 1024)
        size = _layout_bytes(layouts[0])
        if size < MIN_BYTES and not args.quick:
            raise SystemExit(f"image is {size / 2**20:.0f} MB; raise --pad-mb")
        db = work / "db-source"
        trivydb.write_db(db)
        ours: list[tuple[float, float]] = []
        bare: list[tuple[float, float]] = []
        for i in range(args.runs):
            outs = [Path(tempfile.mkdtemp(dir=work, prefix=f"out{i}-")) for _ in range(2)]
            jobs = [
                (ours, [_servelab(layouts, _fresh_cache(db, work), outs[0])]),
                (bare, _bare(layouts[0], _fresh_cache(db, work), outs[1])),
            ]
            for sink, cmds in (jobs if i % 2 == 0 else jobs[::-1]):
                sink.append(_timed(cmds))
        print(f"image: {size / 2**20:.0f} MB compressed, 3 repeats with one digest, "
              f"{args.runs} rounds, load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs")
        ratios = {}
        for k, metric in enumerate(("wall", "cpu")):
            o, b = [x[k] for x in ours], [x[k] for x in bare]
            r = [x / y for x, y in zip(o, b, strict=True)]
            ratios[metric] = statistics.median(r)
            print(_line(f"  {metric}: servelab scan (3 targets, 1 scan)", o))
            print(_line(f"  {metric}: bare trivy json + cyclonedx (1x) ", b))
            print(f"  {metric}: ratios per round " + " ".join(f"{x:.3f}" for x in r))
        for metric, ratio in ratios.items():
            verdict = "met" if ratio <= TARGET else "MISSED"
            print(f"ratio ({metric} time, median of rounds) {ratio:.3f}: target <= {TARGET} "
                  f"{verdict}")
        ratio = ratios[args.metric]
        return 1 if args.check and ratio > TARGET else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
