"""Content hashes of the experiment's inputs (Dockerfile, context, model, request)."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


#: sha256 of files already hashed in this process, by what identifies their content version:
#: (device, inode, size, mtime_ns, ctime_ns); any write changes the ctime. Both arms of an
#: experiment usually share a context (a 0.75 GB PyTorch tree was hashed once per arm and
#: repeat: 10 s of a 7-minute run), and every repeat hashes the same model.
_seen: dict[tuple[int, int, int, int, int], str] = {}


def sha256_file(path: Path | str, st: os.stat_result | None = None) -> str:
    """The file's sha256 (hex); *st*, when given, is its ``os.stat`` (symlinks followed)."""
    st = st if st is not None else os.stat(path)  # noqa: PTH116 (str paths, see below)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _seen.get(key)
    if known is not None:
        return known
    h = hashlib.sha256()
    with open(path, "rb") as f:  # noqa: PTH123 (a str path: no pathlib per file)
        while chunk := f.read(CHUNK):
            h.update(chunk)
    _seen[key] = digest = h.hexdigest()
    return digest


class TreeTooLarge(Exception):
    """A walk of :func:`tree_files` passed its *max_entries* or *max_bytes*: nothing was hashed."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"more than {limit} {what}")
        self.what, self.limit = what, limit


def tree_files(root: Path, *, exclude: list[str] | None = None, max_entries: int | None = None,
               max_bytes: int | None = None) -> list[tuple[str, int, str]]:
    """(relative path, size, sha256) of every regular file under *root* (symlinks to files
    followed), sorted by relative path (``/``-separated, byte order). The tree is listed first:
    past *max_entries* files and directories, or *max_bytes* in its files, it stops with
    :class:`TreeTooLarge` before reading any file (``--model /`` never hashes a host)."""
    listed: list[tuple[str, str, os.stat_result]] = []
    entries = total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if not _excluded(prefix + d, exclude)]
        entries += len(dirnames) + len(filenames)
        if max_entries is not None and entries > max_entries:
            raise TreeTooLarge("files and directories", max_entries)
        for name in filenames:
            rel = prefix + name
            if _excluded(rel, exclude):
                continue
            full = os.path.join(dirpath, name)  # noqa: PTH118 (pathlib cost 3 s per 15k files)
            try:
                st = os.stat(full)  # noqa: PTH116
            except OSError:
                continue  # a dangling symlink, or gone: not a regular file
            if stat.S_ISREG(st.st_mode):
                listed.append((rel, full, st))
                total += st.st_size
                if max_bytes is not None and total > max_bytes:
                    raise TreeTooLarge("bytes", max_bytes)
    out = [(rel, st.st_size, sha256_file(full, st)) for rel, full, st in listed]
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
