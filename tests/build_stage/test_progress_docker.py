"""Progress of a real build, as a person and a CI log see it: `servelab build` run in a pty
(python's pty module) redraws one live line in place; with stderr not a terminal, or under
GITHUB_ACTIONS=true on a terminal, it writes plain lines, at most steps + ceil(duration / 10 s)
+ 5 of them. And a real failing build's error tail, rebuilt from rawjson, is plain output's."""

from __future__ import annotations

import fcntl
import json
import math
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path
from typing import Any

import pytest
from servelab_build_testlib import DATA, EPOCH, ROOT

from servelab import proc
from servelab.build import buildkit
from servelab.build.stage import BuildFailed
from servelab.spec import Arm, BuildSettings

PROGRESS = DATA / "progress"
INSTALL = PROGRESS / "install"


def _experiment(tmp: Path) -> Path:
    # the context and build args inside the experiment's folder: the path rule confines them
    ctx, args = tmp / "install", tmp / "build-args.env"
    if not ctx.exists():
        shutil.copytree(INSTALL, ctx)
        shutil.copyfile(ROOT / "examples" / "build-args.env", args)
    exp = tmp / "experiment.yaml"
    exp.write_text(
        "apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: progress-test}\n"
        "spec:\n  change: one build, watched\n  repeats: 1\n  treatment:\n"
        f"    context: {ctx}\n    dockerfile: Dockerfile\n"
        f"    buildArgsFile: {args}\n"
        f"  build: {{sourceDateEpoch: {EPOCH}, network: none}}\n")
    return exp


def _argv(tmp: Path) -> list[str]:
    return [sys.executable, "-m", "servelab", "build", str(_experiment(tmp)),
            "--out", str(tmp / "out"), "-f", "json", "-o", str(tmp / "report.json")]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "CI")}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return {**env, **extra}


def _in_pty(argv: list[str], env: dict[str, str], timeout: float = 600) -> tuple[str, int]:
    """Run *argv* with a pty (raw: no newline translation, 120 columns) as its terminal;
    everything it wrote there, and its exit code."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    child = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                             cwd=ROOT, close_fds=True)
    os.close(slave)
    got = bytearray()
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                got += data
            elif child.poll() is not None:
                break
    finally:
        os.close(master)
        rc = child.wait(timeout=60)
    return got.decode("utf-8", "replace"), rc


def _record(tmp: Path) -> dict[str, Any]:
    rec: dict[str, Any] = json.loads(
        (tmp / "out" / "treatment" / "repeat-1" / "build.json").read_text())
    return rec


def _steps(tmp: Path) -> int:
    """The steps of the command, counted from what it recorded (not from its progress): the
    build's vertices in build.log, the build itself, the re-gzip pass and each layer it
    compressed, docker load, the clean-up and the one image it removes."""
    log = (tmp / "out" / "treatment" / "repeat-1" / "build.log").read_text()
    vertices = {m.group(1) for m in re.finditer(r"^#(\d+) ", log, re.M)}
    return len(vertices) + 1 + 1 + _record(tmp)["export"]["layers_compressed"] + 1 + 2


@pytest.mark.usefixtures("base_image")
def test_a_terminal_sees_the_build_redrawn_in_place(tmp_path: Path) -> None:
    out, rc = _in_pty(_argv(tmp_path), _env())
    assert rc == 0, out[-3000:]
    frames = out.split("\r\x1b[K")
    live = [f for f in frames if f.startswith("servelab: build treatment #1: ")
            and not f.endswith("\n")]
    build_s = _record(tmp_path)["build_s"]
    # redrawn about 5 times a second; at least once a second on a loaded 2-core machine
    assert len(live) >= build_s, (len(live), build_s)
    assert all("\n" not in f for f in live)  # in place: the live line never moves down
    clock = [int(m.group(1)) for f in live
             if (m := re.match(r"servelab: build treatment #1: (\d+)s", f))]
    assert clock == sorted(clock) and len(set(clock)) >= build_s / 2, clock  # it ticks
    # step + its latest log line: the package name comes early in every line the RUN prints
    # ("Collecting" lasts a few ms; the "unpacked ... Installing" line is cut at 120 columns)
    assert any(re.search(r"RUN <<EOF.* \| \d+\.\d+ \S*servepkg\d\d", f) for f in live), live[-5:]
    assert all(not f.startswith("::") for f in out.splitlines())
    finished = [f for f in frames if f.endswith("\n")]
    assert any(f.startswith("servelab: build treatment #1: done in ") for f in finished)
    assert any(f.startswith("servelab: docker load") and "done in" in f for f in finished)


@pytest.mark.usefixtures("base_image")
@pytest.mark.parametrize("where", ["pipe", "github-actions-on-a-terminal"])
def test_a_log_gets_plain_lines_within_the_bound(tmp_path: Path, where: str) -> None:
    t0 = time.monotonic()
    if where == "pipe":
        res = subprocess.run(_argv(tmp_path), env=_env(), cwd=ROOT, capture_output=True,
                             text=True, timeout=600, check=False)
        out, rc = res.stderr, res.returncode
        assert res.stdout == ""  # the report went to -o; progress never to stdout
    else:
        out, rc = _in_pty(_argv(tmp_path), _env(GITHUB_ACTIONS="true"))
    took = time.monotonic() - t0
    assert rc == 0, out[-3000:]
    lines = out.splitlines()
    assert "\r" not in out and "\x1b" not in out
    assert all(x.startswith("servelab: ") for x in lines), lines
    assert len(lines) <= _steps(tmp_path) + math.ceil(took / 10) + 5, lines
    assert any("[2/2] RUN <<EOF" in x for x in lines)
    beats = [x for x in lines if re.match(r"servelab: build treatment #1: \d+s \| ", x)]
    assert beats, lines  # the RUN step alone lasts 12 s
    assert json.loads((tmp_path / "report.json").read_text())["exit_code"] == 0


def test_a_failed_build_ends_as_plain_output_does(builds: Any, base_image: str,
                                                  tmp_path: Path) -> None:
    ctx = PROGRESS / "failing"
    arm = Arm("failing", ctx, ctx / "Dockerfile", {"BASE_IMAGE": base_image})
    assert buildkit.modes()[0] == buildkit.RAWJSON  # this buildx has it: the tail is rebuilt
    with pytest.raises(BuildFailed) as err:
        builds.build(arm, BuildSettings(source_date_epoch=EPOCH, network="none"), repeat=1,
                     out_dir=tmp_path)
    plain = proc.run(["docker", "buildx", "build", "--no-cache", "--progress=plain",
                      "--network", "none", "--build-arg", f"BASE_IMAGE={base_image}",
                      "--output", "type=cacheonly", str(ctx)], check=False, timeout=600)
    assert plain.returncode == 1

    def block(text: str) -> list[str]:
        rows = [re.sub(r"^\s*\| ", "", x) for x in text.splitlines()]
        start = rows.index("------")
        return [re.sub(r"^\d+\.\d+ ", "", x) for x in rows[start:start + 5]]

    message = err.value.message
    assert block(message) == block(plain.stderr)
    assert block(message)[1].startswith(" > [3/3] RUN python3 -c")
    assert "ModuleNotFoundError: No module named uvicorn" in block(message)
    assert "exit code: 1" in message.splitlines()[-1]
    assert not any(x.lstrip().startswith("::") for x in message.splitlines())
    log = (tmp_path / "build.log").read_text()
    assert "::error title=not from servelab::" in log  # the whole output, kept as written
    assert '"vertexes"' not in log
