"""Issue 24's own check, run for real: with ``strace -f -e trace=openat``, no file outside the
repository is opened because a pull request's files named it, directly or through a link.

The repository names /etc files through ``../``, absolute paths and links (a model folder and a
body file that link into /etc), and a ``.servelab.yaml`` waits in the folder above it. Every
path servelab opens is then either its own (the interpreter, its packages, /proc, /dev) or
inside the repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXPERIMENT = """\
apiVersion: servelab/v1
kind: Experiment
spec:
  change: "hostile paths"
  control:
    dockerfile: ../../../../../../etc/passwd
    buildArgsFile: /etc/shadow
  treatment:
    dockerfile: Dockerfile
    context: .
  model:
    path: sub/modeldir
  request:
    path: /v1
    bodyFile: sub/body.json
  scan:
    ignoreFile: /etc/group
"""

#: what servelab itself may open: the interpreter and its libraries, the system's locale and
#: loader files, its own state
_OWN = re.compile(r"^/(proc|sys|dev)/|^/usr/|^/lib|^/etc/(ld\.so|localtime)|^/root/\.pyenv/")


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "outer" / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "Dockerfile").write_text("FROM scratch\nUSER 10001\n", encoding="utf-8")
    (repo / "experiment.yaml").write_text(EXPERIMENT, encoding="utf-8")
    (repo / "sub" / "modeldir").symlink_to("/etc")
    (repo / "sub" / "body.json").symlink_to("/etc/hostname")
    (tmp_path / "outer" / ".servelab.yaml").write_text("disable: [root-user]\n", encoding="utf-8")
    return repo


def _opened(repo: Path, tmp_path: Path, *args: str) -> tuple[int, str, list[str]]:
    trace = tmp_path / "trace.txt"
    proc = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=openat,open,openat2", "-o", str(trace),
         sys.executable, "-m", "servelab", *args],
        cwd=repo, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "SERVELAB_DEBUG": ""})
    paths = re.findall(r'open(?:at2?)?\((?:[^,]*, )?"([^"]*)"', trace.read_text(encoding="utf-8"))
    return proc.returncode, proc.stdout + proc.stderr, paths


@pytest.mark.parametrize("args", [
    ("validate", "experiment.yaml"),
    ("lint", "--spec", "experiment.yaml"),
    ("lint", "."),
    ("run", "experiment.yaml", "--stages", "lint", "--out", "out"),
], ids=["validate", "lint-spec", "lint-dir", "run-lint"])
def test_no_file_outside_the_repository_is_opened(tmp_path: Path, args: tuple[str, ...]) -> None:
    if shutil.which("strace") is None:
        if os.environ.get("CI"):
            pytest.fail("strace is missing: scripts/bootstrap.sh installs it")
        pytest.skip("strace is not installed")
    repo = _repo(tmp_path)
    code, out, paths = _opened(repo, tmp_path, *args)
    assert "Traceback" not in out and "internal error" not in out
    assert code in (0, 1, 2), out
    real = str(repo.resolve())
    here = Path(sys.prefix).resolve().as_posix()
    # servelab's own code: the interpreter, its packages and every import path (an editable
    # install's src/ included)
    own = (real, here, sys.base_prefix, str(Path.cwd()),
           *(str(Path(x).resolve()) for x in sys.path if x))
    outside = sorted({p for p in paths if p.startswith("/") and not _OWN.search(p)
                      and not p.startswith(own)
                      and "site-packages" not in p and "/servelab/" not in p})
    assert outside == [], outside
    assert "root:" not in out  # nothing of /etc/passwd is quoted
