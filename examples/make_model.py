"""Make a model directory of a realistic size for the example server, on this machine.

    python examples/make_model.py --size 4G --out DIR [--random] [--shard 1G]
    python examples/make_model.py --size 4G --volume NAME [--random]

It writes the example's ``model.json`` (so the server answers as with ``examples/model``) and
weight shards ``weights-00001-of-0000N.safetensors`` adding up to ``--size`` bytes. By default
the shards are **sparse** files: made at once, no disk used, and read back as zeros (the
server still reads every byte, but a sparse file's holes cause no block I/O). ``--random``
writes real bytes from a fixed-seed generator instead (slow: the machine writes the size), so
that a read after the page cache was dropped shows as block I/O.

``--volume NAME`` creates the named Docker volume (local driver) and writes into its mount
point (root, on the engine's host): the experiment ``examples/experiment-big-model.yaml``
mounts it read-only at /models. Remove it with ``docker volume rm NAME``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

MODEL = {"name": "tiny-linear", "version": 1, "weights": [0.5, -0.25, 1.0], "bias": 0.1}
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
BLOCK = 8 << 20


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)I?B?", text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 4G)")
    return int(m.group(1)) * UNITS[m.group(2)]


def write_shard(path: Path, size: int, rng: random.Random | None) -> None:
    with path.open("wb") as f:
        if rng is None:
            f.truncate(size)
            return
        left = size
        while left > 0:
            n = min(BLOCK, left)
            f.write(rng.randbytes(n))
            left -= n


def make_model(out: Path, size: int, *, shard: int, randomly: bool) -> list[Path]:
    """model.json plus shards adding up to *size* bytes; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("weights-*.safetensors"):
        old.unlink()  # the shards of an earlier size
    (out / "model.json").write_text(json.dumps(MODEL, indent=2) + "\n")
    count = max(1, -(-size // shard))
    rng = random.Random(0) if randomly else None  # noqa: S311 (test data, not secrets)
    files = [out / "model.json"]
    for i in range(count):
        part = min(shard, size - i * shard)
        path = out / f"weights-{i + 1:05d}-of-{count:05d}.safetensors"
        write_shard(path, part, rng)
        files.append(path)
    return files


def volume_dir(name: str) -> Path:
    """Create the named volume (if needed) and return its mount point on this host."""
    from servelab import proc

    proc.run(["docker", "volume", "create", "--label", "servelab.example=model", name],
             timeout=60)
    out = proc.run(["docker", "volume", "inspect", "--format", "{{.Mountpoint}}", name],
                   timeout=60)
    where = Path(out.stdout.strip())
    if not where.is_dir():
        raise SystemExit(f"the volume's mount point {where} is not reachable here "
                         "(run as root on the engine's host, or use --out)")
    return where


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=parse_size, required=True, help="total weights, e.g. 4G")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, help="the model directory to write")
    where.add_argument("--volume", help="a Docker volume to create and fill")
    ap.add_argument("--shard", type=parse_size, default=1 << 30, help="shard size (1G)")
    ap.add_argument("--random", action="store_true", help="real bytes instead of sparse files")
    args = ap.parse_args(argv)
    out = args.out if args.out is not None else volume_dir(args.volume)
    files = make_model(out, args.size, shard=args.shard, randomly=args.random)
    kind = "random" if args.random else "sparse"
    sys.stderr.write(f"{out}: model.json and {len(files) - 1} {kind} shard(s), "
                     f"{args.size} bytes of weights\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
