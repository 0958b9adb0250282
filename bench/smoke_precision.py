"""How precisely the smoke stage times readiness, against the server's own clock.

Builds the bench fixture image (tests/data/smoke/server, FIXTURE_MODE=bench) on the example's
base image. That server logs ``LISTEN <t>`` right after it calls listen() and ``FIRST200 <t>``
when it answers its first /health 200, both on CLOCK_MONOTONIC, which the host and its
containers share. The smoke stage is run N times (default 20) and two gaps are printed:

* servelab's first TCP accept minus the logged listen();
* servelab's first health 2xx minus the logged first 200.

Target: median <= 10 ms and p95 <= 25 ms for both. Exit 0 when met, 1 when not.

The server logs from two threads (the handler's FIRST200, the loader's "model loaded"); a line
may reach the log with another one's bytes before its newline, so the marks are found by their
own text (``KEY <seconds with 6 decimals>``), not by line starts.

    .venv/bin/python bench/smoke_precision.py [--runs 20] [--probe auto|netns|helper] [--quick]

``--quick``: two runs, no verdict (CI runs it to check the script works).
"""

from __future__ import annotations

import argparse
import re
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "data" / "smoke" / "server"
MODEL = ROOT / "tests" / "data" / "smoke" / "model"
TARGET_MEDIAN_MS = 10.0
TARGET_P95_MS = 25.0


def base_image() -> str:
    for line in (ROOT / "examples" / "build-args.env").read_text().splitlines():
        if line.startswith("BASE_IMAGE="):
            return line.split("=", 1)[1].strip()
    raise SystemExit("no BASE_IMAGE in examples/build-args.env: run scripts/bootstrap.sh")


def build(tag: str) -> None:
    from servelab import proc

    proc.run(["docker", "build", "-q", "--network", "none", "-f", str(SERVER / "Dockerfile"),
              "--build-arg", f"BASE_IMAGE={base_image()}", "--build-arg", "MODE=bench",
              "--label", "servelab.test=bench", "-t", tag, str(SERVER)], timeout=600)


def mark(key: str) -> re.Pattern[str]:
    """``KEY 123.456789`` anywhere: another thread's output may sit on either side."""
    return re.compile(rf"(?<![A-Z0-9]){key} ([0-9]+\.[0-9]{{6}})")


def logged(log: str, key: str) -> float:
    m = mark(key).search(log)
    if not m:
        raise RuntimeError(f"the server did not log {key}:\n{log[-2000:]}")
    return float(m.group(1))


def server_log(client: Any, cid: str, keys: tuple[str, ...]) -> str:
    """The container's log once it holds every key (the engine copies output asynchronously)."""
    for _ in range(50):
        log = client.api.logs(cid).decode()
        if all(mark(k).search(log) for k in keys):
            return str(log)
        time.sleep(0.1)
    return str(log)


def one_run(client: Any, tag: str, probe: str, out: Path, n: int) -> tuple[float, float]:
    from servelab.smoke.stage import SmokeSettings, smoke_image
    from servelab.spec import Model, Serve

    s = SmokeSettings(
        serve=Serve(readiness_timeout_s=30, env={"LISTEN_DELAY": "0.3", "LOAD_DELAY": "0.2"}),
        model=Model(path=MODEL), probe=probe, scan_weights=False, keep=True,
    )
    res = smoke_image(tag, s, run_id=f"bench-{secrets.token_hex(3)}", out_dir=out / str(n),
                      client=client)
    if res.container is None:
        raise RuntimeError(f"run {n}: {res.verdict}: {res.message}")
    try:
        log = server_log(client, res.container.id, ("LISTEN", "FIRST200"))
    finally:
        client.api.remove_container(res.container.id, force=True)
    if res.timeline is None or res.verdict != "pass":
        raise RuntimeError(f"run {n}: {res.verdict}: {res.message}")
    marks = res.timeline.marks
    accept = (marks["first_tcp_accept"] - logged(log, "LISTEN")) * 1000
    health = (marks["first_health_2xx"] - logged(log, "FIRST200")) * 1000
    return accept, health


def p95(values: list[float]) -> float:
    v = sorted(values)
    k = (len(v) - 1) * 0.95
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def report(name: str, gaps: list[float]) -> bool:
    med, high = statistics.median(gaps), p95(gaps)
    ok = med <= TARGET_MEDIAN_MS and high <= TARGET_P95_MS
    print(f"{name:<40} median {med:6.2f} ms  p95 {high:6.2f} ms  "
          f"min {min(gaps):6.2f}  max {max(gaps):6.2f}  {'OK' if ok else 'MISSED'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--probe", choices=["auto", "netns", "helper"], default="auto")
    ap.add_argument("--image", help="use this prebuilt bench image instead of building one")
    ap.add_argument("--quick", action="store_true",
                    help="two runs, no verdict: checks the script, not the figures")
    args = ap.parse_args()
    if args.quick:
        args.runs = 2
    tag = args.image or f"servelab-bench/smoke-precision:{secrets.token_hex(3)}"
    if not args.image:
        build(tag)
    from servelab.cleanup import docker_client

    client = docker_client()
    accepts: list[float] = []
    healths: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="servelab-bench-") as tmp:
            for n in range(args.runs):
                a, h = one_run(client, tag, args.probe, Path(tmp), n)
                accepts.append(a)
                healths.append(h)
                print(f"run {n + 1:2d}: accept gap {a:6.2f} ms, health gap {h:6.2f} ms",
                      flush=True)
    finally:
        if not args.image:
            from servelab import proc

            proc.run(["docker", "rmi", "-f", tag], check=False)
    print(f"\n{args.runs} runs, probe {args.probe}; target: median <= {TARGET_MEDIAN_MS:g} ms, "
          f"p95 <= {TARGET_P95_MS:g} ms")
    ok = report("first TCP accept - logged listen()", accepts)
    ok = report("first health 2xx - logged first 200", healths) and ok
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
