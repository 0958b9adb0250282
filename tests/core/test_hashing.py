"""servelab.hashing: the model.sha256 convention, and files hashed once per content version."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from servelab import hashing


def _tree(root: Path) -> None:
    (root / "b" / "deep").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    (root / "b" / "deep" / "w.safetensors").write_bytes(bytes(range(256)) * 4000)
    (root / "b" / "Z.py").write_text("print(1)\n")
    (root / "ignored.log").write_text("x")
    (root / "link").symlink_to(root / "a.txt")
    (root / "dangling").symlink_to(root / "nowhere")


def test_tree_digest_is_the_shell_convention(tmp_path: Path) -> None:
    _tree(tmp_path)
    script = ("find -L . -type f -printf '%P\\n' 2>/dev/null | LC_ALL=C sort | "
              "xargs -d '\\n' sha256sum | sha256sum")
    shell = subprocess.run(["sh", "-c", script], cwd=tmp_path, capture_output=True,
                           text=True, check=False).stdout.split()[0]
    assert hashing.sha256_tree(tmp_path) == shell
    files = hashing.tree_files(tmp_path, exclude=["*.log"])
    assert [f[0] for f in files] == ["a.txt", "b/Z.py", "b/deep/w.safetensors", "link"]
    assert files[2][1] == 256 * 4000


def test_a_file_is_read_once_until_it_changes(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "model.bin"
    f.write_bytes(b"one" * 1000)
    first = hashing.sha256_file(f)
    opened: list[str] = []
    real_open = open

    def spy(path: object, *a: object, **kw: object) -> object:
        opened.append(str(path))
        return real_open(path, *a, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", spy)
    assert hashing.sha256_file(f) == first and opened == []  # the second arm: not read again
    time.sleep(0.05)  # past the file system's timestamp granularity
    f.write_bytes(b"two" * 1000)  # same size, new content: a new ctime
    assert hashing.sha256_file(f) != first and opened == [str(f)]
