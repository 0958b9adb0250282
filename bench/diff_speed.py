"""Benchmark: `servelab diff` against `gzip -dc | sha256sum` over the layers that differ.

Writes three pairs of ~500 MB OCI images (layout dirs):

* top:  one file differs, in a small top layer (the 480 MB layer below is shared);
* big:  one file differs, inside the largest layer (a file in the middle of 480 MB);
* recompressed: the same 480 MB tar compressed at another gzip level (same diff_id, other
  digest): servelab reads both through to verify their digests and the diff_id before it
  says "encoding-only" (it used to take the config's word and read nothing).

Every blob servelab reads is verified (sha256 and declared size) in the same pass that
decompresses and diffs it.

For each pair it times, in the same run, ``servelab diff A B`` (a child process, whole command)
and the baseline ``gzip -dc LAYER | sha256sum`` run once over A's and once over B's version of
each differing layer, and prints the ratio and servelab's peak RSS (VmHWM of the child).
The issue's targets: ratio within 2x, peak RSS under 200 MB.

    .venv/bin/python bench/diff_speed.py [--dir DIR] [--mb 480] [--keep] [--quick]

``--quick`` uses 16 MB images and does not judge the figures (CI runs it to check the script
works).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shlex
import shutil
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from servelab import proc

FILE_MB = 4


class _LayerWriter:
    """A file object that gzips what tarfile writes, hashing both sides on the way."""

    def __init__(self, path: Path, level: int = 1) -> None:
        self.f = path.open("wb")
        self.z = zlib.compressobj(level, zlib.DEFLATED, 31)
        self.diff_id = hashlib.sha256()
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.diff_id.update(data)
        self._out(self.z.compress(data))
        return len(data)

    def _out(self, data: bytes) -> None:
        self.digest.update(data)
        self.size += len(data)
        self.f.write(data)

    def close(self) -> None:
        self._out(self.z.flush())
        self.f.close()


def _content(rng: random.Random, n: int) -> bytes:
    """About 2:1 compressible, like binaries and wheels: random runs between text runs."""
    out = bytearray()
    words = b"import torch model weights serving cuda kernel tensor layer "
    while len(out) < n:
        out += rng.randbytes(2048)
        out += words * 35
    return bytes(out[:n])


def write_layer(root: Path, files: list[tuple[str, bytes]], level: int = 1) -> dict[str, Any]:
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    tmp = blobs / "partial"
    w = _LayerWriter(tmp, level)
    with tarfile.open(fileobj=w, mode="w|", format=tarfile.PAX_FORMAT) as tf:  # type: ignore[call-overload]
        for name, data in files:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode = len(data), 1_700_000_000, 0o644
            tf.addfile(ti, _Reader(data))
    w.close()
    hexd = w.digest.hexdigest()
    tmp.replace(blobs / hexd)
    return {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
            "digest": "sha256:" + hexd, "size": w.size,
            "diff_id": "sha256:" + w.diff_id.hexdigest()}


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n < 0 else self.pos + n
        out = self.data[self.pos:end]
        self.pos += len(out)
        return out


def _blob(root: Path, data: bytes) -> dict[str, Any]:
    hexd = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256" / hexd).write_bytes(data)
    return {"digest": "sha256:" + hexd, "size": len(data)}


def write_image(root: Path, layers: list[dict[str, Any]]) -> None:
    cfg = {"architecture": "amd64", "os": "linux", "created": "2023-11-14T22:13:20Z",
           "config": {}, "rootfs": {"type": "layers", "diff_ids": [x["diff_id"] for x in layers]},
           "history": [{"created_by": f"layer {i}"} for i in range(len(layers))]}
    c = _blob(root, json.dumps(cfg).encode())
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **c},
           "layers": [{k: x[k] for k in ("mediaType", "digest", "size")} for x in layers]}
    m = _blob(root, json.dumps(man).encode())
    (root / "index.json").write_text(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", **m,
                       "platform": {"architecture": "amd64", "os": "linux"}}]}))
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')


def _copy_layer(src: Path, dst: Path, layer: dict[str, Any]) -> None:
    d = dst / "blobs" / "sha256"
    d.mkdir(parents=True, exist_ok=True)
    hexd = layer["digest"].split(":")[1]
    if not (d / hexd).exists():
        (d / hexd).hardlink_to(src / "blobs" / "sha256" / hexd)


def make_pairs(base: Path, mb: int) -> dict[str, tuple[Path, Path, list[tuple[Path, Path]]]]:
    rng = random.Random(7)  # noqa: S311 (test data, seeded on purpose)
    n = max(2, mb // FILE_MB)
    big = [(f"opt/lib/blob-{i:04d}.so", _content(rng, FILE_MB << 20)) for i in range(n)]
    changed = list(big)
    mid = n // 2
    changed[mid] = (big[mid][0], big[mid][1][:-8] + b"CHANGED!")
    small_a = [("app/config.json", b'{"threads": 4}\n'), ("app/main.py", b"print('hi')\n")]
    small_b = [("app/config.json", b'{"threads": 8}\n'), ("app/main.py", b"print('hi')\n")]
    src = base / "layers"
    big_l = write_layer(src, big)
    big_c = write_layer(src, changed)
    big_r = write_layer(src, big, level=2)  # the same tar, other bytes
    sa, sb = write_layer(src, small_a), write_layer(src, small_b)
    out: dict[str, tuple[Path, Path, list[tuple[Path, Path]]]] = {}
    for case, (la, lb) in {"top": ([big_l, sa], [big_l, sb]),
                           "big": ([big_l, sa], [big_c, sa]),
                           "recompressed": ([big_l, sa], [big_r, sa])}.items():
        a, b = base / f"{case}-a", base / f"{case}-b"
        for img, layers in ((a, la), (b, lb)):
            for x in layers:
                _copy_layer(src, img, x)
            write_image(img, layers)
        differing = [(a / "blobs" / "sha256" / x["digest"].split(":")[1],
                      b / "blobs" / "sha256" / y["digest"].split(":")[1])
                     for x, y in zip(la, lb, strict=True) if x["digest"] != y["digest"]]
        out[case] = (a, b, differing)
    return out


RUN_DIFF = ("import re, sys\nfrom servelab.cli import main\nrc = main(sys.argv[1:])\n"
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
            "sys.stderr.write(f'VMHWM_KB={hwm}\\n')\nsys.exit(rc)\n")


def time_servelab(a: Path, b: Path) -> tuple[float, int, str, int]:
    """Seconds, peak RSS (KB), the first explanation line, and the layer rows servelab read
    through and verified."""
    res = proc.run([sys.executable, "-c", RUN_DIFF, "diff", str(a), str(b), "-f", "json"],
                   check=False, timeout=1800)
    if res.returncode not in (0, 1):
        raise SystemExit(f"servelab diff failed: {res.stderr}")
    hwm = int(re.search(r"VMHWM_KB=(\d+)", res.stderr).group(1))  # type: ignore[union-attr]
    doc = json.loads(res.stdout)
    first = (doc["explanation"] or ["(none)"])[0]
    verified = sum(1 for row in doc["layers"] if row.get("verified"))
    return res.seconds, hwm, first, verified


def time_in_process(a: Path, b: Path) -> float:
    """servelab's own work: diff_images in this process (no interpreter start, no imports)."""
    from servelab.image.diff import diff_images

    diff_images(str(a), str(b))  # warm: imports and page cache, like the baseline's 2nd run
    t0 = time.monotonic()
    diff_images(str(a), str(b))
    return time.monotonic() - t0


def python_start() -> float:
    return proc.run([sys.executable, "-c", "pass"], timeout=60).seconds


def time_baseline(pairs: list[tuple[Path, Path]]) -> float:
    total = 0.0
    for pa, pb in pairs:
        for blob in (pa, pb):
            res = proc.run(["sh", "-c", f"gzip -dc {shlex.quote(str(blob))} | sha256sum"],
                           timeout=1800)
            total += res.seconds
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, help="where to write the images (default: a temp dir)")
    ap.add_argument("--mb", type=int, default=480, help="size of the largest layer in MB")
    ap.add_argument("--keep", action="store_true", help="keep the images afterwards")
    ap.add_argument("--quick", action="store_true",
                    help="16 MB images, no verdict: checks the script, not the figures")
    args = ap.parse_args()
    if args.quick:
        args.mb = 16
    base = args.dir or Path(tempfile.mkdtemp(prefix="servelab-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.monotonic()
        pairs = make_pairs(base, args.mb)
        print(f"wrote the images in {time.monotonic() - t0:.1f}s under {base}")
        ok = True
        print(f"python interpreter start: {python_start():.3f}s (in the command time only)")
        for case, (a, b, differing) in pairs.items():
            cmd, hwm, first, verified = time_servelab(a, b)
            work = time_in_process(a, b)
            time_baseline(differing)  # warm the page cache alike
            bl = time_baseline(differing)
            ratio = work / bl if bl else float("inf")
            ok &= ratio <= 2.0 and hwm < 200 * 1024
            mb_in = sum(p.stat().st_size for pair in differing for p in pair) / 1e6
            print(f"[{case}] differing layers: {len(differing)} ({mb_in:.0f} MB compressed, A+B)")
            print(f"[{case}]   servelab diff, in process:   {work:7.3f}s")
            print(f"[{case}]   servelab diff, whole command: {cmd:7.3f}s   "
                  f"peak RSS {hwm / 1024:.0f} MB")
            print(f"[{case}]   gzip -dc | sha256sum:         {bl:7.3f}s")
            print(f"[{case}]   ratio {ratio:.2f} (in process / baseline; target <= 2.00); "
                  f"whole command / baseline {cmd / bl:.2f}")
            print(f"[{case}]   first line: {first}")
            print(f"[{case}]   layer pairs read through and verified: {verified}")
        if args.quick:
            return 0
        print("PASS" if ok else "FAIL: a ratio over 2 or peak RSS over 200 MB")
        return 0 if ok else 1
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
