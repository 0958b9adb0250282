"""Does `servelab lint`'s work grow linearly? Prints the time for N and 2N, side by side.

Two cases (issue 24: lint was quadratic in its findings, 10,000 findings took 17 s and
20,000 did not finish in 60 s; a Dockerfile of 130,000 one-word instructions took 30-46 s):

* findings: a Dockerfile with N remote ADDs and N unpinned `pip install` RUNs (2N findings),
  then 2N of each;
* instructions: a Dockerfile of N one-word RUNs, then 2N.

Each figure is one in-process `lint_paths` call (the parse included), wall time and CPU time
(the steadier figure on a shared machine); the ratio 2N/N is printed: about 2 is linear, 4
quadratic. ``--check`` exits 1 when a CPU ratio is above 3. ``--quick``: small N, no verdict
(CI runs it to check the script works). Run: python bench/lint_scaling.py [--check]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from servelab.lint import LintConfig, lint_paths

PINNED = (
    "127.0.0.1:5000/servelab/python-base:bookworm@sha256:"
    "adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1"
)
RATIO_LIMIT = 3.0


def findings_file(n: int) -> str:
    """A Dockerfile with *n* remote ADDs and *n* unpinned pip installs: 2n findings."""
    body = "".join(f"ADD https://example.com/f{i}.txt /srv/f{i}.txt\n"
                   f"RUN pip install package{i}\n" for i in range(n))
    return f"FROM {PINNED}\n{body}"


def instructions_file(n: int) -> str:
    return f"FROM {PINNED}\n" + "RUN a\n" * n


def serving_file(n: int) -> str:
    """One stage of *n* blocks of serving-image instructions: a git clone built, a download
    unpacked, a pip install, a COPY --from, an ENV, a WORKDIR (issue 32: each RUN word asked
    for the stage's COPY --from list anew, and each command walked every earlier clone and
    download: quadratic in the instructions of a stage)."""
    body = "".join(
        f"RUN git clone https://github.com/example/lib{i} /src/lib{i} && pip install /src/lib{i}\n"
        f"RUN curl -fsSL https://example.com/t{i}.tgz -o /tmp/t{i}.tgz && tar -xzf /tmp/t{i}.tgz\n"
        f"RUN pip install --no-cache-dir pkg{i}==1.0\n"
        f"COPY --from=build /out/{i} /srv/{i}\n"
        f"ENV V{i}=x{i}\nWORKDIR /srv/{i}\n" for i in range(n))
    return f"FROM {PINNED} AS build\nRUN mkdir /out\nFROM {PINNED}\n{body}"


def measure(text: str, folder: Path) -> tuple[float, float, int]:
    """(wall s, cpu s, findings) of one lint of *text*."""
    path = folder / "Dockerfile"
    path.write_text(text)
    wall, cpu = time.perf_counter(), time.process_time()
    report = lint_paths([path], config=LintConfig(), hadolint=False)
    return time.perf_counter() - wall, time.process_time() - cpu, len(report.findings)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--findings", type=int, default=5000, help="N for the findings case")
    ap.add_argument("--instructions", type=int, default=40000,
                    help="N for the instructions case")
    ap.add_argument("--serving", type=int, default=2000,
                    help="N for the serving-instructions case (blocks of 6 in one stage)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a CPU ratio is over 3")
    ap.add_argument("--quick", action="store_true", help="small N, no verdict")
    args = ap.parse_args()
    if args.quick:
        args.findings, args.instructions, args.serving, args.check = 200, 1000, 100, False
    ok = True
    with tempfile.TemporaryDirectory(prefix="servelab-scaling-") as tmp:
        for name, make, n in (("findings", findings_file, args.findings),
                              ("instructions", instructions_file, args.instructions),
                              ("serving", serving_file, args.serving)):
            w1, c1, f1 = measure(make(n), Path(tmp))
            w2, c2, f2 = measure(make(2 * n), Path(tmp))
            ratio = c2 / c1 if c1 else 0.0
            ok = ok and ratio <= RATIO_LIMIT
            print(f"[{name}] N={n}: {w1:6.2f} s (cpu {c1:.2f} s, {f1} findings)   "
                  f"2N={2 * n}: {w2:6.2f} s (cpu {c2:.2f} s, {f2} findings)   "
                  f"ratio 2N/N wall {w2 / w1 if w1 else 0:.2f}, cpu {ratio:.2f}   "
                  f"{'linear' if ratio <= RATIO_LIMIT else 'SUPERLINEAR'}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
