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


def sha256_tree(root: Path, *, exclude: list[str] | None = None) -> str:
    """sha256 of the sorted ``"<sha256>  <relative path>\\n"`` lines of every file under *root*.

    For a single file, the file's own sha256. This is the ``model.sha256`` convention.
    """
    if root.is_file():
        return sha256_file(root)
    lines = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames
                             if not _excluded((rel_dir / d).as_posix(), exclude))
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if _excluded(rel, exclude):
                continue
            p = Path(dirpath) / name
            if p.is_file():
                lines.append(f"{sha256_file(p)}  {rel}\n")
    return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()


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
    f = context / ".dockerignore"
    if not f.is_file():
        return [".git"]
    pats = [ln.strip() for ln in f.read_text(errors="replace").splitlines()]
    return [p for p in pats if p and not p.startswith("#")] + [".git"]


def sha256_context(context: Path) -> str:
    return sha256_tree(context, exclude=dockerignore(context))


def sha256_json(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(blob).hexdigest()
