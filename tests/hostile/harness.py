"""Run one servelab command the way a hostile user would, and measure it.

Each case runs ``python -m servelab ...`` in a fresh working directory with its own TMPDIR and
HOME, in a process group of its own. The harness waits with ``os.wait4`` to get that one
process's resource usage (peak RSS), kills the group past a hard limit, and lists every file
the run left behind in its working directory, TMPDIR, HOME and the directories of its inputs.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: What every hostile case must stay within (the issue's promise).
MAX_SECONDS = 10.0
MAX_RSS_BYTES = 512 * 1024 * 1024
#: When a run is killed (well past MAX_SECONDS, so a slow case is told apart from a hang).
KILL_AFTER_S = 30.0
ALLOWED_CODES = (0, 1, 2)


@dataclass
class Outcome:
    argv: list[str]
    code: int
    seconds: float
    max_rss_bytes: int
    stdout: str
    stderr: str
    killed: bool
    left_behind: list[str]

    def problems(self) -> list[str]:
        """Every way this run broke servelab's promise; empty when it kept it."""
        out = []
        if self.killed:
            out.append(f"hung: killed after {KILL_AFTER_S:g}s")
        if self.code not in ALLOWED_CODES:
            out.append(f"exit code {self.code}, not one of {ALLOWED_CODES}")
        if "internal error" in self.stderr or "Traceback" in self.stderr:
            out.append("internal error / traceback")
        if self.seconds > MAX_SECONDS:
            out.append(f"took {self.seconds:.1f}s (> {MAX_SECONDS:g}s)")
        if self.max_rss_bytes > MAX_RSS_BYTES:
            out.append(f"peak RSS {self.max_rss_bytes >> 20} MiB (> {MAX_RSS_BYTES >> 20} MiB)")
        if self.left_behind:
            out.append(f"left behind: {self.left_behind}")
        return out

    def explain(self) -> str:
        return (f"servelab {' '.join(self.argv)}\n  exit {self.code} in {self.seconds:.2f}s, "
                f"peak {self.max_rss_bytes >> 20} MiB\n  stderr: {self.stderr.strip()[-600:]}")


def _snapshot(dirs: Iterable[Path]) -> set[str]:
    seen: set[str] = set()
    for d in dirs:
        if not d.is_dir():
            continue
        for root, dirnames, files in os.walk(d):
            seen.update(str(Path(root) / n) for n in [*dirnames, *files])
    return seen


def run_servelab(
    argv: Sequence[str],
    *,
    cwd: Path,
    watch: Iterable[Path] = (),
    stdin: int | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run ``servelab *argv*`` in *cwd* and report how it went (see :class:`Outcome`).

    The peak RSS is that one process's ``ru_maxrss`` (:mod:`resource` usage from
    ``os.wait4``), not the maximum over every child the test process ever had."""
    tmp, home = cwd / ".tmp", cwd / ".home"
    tmp.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    dirs = [cwd, *watch]
    before = _snapshot(dirs)
    full_env = {**os.environ, "TMPDIR": str(tmp), "HOME": str(home), "NO_COLOR": "1",
                **(env or {})}
    full_env.pop("SERVELAB_DEBUG", None)
    out_path, err_path = tmp.parent / ".stdout", tmp.parent / ".stderr"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-m", "servelab", *argv], cwd=cwd, stdin=stdin, stdout=out,
            stderr=err, env=full_env, process_group=0,
        )
        status, usage, killed = _wait(child)
        seconds = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    code = 128 - code if code < 0 else code  # killed by a signal: as a shell reports it
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    out_path.unlink()
    err_path.unlink()
    after = _snapshot(dirs)
    left = sorted(p for p in after - before
                  if not p.startswith((str(tmp), str(home))) or Path(p).is_file())
    return Outcome(list(argv), code, seconds, usage.ru_maxrss * 1024, stdout, stderr, killed,
                   left)


def _wait(child: subprocess.Popen[bytes]) -> tuple[int, resource.struct_rusage, bool]:
    deadline = time.monotonic() + KILL_AFTER_S
    killed = False
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            return status, usage, killed
        if time.monotonic() > deadline and not killed:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            killed = True
        time.sleep(0.02)
