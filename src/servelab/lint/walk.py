"""The build context as BuildKit reads it: symbolic links re-rooted, globs and walks bounded.

A build context comes with the pull request, so nothing in it may lead lint outside it:

* :func:`reroot` resolves a context path the way BuildKit does: a symbolic link's absolute
  target starts again at the context root and ``..`` never climbs above it, so a link to
  ``/etc/passwd`` names ``<context>/etc/passwd``, never the host's file;
* :func:`glob` expands a ``COPY`` source pattern one path segment at a time without entering
  linked directories, and stops after :data:`CONTEXT_ENTRIES` entries (symbolic-link loops
  plus ``COPY */*/*/...`` end at once);
* :func:`weight_files` walks a copied folder for weight files: links are not followed (BuildKit
  copies them as links, their targets are not in the layer), and a walk that reaches
  :data:`CONTEXT_ENTRIES` says so (:attr:`Found.stopped`) so that the rule reports it.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from servelab.lint import downloads, ignore
from servelab.lint.coverage import Notes, bound
from servelab.textio import Limit

#: Entries (files and folders) one walk or glob of a build context looks at.
CONTEXT_ENTRIES = Limit("SERVELAB_MAX_CONTEXT_FILES", 5000,
                        "entries looked at in one walk of a build context")
#: Symbolic links followed while resolving one path (Linux gives up at 40 too).
MAX_LINK_HOPS = 40
#: Matches of one COPY source pattern that are judged.
MAX_GLOB_MATCHES = 200


def _parts(text: str) -> list[str]:
    return [p for p in text.replace(os.sep, "/").split("/") if p not in {"", "."}]


def reroot(context: Path, rel: str, notes: Notes | None = None,
           shown: str = "") -> Path | None:
    """The real path inside *context* that the context path *rel* names, every symbolic link
    resolved inside the context (an absolute target starts at the context root, ``..`` stops
    there); None when it does not exist or the links loop (with *notes*: a coverage note
    for the loop, naming the path *shown*, default *rel*)."""
    root = Path(os.path.realpath(context))
    todo = _parts(rel)
    done: list[str] = []
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        here = root.joinpath(*done, part)
        try:
            mode = here.lstat().st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            hops += 1
            if hops > MAX_LINK_HOPS:
                if notes is not None:
                    notes.add(bound(f"the build context path {(shown or rel)[:200]}",
                                    "MAX_LINK_HOPS",
                                    MAX_LINK_HOPS, "symbolic links a path (a loop?): not read"))
                return None
            try:  # cleaned first, as Go's filepath.Clean does in BuildKit
                target = posixpath.normpath(str(here.readlink()))
            except OSError:
                return None
            if target.startswith("/"):
                done = []
            todo = _parts(target) + todo
            continue
        done.append(part)
    return root.joinpath(*done)


class Glob(NamedTuple):
    """What a COPY source pattern matches in the context, and whether the search stopped at
    :data:`CONTEXT_ENTRIES` entries or :data:`MAX_GLOB_MATCHES` matches."""

    matches: list[Path]
    stopped: bool
    #: each match as the pattern named it (relative, ``/``-separated, links not resolved)
    names: tuple[str, ...] = ()


def _real_dirs(d: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(d) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:
        return []


def glob(context: Path, pattern: str) -> Glob:
    """The context paths *pattern* (relative, ``/``-separated, ``*?[`` wildcards within a
    segment, as Go's filepath.Match) matches, each re-rooted (:func:`reroot`)."""
    root = Path(os.path.realpath(context))
    cap = CONTEXT_ENTRIES.value()
    level = [""]
    seen = 0
    segments = _parts(pattern)
    for n, seg in enumerate(segments):
        last = n == len(segments) - 1
        if not ignore.has_wildcard(seg):
            level = [f"{rel}/{seg}".lstrip("/") for rel in level]
            continue
        regex = ignore.segment_regex(seg)
        found: list[str] = []
        for rel in level:
            here = reroot(root, rel) if rel else root
            for entry in _real_dirs(here) if here is not None else []:
                seen += 1
                if seen > cap:
                    return _glob_of(root, found if last else [], True)
                if regex.match(entry.name) and (last or entry.is_dir(follow_symlinks=False)):
                    found.append(f"{rel}/{entry.name}".lstrip("/"))
        level = found
    return _glob_of(root, level, False)


def _glob_of(root: Path, rels: list[str], stopped: bool) -> Glob:
    """The existing matches among *rels*, re-rooted, at most :data:`MAX_GLOB_MATCHES`."""
    pairs = []
    for rel in sorted(rels):
        p = reroot(root, rel)
        if p is not None:
            pairs.append((rel, p))
    kept = pairs[:MAX_GLOB_MATCHES]
    return Glob([p for _r, p in kept], stopped or len(pairs) > MAX_GLOB_MATCHES,
                tuple(r for r, _p in kept))


class Found(NamedTuple):
    """Weight files (path relative to the context, size) and whether the walk stopped at
    :data:`CONTEXT_ENTRIES` entries (then files past it were not judged)."""

    files: list[tuple[str, int]]
    stopped: bool

    def stop_note(self, what: str) -> str:
        cap = CONTEXT_ENTRIES.value()
        return (f"{what}: servelab stopped after {cap} entries of the build context, so weight "
                f"files past them were not judged ({CONTEXT_ENTRIES.raise_hint()})")


def weight_files(context: Path, start: str, excluded: Callable[[str], bool]) -> Found:
    """Weight files under *start* (a file or a folder relative to the context) that the
    context keeps (*excluded*: what .dockerignore drops); links are never followed."""
    root = Path(os.path.realpath(context))
    top = reroot(root, start)
    if top is None:
        return Found([], False)
    rel_top = os.path.relpath(top, root).replace(os.sep, "/")
    rel_top = "" if rel_top == "." else rel_top
    if top.is_file():
        size = None if excluded(rel_top) else downloads.weight_file(top)
        return Found([(rel_top, size)] if size is not None else [], False)
    return _walk(top, rel_top, excluded, CONTEXT_ENTRIES.value())


def _walk(top: Path, rel_top: str, excluded: Callable[[str], bool], cap: int) -> Found:
    found: list[tuple[str, int]] = []
    todo = deque([(top, rel_top)])
    seen = 0
    while todo:
        here, rel_dir = todo.popleft()
        prefix = f"{rel_dir}/" if rel_dir else ""
        for entry in _real_dirs(here):
            seen += 1
            if seen > cap:
                return Found(found, True)
            rel = prefix + entry.name
            if entry.is_symlink() or excluded(rel):
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in ignore.SKIP_DIRS:
                    todo.append((Path(entry.path), rel))
            elif entry.is_file(follow_symlinks=False):
                size = downloads.weight_file(Path(entry.path))
                if size is not None:
                    found.append((rel, size))
    return Found(found, False)
