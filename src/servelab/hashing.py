"""Content hashes of the experiment's inputs (Dockerfile, context, model, request)."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def tree_files(root: Path, *, exclude: list[str] | None = None) -> list[tuple[str, int, str]]:
    """(relative path, size, sha256) of every regular file under *root* (symlinks to files
    followed), sorted by relative path (``/``-separated, byte order)."""
    out: list[tuple[str, int, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = [d for d in dirnames if not _excluded((rel_dir / d).as_posix(), exclude)]
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            p = Path(dirpath) / name
            if p.is_file() and not _excluded(rel, exclude):
                out.append((rel, p.stat().st_size, sha256_file(p)))
    out.sort(key=lambda f: f[0].encode())
    return out


def manifest_digest(files: list[tuple[str, int, str]]) -> str:
    """sha256 of the ``"<sha256>  <relative path>\n"`` lines of *files*, in their order."""
    return hashlib.sha256("".join(f"{sha}  {rel}\n" for rel, _size, sha in files)
                          .encode()).hexdigest()


def sha256_tree(root: Path, *, exclude: list[str] | None = None) -> str:
    """The ``model.sha256`` convention: a file's own sha256; for a directory the sha256 of its
    manifest (:func:`tree_files` order), the same as
    ``cd DIR && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum
    | sha256sum``."""
    if root.is_file():
        return sha256_file(root)
    return manifest_digest(tree_files(root, exclude=exclude))


def _excluded(rel: str, patterns: list[str] | None) -> bool:
    if not patterns:
        return False
    hit = False
    for pat in patterns:
        neg = pat.startswith("!")
        p = pat[1:] if neg else pat
        p = p.strip("/")
        top = rel.split("/", maxsplit=1)[0]
        if fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(rel, p + "/*") or top == p:
            hit = not neg
    return hit


def dockerignore(context: Path) -> list[str]:
    from servelab import textio

    f = context / ".dockerignore"
    if not f.is_file():
        return [".git"]
    text = textio.read_text(f, what=".dockerignore", hint="fix or remove the .dockerignore")
    pats = [ln.strip() for ln in text.splitlines()]
    return [p for p in pats if p and not p.startswith("#")] + [".git"]


def sha256_context(context: Path) -> str:
    return sha256_tree(context, exclude=dockerignore(context))


def sha256_json(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()
