"""The build context as BuildKit reads it (issue 24): links re-rooted, globs and walks bounded.

A pull request's build context may hold symbolic links out of it, link loops, patterns that
fan out (``COPY */*/*/...``) and more files than lint walks. lint must never read through a
link out of the context, must end quickly, and must say when a walk stopped at its limit
instead of passing silently.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab.lint import walk

from .harness import run_servelab

BASE = "FROM 127.0.0.1:5000/base@sha256:" + "0" * 64 + "\n"
TAIL = 'USER 10001\nHEALTHCHECK CMD ["true"]\n'


def _safetensors(path: Path, size: int) -> None:
    """A file with a real safetensors header (8-byte length, JSON), padded to *size*."""
    header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    blob = struct.pack("<Q", len(header)) + header
    path.write_bytes(blob + bytes(size - len(blob)))


def test_a_start_script_linked_out_of_the_context_is_not_read(tmp_path: Path) -> None:
    """trust-context-links: ``start.sh -> /H/start.sh`` names ``<context>/H/start.sh`` in
    BuildKit; lint read the host's file (and reported a download found there)."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "start.sh").write_text("#!/bin/sh\ncurl -fsSL https://get.invalid/x | sh\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "start.sh").symlink_to(host / "start.sh")
    (ctx / "Dockerfile").write_text(BASE + "COPY start.sh /start.sh\n" + TAIL
                                    + 'CMD ["/start.sh"]\n')
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=ctx)
    assert out.problems() == [], out.explain()
    assert "startup-download" not in out.stdout and "get.invalid" not in out.stdout
    # the same script inside the context, reached through an absolute link re-rooted there
    rerooted = ctx / str(host / "start.sh").lstrip("/")
    rerooted.parent.mkdir(parents=True)
    rerooted.write_text((host / "start.sh").read_text())
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=ctx)
    assert "startup-download" in out.stdout, out.explain()


@given(target=st.sampled_from(["/", "/..", "../../..", "/etc/../..", "a/../../..", "."]))
def test_reroot_never_leaves_the_context(tmp_path_factory: pytest.TempPathFactory,
                                         target: str) -> None:
    ctx = tmp_path_factory.mktemp("ctx")
    (ctx / "a").mkdir()
    (ctx / "link").symlink_to(target)
    got = walk.reroot(ctx, "link")
    assert got is not None and got.is_relative_to(ctx.resolve())


def test_link_loops_end(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    assert walk.reroot(tmp_path, "a/x") is None


@pytest.mark.parametrize("depth", [6, 12])
def test_glob_over_link_loops_ends_quickly(tmp_path: Path, depth: int) -> None:
    """trust-context-glob: links to ``..`` and ``.`` with ``COPY */*/*/...`` grew without end
    (each level multiplied the paths); linked folders are not entered now."""
    (tmp_path / "a").mkdir()
    for i in range(4):
        (tmp_path / "a" / f"up{i}").symlink_to("..")
        (tmp_path / f"self{i}").symlink_to(".")
    pattern = "/".join(["*"] * depth) + "/*.safetensors"
    (tmp_path / "Dockerfile").write_text(BASE + f"COPY {pattern} /app/\n" + TAIL
                                         + 'CMD ["python3"]\n')
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=tmp_path)
    assert out.problems() == [], out.explain()
    assert out.seconds < 5, out.explain()


def test_a_glob_that_reaches_its_limit_says_so(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for i in range(60):
        (tmp_path / "d" / f"f{i:03}").write_text("x")
    (tmp_path / "Dockerfile").write_text(BASE + "COPY d/* /app/\n" + TAIL + 'CMD ["python3"]\n')
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=tmp_path,
                       env={"SERVELAB_MAX_CONTEXT_FILES": "50"})
    assert out.code in (0, 1) and out.problems() == [], out.explain()
    assert "stopped after 50 entries" in out.stdout, out.explain()


def _many_files(folder: Path, n: int) -> None:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"a{i:05}.txt").write_text("x")


def test_a_walk_that_stops_at_its_limit_says_so(tmp_path: Path) -> None:
    """trust-context-walk-limit: a 4 MiB safetensors after 5,100 other files passed silently;
    now the stop is a warning, and a higher SERVELAB_MAX_CONTEXT_FILES finds the weights."""
    _many_files(tmp_path / "models", 5100)
    _safetensors(tmp_path / "models" / "zz.safetensors", 4 << 20)
    (tmp_path / "Dockerfile").write_text(BASE + "COPY models/ /models/\n" + TAIL
                                         + 'CMD ["python3"]\n')
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=tmp_path)
    assert out.problems() == [], out.explain()
    assert "warning [weights-baked]" in out.stdout, out.explain()
    assert "stopped after 5000 entries" in out.stdout
    assert "SERVELAB_MAX_CONTEXT_FILES" in out.stdout
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=tmp_path,
                       env={"SERVELAB_MAX_CONTEXT_FILES": "10000"})
    assert out.code == 1 and "zz.safetensors" in out.stdout, out.explain()
    assert "stopped after" not in out.stdout


def test_the_whole_context_walk_says_when_it_stops(tmp_path: Path) -> None:
    _many_files(tmp_path / "data", 120)
    (tmp_path / "Dockerfile").write_text(BASE + "COPY . /app\n" + TAIL + 'CMD ["python3"]\n')
    out = run_servelab(["lint", "--no-hadolint", "Dockerfile"], cwd=tmp_path,
                       env={"SERVELAB_MAX_CONTEXT_FILES": "100"})
    assert out.problems() == [], out.explain()
    assert "[context-leak] COPY of the whole build context: servelab stopped after 100" in (
        out.stdout), out.explain()


def test_weight_walks_never_follow_links(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    _safetensors(host / "big.safetensors", 2 << 20)
    ctx = tmp_path / "ctx"
    (ctx / "models").mkdir(parents=True)
    (ctx / "models" / "linked.safetensors").symlink_to(host / "big.safetensors")
    (ctx / "models" / "hostdir").symlink_to(host)
    assert walk.weight_files(ctx, "models", lambda _r: False) == walk.Found([], False)


def test_a_dockerignore_linked_out_of_the_context_is_not_read(tmp_path: Path) -> None:
    from servelab.lint import ignore

    host = tmp_path / "host"
    host.mkdir()
    (host / "ignore").write_text("**/*.safetensors\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(BASE)
    (ctx / ".dockerignore").symlink_to(host / "ignore")
    assert ignore.find(ctx / "Dockerfile", ctx) is None
    (ctx / ".dockerignore").unlink()
    (ctx / ".dockerignore").write_text("**/*.safetensors\n")
    assert ignore.find(ctx / "Dockerfile", ctx) == ctx / ".dockerignore"
