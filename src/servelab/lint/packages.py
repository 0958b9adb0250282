"""Which package installs in a command are unpinned (pip, apt-get, apk, npm)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable

from servelab.lint.shell import SimpleCommand, options_and_operands

PIP_WITH_VALUE = frozenset(
    [
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--prefix",
        "--root",
        "-c",
        "--constraint",
        "-r",
        "--requirement",
        "--trusted-host",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--progress-bar",
        "--cache-dir",
        "--src",
        "--upgrade-strategy",
        "--only-binary",
        "--no-binary",
        "-C",
        "--config-settings",
        "--global-option",
        "--log",
        "--timeout",
        "--retries",
        "--proxy",
        "--cert",
        "--client-cert",
        "--exists-action",
        "--python",
        "-e",
        "--editable",
        "--report",
        "--index-strategy",
        "--extra-index",
    ]
)
APT_WITH_VALUE = frozenset(["-o", "-t", "--target-release", "-c", "--config-file"])
APK_WITH_VALUE = frozenset(
    [
        "-X",
        "--repository",
        "-t",
        "--virtual",
        "--repositories-file",
        "-p",
        "--root",
        "--arch",
        "--cache-dir",
        "--keys-dir",
    ]
)
NPM_WITH_VALUE = frozenset(["--prefix", "--registry", "--cache", "--tag", "-w", "--workspace"])
_VCS_PINNED = re.compile(r"@[0-9a-f]{40}(#|$)")
NPM_LOCKS = ("package-lock.json", "npm-shrinkwrap.json")

#: Reads a requirements file named in a RUN (image path) -> its text, or None if unknown.
ReadFile = Callable[[str], "str | None"]


def _variable(word: str) -> bool:
    return "$" in word


def pip_spec_pinned(spec: str) -> bool:
    """Whether one pip requirement names exactly one version or artifact."""
    s = spec.strip()
    if _variable(s) or s.startswith((".", "/", "~")) or s.endswith((".whl", ".tar.gz", ".zip")):
        return True
    if s.startswith(("git+", "hg+", "svn+", "bzr+")) or " @ git+" in s:
        return bool(_VCS_PINNED.search(s))
    if re.match(r"^[a-z]+://", s) or " @ " in s:
        return True  # a direct URL to one artifact
    return "==" in s and not re.search(r"==\s*[^,;\s]*\*", s)


def _requirements_unpinned(text: str) -> list[str]:
    bad: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        if "--hash" in line:
            continue
        if not pip_spec_pinned(line.split(";", 1)[0]):
            bad.append(line)
    return bad


def pip_unpinned(cmd: SimpleCommand, read: ReadFile) -> list[str]:
    """Unpinned requirements of a ``pip install`` (empty when pinned, locked or hashed)."""
    argv = cmd.argv
    if argv[:2] != ["pip", "install"]:
        return []
    args = argv[2:]
    if "--require-hashes" in args:
        return []
    opts, operands = options_and_operands(args, PIP_WITH_VALUE)
    bad = [op for op in operands if not pip_spec_pinned(op)]
    for i, o in enumerate(opts):
        name, _, inline = o.partition("=")
        if name in {"-c", "--constraint"}:
            return []
        if name in {"-r", "--requirement"}:
            path = inline or (opts[i + 1] if i + 1 < len(opts) else "")
            text = read(path) if path and not _variable(path) else None
            if text is not None and "--require-hashes" not in text:
                bad += _requirements_unpinned(text)
    return bad


def apt_unpinned(cmd: SimpleCommand) -> list[str]:
    if cmd.name not in {"apt-get", "apt"}:
        return []
    _opts, operands = options_and_operands(cmd.argv[1:], APT_WITH_VALUE)
    if not operands or operands[0] != "install":
        return []
    return [p for p in operands[1:] if "=" not in p and not _variable(p) and not p.endswith(".deb")]


def apk_unpinned(cmd: SimpleCommand) -> list[str]:
    if cmd.name != "apk":
        return []
    _opts, operands = options_and_operands(cmd.argv[1:], APK_WITH_VALUE)
    if not operands or operands[0] != "add":
        return []
    return [p for p in operands[1:] if not re.search(r"[=~<>]", p) and not _variable(p)]


def _npm_spec_pinned(spec: str) -> bool:
    if _variable(spec) or spec.startswith((".", "/", "file:")):
        return True
    name_end = spec.find("@", 1 if spec.startswith("@") else 0)
    if name_end < 0:
        return False
    version = spec[name_end + 1 :]
    return bool(version) and version not in {"latest", "next", "*"} and version[0] not in "^~><"


def npm_unpinned(cmd: SimpleCommand, lock_copied: bool) -> list[str]:
    if cmd.name != "npm" or len(cmd.argv) < 2 or cmd.argv[1] not in {"install", "i", "add"}:
        return []
    _opts, operands = options_and_operands(cmd.argv[2:], NPM_WITH_VALUE)
    if not operands:
        return [] if lock_copied else ["(no lockfile copied before `npm install`)"]
    return [p for p in operands if not _npm_spec_pinned(p)]


def copies_npm_lock(sources: list[str], context_has_lock: Callable[[str], bool]) -> bool:
    """Whether COPY sources bring in a package-lock.json/npm-shrinkwrap.json."""
    for src in sources:
        base = src.rstrip("/").rsplit("/", 1)[-1]
        if any(fnmatch.fnmatchcase(lock, base) for lock in NPM_LOCKS):
            return True
        if (base in {".", "", "*"} or "." not in base) and context_has_lock(src):
            return True
    return False


SNAPSHOT = re.compile(
    r"snapshot\.debian\.org|snapshot\.ubuntu\.com|APT::Snapshot|apt(-get)?\b[^\n]*--snapshot"
)
