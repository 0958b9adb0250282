"""Benchmark: servelab's build path against a bare build, on a big image (>= 0.9 GB).

Builds one image from material already on this machine: the local Debian base
(examples/build-args.env) plus an installed CPU PyTorch tree (about 750 MB, one layer) that
scripts/bootstrap.sh unpacked from the wheel on disk ($SERVELAB_STATE/torch-cpu; else the
wheel in /opt/wheels or $SERVELAB_TORCH_WHEEL is installed into a temporary dir, no download).
Then, in one run, ``--pairs`` alternating pairs (servelab first, then bare first, ...), so that
load from other processes hits both sides alike:

* bare: ``docker buildx build --no-cache --load -t TAG -f Dockerfile CONTEXT`` (the default
  builder; the image is removed after each pair, outside the timing);
* servelab: ``Builds.build`` of the same Dockerfile in one build session, as ``servelab run``
  does its repeats: no-cache BuildKit build exported as OCI (zstd), the registry-shaped gzip
  archive and ``docker load`` once per distinct digest (a repeat with the same digest neither
  compresses nor loads again).

It prints each pair, the median of the pairs' ratios (the issue's figure; target <= 1.3), the
ratio of the sums, servelab's CPU time (this process: the gzip threads included), and the
peak extra disk of a build per GB of image. Exit 0; with --check, 1 when the median is over
the target or the builds do not reproduce.

    .venv/bin/python bench/big_image.py [--pairs 3] [--check]
    .venv/bin/python bench/big_image.py --quick      # a 24 MB stand-in, one pair: does it run?
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import BIG_MARK, DiskPeak, base_image, engine_cpu, machine, prune_build_cache

from servelab import proc

TARGET = 1.3
MIN_BYTES = 900_000_000
EPOCH = 1_700_000_000
GB = 1e9


@dataclass
class Side:
    seconds: float
    disk_peak: int
    cpu_s: float = 0.0
    record: Any = None
    engine_cpu_s: float | None = None


def _engine_delta(before: float | None) -> float | None:
    after = engine_cpu()
    return after - before if after is not None and before is not None else None


def material(quick: bool, tmp: Path) -> Path:
    """The big layer's files: a CPU torch tree (or, with --quick, 24 MB of stand-in files)."""
    if quick:
        d = tmp / "stand-in"
        d.mkdir()
        rng = random.Random(16)  # noqa: S311 (test data)
        for i in range(3):
            chunk = rng.randbytes(4096) + b"libtorch_cpu.so kernel tensor " * 150
            (d / f"lib{i}.so").write_bytes(chunk * (8 * 1024 * 1024 // len(chunk)))
        return d
    state = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup")) / "torch-cpu"
    if (state / ".servelab-torch").is_file():
        return state
    wheels = ([os.environ["SERVELAB_TORCH_WHEEL"]] if os.environ.get("SERVELAB_TORCH_WHEEL")
              else sorted(map(str, Path("/opt/wheels").glob("torch-*+cpu-cp311-cp311-*.whl"))))
    if not wheels:
        raise SystemExit("no CPU torch on this machine: run scripts/bootstrap.sh, or set "
                         "SERVELAB_TORCH_WHEEL to a torch wheel on disk")
    d = tmp / "torch-cpu"
    print(f"installing {Path(wheels[0]).name} into {d} (no download)", flush=True)
    proc.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
              "--disable-pip-version-check", "--target", str(d), wheels[0]], timeout=1800)
    return d


def docker_root() -> Path | None:
    res = proc.run(["docker", "info", "--format", "{{.DockerRootDir}}"], check=False,
                   timeout=60)
    p = Path(res.stdout.strip())
    return p if res.returncode == 0 and p.is_dir() else None


def bare(dockerfile: Path, context: Path, disk: list[Path]) -> Side:
    tag = f"servelab-bench/big-bare:{secrets.token_hex(4)}"
    argv = ["docker", "buildx", "build", "--no-cache", "--load", "-t", tag,
            "-f", str(dockerfile), str(context)]
    try:
        with DiskPeak(disk) as dp:
            e0 = engine_cpu()
            res = proc.run(argv, timeout=3600)
            engine = _engine_delta(e0)
        return Side(res.seconds, dp.peak, engine_cpu_s=engine)
    finally:
        proc.run(["docker", "rmi", "-f", tag], check=False, timeout=300)


def ours(builds: Any, arm: Any, settings: Any, n: int, *, out: Path, disk: list[Path]) -> Side:
    with DiskPeak(disk) as dp:
        t0, c0, e0 = time.monotonic(), time.process_time(), engine_cpu()
        rec = builds.build(arm, settings, repeat=n, out_dir=out / f"repeat-{n}")
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
        engine = _engine_delta(e0)
    return Side(wall, dp.peak, cpu, rec, engine)


def show(n: int, first: str, b: Side, s: Side) -> str:
    r = s.record
    rest = s.seconds - r.build_s - r.shape_s - r.load_s
    return (f"pair {n} ({first} first): bare {b.seconds:6.1f}s (engine CPU {_cpu(b)}) | "
            f"servelab {s.seconds:6.1f}s (buildx {r.build_s:.1f}, gzip {r.shape_s:.1f}, load "
            f"{r.load_s:.1f}, rest {rest:.1f}; engine CPU {_cpu(s)}, servelab CPU "
            f"{s.cpu_s:.1f}s) | ratio {s.seconds / b.seconds:.2f}")


def _cpu(side: Side) -> str:
    return "n/a" if side.engine_cpu_s is None else f"{side.engine_cpu_s:.1f}s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3, help="alternating pairs (default 3)")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 when the median ratio is over {TARGET} or a build differs")
    ap.add_argument("--quick", action="store_true",
                    help="a small stand-in image and one pair: checks the script, not figures")
    args = ap.parse_args()
    pairs = 1 if args.quick else max(3, args.pairs)
    tmp = Path(tempfile.mkdtemp(prefix="servelab-bench-big-"))
    try:
        return run(tmp, pairs, args.quick, args.check)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"removed {prune_build_cache(BIG_MARK)} build-cache records of this bench")


def run(tmp: Path, pairs: int, quick: bool, check: bool) -> int:
    from servelab.build.stage import Builds, verdict
    from servelab.cleanup import Cleanup, new_run_id
    from servelab.spec import Arm, BuildSettings

    context = material(quick, tmp)
    dockerfile = tmp / "Dockerfile"
    dest = f"/opt/{BIG_MARK}/torch"
    dockerfile.write_text(f"FROM {base_image()}\nCOPY . {dest}/\nENV PYTHONPATH={dest}\n")
    arm = Arm("big", context, dockerfile, {})
    settings = BuildSettings(source_date_epoch=EPOCH)
    disk = [tmp] + ([root] if (root := docker_root()) else [])
    print(f"start: {machine()}", flush=True)
    run_id = "bench-" + new_run_id()
    b_sides: list[Side] = []
    s_sides: list[Side] = []
    with Cleanup(run_id) as cu, Builds(run_id, store_dir=tmp / "images", cleanup=cu) as builds:
        for n in range(1, pairs + 1):
            first = "servelab" if n % 2 else "bare"
            if first == "servelab":
                s_sides.append(ours(builds, arm, settings, n, out=tmp, disk=disk))
                b_sides.append(bare(dockerfile, context, disk))
            else:
                b_sides.append(bare(dockerfile, context, disk))
                s_sides.append(ours(builds, arm, settings, n, out=tmp, disk=disk))
            print(show(n, first, b_sides[-1], s_sides[-1]), flush=True)
        records = [s.record for s in s_sides]
        rep = verdict(records)
    return report(records, rep, b_sides, s_sides, quick=quick, check=check)


def report(records: list[Any], rep: Any, b_sides: list[Side], s_sides: list[Side], *,
           quick: bool, check: bool) -> int:
    p = records[0].primary
    size = p.uncompressed_size or 0
    print(f"image: {size / GB:.2f} GB uncompressed, {p.compressed_size / GB:.2f} GB "
          f"compressed (registry-shaped gzip), {len(p.layers)} layers, "
          f"manifest digest {p.manifest_digest}")
    print(f"BuildKit's zstd export (intermediate): {records[0].export['build_manifest_digests']}")
    print(f"reproducibility over {len(records)} builds: {rep.summary}")
    ratios = [s.seconds / b.seconds for b, s in zip(b_sides, s_sides, strict=True)]
    med = statistics.median(ratios)
    total = sum(s.seconds for s in s_sides) / sum(b.seconds for b in b_sides)
    print(f"median ratio of {len(ratios)} pairs: {med:.2f} (target <= {TARGET}: "
          f"{'met' if med <= TARGET else 'MISSED'}); sum of servelab / sum of bare: {total:.2f}")
    print(f"first pair (servelab compresses and loads): {ratios[0]:.2f}; later pairs (same "
          f"digest: BuildKit's build and an index read): "
          + (" ".join(f"{r:.2f}" for r in ratios[1:]) or "none"))
    own, wall = sum(s.cpu_s for s in s_sides), sum(s.seconds for s in s_sides)
    print(f"servelab process CPU over its builds: {own:.1f}s of {wall:.1f}s wall")
    if all(x.engine_cpu_s is not None for x in (*b_sides, *s_sides)):
        eb = sum(x.engine_cpu_s or 0.0 for x in b_sides)
        es = sum(x.engine_cpu_s or 0.0 for x in s_sides)
        print(f"CPU of all {len(b_sides)} builds (engine, plus servelab's process): bare "
              f"{eb:.1f}s, servelab {es:.1f}s + {own:.1f}s = {es + own:.1f}s (the engine is "
              "shared: other users' work counts too)")
    if size:
        print(f"peak extra disk of a build: servelab first build {s_sides[0].disk_peak / GB:.2f} "
              f"GB ({s_sides[0].disk_peak / size:.2f} per GB of image), later builds "
              f"{max((s.disk_peak for s in s_sides[1:]), default=0) / GB:.2f} GB; bare "
              f"{max(b.disk_peak for b in b_sides) / GB:.2f} GB (other processes' writes count)")
    print(f"end: {machine()}")
    if quick:
        return 0
    if size < MIN_BYTES:
        print(f"the image is {size / GB:.2f} GB, under {MIN_BYTES / GB:.1f} GB")
        return 2
    return 1 if check and (med > TARGET or rep.reproducible is False) else 0


if __name__ == "__main__":
    sys.exit(main())
