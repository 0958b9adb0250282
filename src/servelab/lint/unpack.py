"""Archives unpacked in a build step: ``tar -x``, ``unzip``, ``7z x`` of a downloaded file
(by its name, a glob such as ``./2*`` included) or of a download piped into them
(``curl -L URL | tar -xz -C /models/x``), and where they unpack to.

:mod:`servelab.lint.downloads` judges such a download as model weights when it unpacks into
a model folder; :mod:`servelab.lint.fetch` as an archive unpacked without a check."""

from __future__ import annotations

import fnmatch
import posixpath
from typing import NamedTuple

from servelab.lint.shell import SimpleCommand

#: programs that unpack the archive they are given (or read on stdin: tar, bsdtar)
EXTRACTORS = frozenset({"tar", "bsdtar", "gtar", "unzip", "7z", "7za", "7zz"})
_GLOBS = frozenset("*?[")


class Unpack(NamedTuple):
    """An extraction: the archive operands, and the folder it writes to ("" for the current
    folder)."""

    archives: list[str]
    dest: str


def _tar(args: list[str]) -> Unpack | None:
    extract = False
    dest = ""
    archives: list[str] = []
    skip = False
    for i, a in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if skip:
            skip = False
            continue
        if a.startswith("--"):
            opt, eq, value = a.partition("=")
            if opt in {"--extract", "--get"}:
                extract = True
            elif opt == "--directory":
                dest, skip = (value, False) if eq else (nxt, True)
            elif opt == "--file":
                archives.append(value if eq else nxt)
                skip = not eq
            continue
        # a cluster of short options (`-zxvf FILE`), or the old form without a dash
        # (`tar xzf FILE`) as the first word
        if a.startswith("-") or (i == 0 and a.isalpha()):
            letters = a.lstrip("-")
            extract = extract or "x" in letters
            if "C" in letters:
                rest = letters[letters.index("C") + 1:]
                dest, skip = (rest, False) if rest else (nxt, True)
            elif letters.endswith("f"):
                archives.append(nxt)
                skip = True
            continue
        archives.append(a)  # a member name, or a file after the old form's `f`
    return Unpack(archives, dest) if extract else None


def _unzip(args: list[str]) -> Unpack | None:
    dest = ""
    archives: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in {"-l", "-t", "-v", "-Z"}:
            return None  # lists or tests, unpacks nothing
        if a == "-d":
            dest, skip = (args[i + 1] if i + 1 < len(args) else ""), True
        elif a.startswith("-d") and len(a) > 2:
            dest = a[2:]
        elif not a.startswith("-"):
            archives.append(a)
    return Unpack(archives[:1], dest)


def _sevenzip(args: list[str]) -> Unpack | None:
    if not args or args[0] not in {"x", "e"}:
        return None
    dest = next((a[2:] for a in args[1:] if a.startswith("-o")), "")
    return Unpack([a for a in args[1:] if not a.startswith("-")][:1], dest)


def extraction(cmd: SimpleCommand) -> Unpack | None:
    """What *cmd* unpacks, and where, when it is an extraction."""
    name = posixpath.basename(cmd.argv[0]) if cmd.argv else ""
    args = cmd.argv[1:]
    if name in {"tar", "bsdtar", "gtar"}:
        return _tar(args)
    if name == "unzip":
        return _unzip(args)
    if name in {"7z", "7za", "7zz"}:
        return _sevenzip(args)
    return None


def names(word: str, name: str) -> bool:
    """Whether *word* (a path, maybe a glob: ``./2*``) names a file whose base name is
    *name*."""
    base = posixpath.basename(word)
    if base == name:
        return True
    return bool(_GLOBS & set(base)) and fnmatch.fnmatchcase(name, base)


def unpacked_to(cmds: list[SimpleCommand], i: int, saved: str | None) -> str | None:
    """Where the download of ``cmds[i]`` is unpacked: the folder ("" for the current one)
    of the extraction that reads it on stdin (``curl URL | tar -xz -C DIR``) or, when it
    was saved to *saved*, of a later command that unpacks a file of that name; None when
    nothing unpacks it."""
    if saved is None:
        if not cmds[i].piped or i + 1 >= len(cmds):
            return None
        got = extraction(cmds[i + 1])
        reads_stdin = got is not None and (not got.archives or got.archives[0] == "-")
        return got.dest if got is not None and reads_stdin else None
    name = posixpath.basename(saved)
    if not name:
        return None
    for cmd in cmds[i + 1:]:
        got = extraction(cmd)
        if got is not None and any(names(a, name) for a in got.archives):
            return got.dest
    return None
