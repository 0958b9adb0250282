"""Which package installs in a command are unpinned: pip (also ``uv pip``), pipx and
``uv tool``, apt-get/apt, apk, npm, dnf/yum/microdnf/tdnf, conda/mamba/micromamba.

Each check takes one simple command whose words already carry the ARG/ENV values the
caller could substitute; a word still holding ``$`` is judged on what is written around it
(``torch==${V}`` is pinned, ``bitsandbytes>=${V}`` is a range, ``${PKGS}`` is unknown and
left alone)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Collection

from servelab.lint.lazyre import LazyPattern
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
        "--root-user-action",
        "--use-feature",
        "--use-deprecated",
        "--format",
        "--python-platform",
        "--group",
        # uv pip
        "--torch-backend",
        "--index",
        "--default-index",
        "-p",
        "--prerelease",
        "--resolution",
        "--keyring-provider",
        "--link-mode",
        "--exclude-newer",
        "--override",
        "--overrides",
        "--build-constraint",
        "--build-constraints",
        "-b",
        "--constraints",
        "--upgrade-package",
        "-P",
        "--reinstall-package",
        "--no-build-isolation-package",
        "--extra",
        "--group",
        "--python-platform",
        "--config-file",
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
_VCS_PINNED = LazyPattern(r"@[0-9a-f]{40}(#|$)")
NPM_LOCKS = ("package-lock.json", "npm-shrinkwrap.json")

#: Reads a requirements file named in a RUN (image path) -> its text, or None if unknown.
ReadFile = Callable[[str], "str | None"]


_RANGE = LazyPattern(r"(>=?|<=?|~=|!=|\^|~(?!/))")


def _variable(word: str) -> bool:
    return "$" in word


def _variable_pinned(spec: str) -> bool:
    """A spec with an unsubstituted variable: pinned unless what is written is a range."""
    head = spec.split("$", 1)[0]
    return not _RANGE.search(head)


def pip_spec_pinned(spec: str) -> bool:
    """Whether one pip requirement names exactly one version or artifact."""
    s = spec.strip()
    if _variable(s):
        return _variable_pinned(s)
    if s.startswith((".", "/", "~")) or s.endswith((".whl", ".tar.gz", ".zip")):
        return True
    if "/" in s and "://" not in s and not re.search(r"[<>=!~@]", s):
        return True  # pip reads a word with a slash as a local path: `pip install csrc/ln`
    if is_vcs(s):
        return bool(_VCS_PINNED.search(s))
    if re.match(r"^[a-z]+://", s) or " @ " in s:
        return True  # a direct URL to one artifact
    return "==" in s and not re.search(r"==\s*[^,;\s]*\*", s)


def is_vcs(spec: str) -> bool:
    """``git+https://...`` or ``name @ git+https://...``."""
    return spec.startswith(("git+", "hg+", "svn+", "bzr+")) or " @ git+" in spec


#: refs that name no release but a pointer that moves, as base-latest's floating tags do
#: (``@latest-release``, ``@latest``, ``@nightly``, ``@stable``): what they install changes
#: from one build to the next
_MOVING_REF = LazyPattern(
    r"^(latest|[\w.-]*[-_.]latest|latest[-_.][\w.-]*|nightly|rolling|stable|edge)$", re.I)
_REF_VAR = LazyPattern(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


def vcs_moving_ref(spec: str, fetched: Collection[str] = ()) -> bool:
    """Whether a ``git+`` requirement is at a ref that moves: one named so (``@latest-release``,
    ``@main``), or a variable the RUN sets from a download (``V=$(curl .../releases/latest
    | jq -r .tag_name)``, *fetched* holds such names)."""
    if not is_vcs(spec):
        return False
    url = spec.split(" @ ", 1)[-1].strip().split("#", 1)[0]
    host_and_path, at, ref = url.split("://", 1)[-1].rpartition("@")
    if not at or "/" not in host_and_path:
        return False
    var = _REF_VAR.match(ref)
    return bool(_MOVING_REF.match(ref)) or (var is not None and var.group(1) in fetched)


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


#: pip's general options that take a value (``pip --cache-dir /c install x``)
_PIP_GENERAL_WITH_VALUE = frozenset({"--cache-dir", "--log", "--proxy", "--retries", "--timeout",
                                     "--exists-action", "--trusted-host", "--cert",
                                     "--client-cert", "--python", "--keyring-provider"})


def _pip_subcommand(argv: list[str]) -> int | None:
    """Index of pip's subcommand in *argv* (``pip [general options] install ...``)."""
    i = 1
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-"):
            return i
        i += 2 if word in _PIP_GENERAL_WITH_VALUE else 1
    return None


def pip_unpinned(cmd: SimpleCommand, read: ReadFile, fetched: Collection[str] = ()) -> list[str]:
    """Unpinned requirements of a ``pip install`` (empty when pinned, locked or hashed).
    *fetched*: variables the RUN sets from a download (a ref read from the network)."""
    argv = cmd.argv
    sub = _pip_subcommand(argv)
    if sub is None or argv[sub] != "install":
        return []
    args = argv[1:sub] + argv[sub + 1:]  # pip's general options may come first
    if "--require-hashes" in args:
        return []
    opts, operands = options_and_operands(args, PIP_WITH_VALUE)
    while operands and operands[0] == "install":  # `pip install install x`: a typo, not a package
        operands = operands[1:]
    # a git+ requirement at a branch or tag is download-unverified's (fetch.pip_unverified);
    # one at a ref that moves by its name or is read from the network is unpinned too
    bad = [op for op in operands if (not pip_spec_pinned(op) and not is_vcs(op))
           or vcs_moving_ref(op, fetched)]
    for i, o in enumerate(opts):
        name, _, inline = o.partition("=")
        if name in {"-c", "--constraint", "--constraints"}:
            return []
        if name in {"-r", "--requirement"}:
            path = inline or (opts[i + 1] if i + 1 < len(opts) else "")
            text = read(path) if path and not _variable(path) else None
            if text is not None and "--require-hashes" not in text:
                bad += _requirements_unpinned(text)
    return bad


PIPX_WITH_VALUE = frozenset(
    ["--python", "--pip-args", "--index-url", "--suffix", "--spec", "--global", "--with",
     "-w", "--from", "-p", "--preview-features"]
)


def pipx_unpinned(cmd: SimpleCommand) -> list[str]:
    """``pipx install|inject`` and ``uv tool install`` of an app without ``==``/``@ver``."""
    argv = cmd.argv
    if cmd.name == "pipx" and len(argv) > 1 and argv[1] in {"install", "inject"}:
        args = argv[2:]
        if argv[1] == "inject" and args:
            args = args[1:]  # the venv the packages go into
    elif cmd.name == "uv" and argv[1:3] == ["tool", "install"]:
        args = argv[3:]
    else:
        return []
    opts, operands = options_and_operands(args, PIPX_WITH_VALUE)
    for i, o in enumerate(opts):
        if o == "--spec" and i + 1 < len(opts):
            operands = [opts[i + 1]]  # the spec wins over the app name
    return [op for op in operands if not pip_spec_pinned(re.sub(r"@(?=\d)", "==", op))]


def apt_unpinned(cmd: SimpleCommand) -> list[str]:
    if cmd.name not in {"apt-get", "apt"}:
        return []
    _opts, operands = options_and_operands(cmd.argv[1:], APT_WITH_VALUE)
    if not operands or operands[0] != "install":
        return []
    return [p for p in operands[1:] if "=" not in p and not _variable(p) and not _local_deb(p)]


def _local_deb(operand: str) -> bool:
    """A package file on disk (``./x.deb``, ``/tmp/*.deb``, ``./DEBS/libfoo*``), not a
    package from a repository: its version is the file's (``name/release`` is a package)."""
    return operand.endswith(".deb") or operand.startswith(("./", "../", "/", "~"))


def apk_unpinned(cmd: SimpleCommand) -> list[str]:
    if cmd.name != "apk":
        return []
    _opts, operands = options_and_operands(cmd.argv[1:], APK_WITH_VALUE)
    if not operands or operands[0] != "add":
        return []
    return [p for p in operands[1:] if not re.search(r"[=~<>]", p) and not _variable(p)]


RPM_MANAGERS = frozenset({"dnf", "yum", "microdnf", "tdnf", "dnf5"})
RPM_WITH_VALUE = frozenset(
    ["-x", "--exclude", "--releasever", "--installroot", "--repo", "--repoid",
     "--enablerepo", "--disablerepo", "-c", "--config", "--forcearch", "--setopt",
     "--downloaddir", "--destdir"]
)
#: ``name-1.2.3``, ``name-1.2.3-4.el9``, ``name-0:1.2-3.x86_64``: a hyphen, then a version
_RPM_VERSION = LazyPattern(r"-(\d+:)?\d[\w+~^]*\.[\w.+~^-]*$")


def rpm_unpinned(cmd: SimpleCommand) -> list[str]:
    """``dnf``/``yum``/``microdnf``/``tdnf install`` of a package without ``-<version>``."""
    if cmd.name not in RPM_MANAGERS:
        return []
    _opts, operands = options_and_operands(cmd.argv[1:], RPM_WITH_VALUE)
    if not operands or operands[0] not in {"install", "reinstall"}:
        return []
    return _rpm_specs_unpinned(operands[1:])


def _rpm_specs_unpinned(specs: list[str]) -> list[str]:
    """The package specs of an rpm-based install with no version (``name-1.2.3``, an
    edition, ``name=1.2``, a range); groups, local files, URLs and variables are fine."""
    return [p for p in specs
            if not (_variable(p) or p.startswith(("@", "/", "./")) or p.endswith(".rpm")
                    or "://" in p or _RPM_VERSION.search(p) or re.search(r"[<>=]", p))]


#: zypper's options that take a value (global and install's)
ZYPPER_WITH_VALUE = frozenset(
    ["-r", "--repo", "--from", "-t", "--type", "--root", "-R", "--reposd-dir", "-D",
     "--cache-dir", "-C", "--raw-cache-dir", "-c", "--config", "--download", "--releasever"]
)


def zypper_unpinned(cmd: SimpleCommand) -> list[str]:
    """``zypper [global options] install|in [options] name ...`` of a package without a
    version (``name=1.2.3``, ``name>=1.2``, ``name-1.2.3-1.1``)."""
    if cmd.name != "zypper":
        return []
    _opts, operands = options_and_operands(cmd.argv[1:], ZYPPER_WITH_VALUE)
    if not operands or operands[0] not in {"install", "in"}:
        return []
    return _rpm_specs_unpinned(operands[1:])


CONDA_MANAGERS = frozenset({"conda", "mamba", "micromamba"})
CONDA_WITH_VALUE = frozenset(
    ["-n", "--name", "-p", "--prefix", "-c", "--channel", "--file", "-r", "--root-prefix",
     "--platform", "--solver", "--repodata-fn", "--experimental-solver", "-f"]
)


def _conda_spec_pinned(spec: str) -> bool:
    s = spec.split("::", 1)[-1]
    if _variable(s):
        return _variable_pinned(s)
    if s.startswith((".", "/")) or s.endswith((".tar.bz2", ".conda")):
        return True
    if re.search(r"[*<>,|!~]", s):
        return False
    version = re.split(r"==?", s, maxsplit=1)
    return len(version) == 2 and bool(version[1])


def conda_unpinned(cmd: SimpleCommand) -> list[str]:
    """``conda``/``mamba``/``micromamba install|create`` of a package without ``=version``,
    and ``update`` (``conda update conda``, ``--all``), which takes whatever is newest."""
    if cmd.name not in CONDA_MANAGERS:
        return []
    opts, operands = options_and_operands(cmd.argv[1:], CONDA_WITH_VALUE)
    if operands and operands[0] in {"update", "upgrade"}:
        # `conda update conda`, `conda update --all`: whatever is newest on the day
        every = ["--all (every package)"] if {"--all", "--update-all"} & set(opts) else []
        return every + [p for p in operands[1:] if not _conda_spec_pinned(p)]
    if not operands or operands[0] not in {"install", "create"}:
        return []
    if any(o.partition("=")[0] in {"--file", "-f"} for o in opts):
        return []  # the packages come from a file servelab does not read
    return [p for p in operands[1:] if not _conda_spec_pinned(p)]


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


class LockInstaller:
    """A Python installer that installs what its lock file pins and resolves the newest
    versions without it (``uv sync`` with no ``uv.lock``)."""

    __slots__ = ("locks", "manifest", "needs_lock", "subs")

    def __init__(self, subs: frozenset[str], locks: tuple[str, ...], manifest: str,
                 needs_lock: frozenset[str]) -> None:
        #: the subcommands that install
        self.subs = subs
        #: the lock file names
        self.locks = locks
        #: the project file beside the lock (a folder holding it was seen, not guessed)
        self.manifest = manifest
        #: options that fail without the lock, or install from it alone
        self.needs_lock = needs_lock


LOCK_INSTALLERS: dict[str, LockInstaller] = {
    "uv": LockInstaller(frozenset({"sync"}), ("uv.lock",), "pyproject.toml",
                        frozenset({"--frozen", "--locked"})),
    "poetry": LockInstaller(frozenset({"install", "sync"}), ("poetry.lock",), "pyproject.toml",
                            frozenset()),
    "pdm": LockInstaller(frozenset({"install"}), ("pdm.lock",), "pyproject.toml",
                         frozenset({"--frozen-lockfile", "--check"})),
    "pipenv": LockInstaller(frozenset({"install"}), ("Pipfile.lock",), "Pipfile",
                            frozenset({"--deploy", "--ignore-pipfile"})),
}
#: environment variables that make ``uv sync`` use the lock as --frozen/--locked do
UV_LOCK_VARS = ("UV_FROZEN", "UV_LOCKED")


def lock_install(cmd: SimpleCommand) -> LockInstaller | None:
    """The lock-based installer *cmd* runs when it installs a project from its lock (``uv
    sync``, ``poetry install``, ``pdm install``, ``pipenv install`` with no packages named)
    with no option that needs the lock (``--frozen``, ``--locked``, ``--deploy``)."""
    found = LOCK_INSTALLERS.get(cmd.name)
    if found is None or len(cmd.argv) < 2 or cmd.argv[1] not in found.subs:
        return None
    opts = {a.partition("=")[0] for a in cmd.argv[2:] if a.startswith("-")}
    if opts & found.needs_lock:
        return None
    if cmd.name == "uv" and any(cmd.env.get(v, "").lower() in {"1", "true", "yes", "on"}
                                for v in UV_LOCK_VARS):
        return None
    if cmd.name == "pipenv" and any(not a.startswith("-") for a in cmd.argv[2:]):
        return None  # `pipenv install flask`: packages named, not the project's lock
    return found


#: files whose names have no dot, so that a COPY of one is not taken for a folder
_NOT_FOLDERS = frozenset({"Pipfile", "Makefile", "Dockerfile", "Containerfile", "LICENSE",
                          "README", "Procfile", "Gemfile", "Justfile"})


def copies_lock(sources: list[str], locks: tuple[str, ...],
                context_has: Callable[[str, str], bool | None]) -> bool:
    """Whether COPY *sources* may bring in one of *locks*: by name (``uv.lock``,
    ``poetry.lock*``), or a folder (``.``, ``app/``) of the build context that holds it,
    or one servelab cannot see (*context_has* answers None: nothing to judge by)."""
    for src in sources:
        base = src.rstrip("/").rsplit("/", 1)[-1]
        if any(fnmatch.fnmatchcase(lock, base) for lock in locks):
            return True
        if base in {".", "", "*"} or ("." not in base and base not in _NOT_FOLDERS):
            has = [context_has(src, lock) for lock in locks]
            if any(h is None or h for h in has):
                return True
    return False


def copies_npm_lock(sources: list[str], context_has_lock: Callable[[str], bool]) -> bool:
    """Whether COPY sources bring in a package-lock.json/npm-shrinkwrap.json."""
    for src in sources:
        base = src.rstrip("/").rsplit("/", 1)[-1]
        if any(fnmatch.fnmatchcase(lock, base) for lock in NPM_LOCKS):
            return True
        if (base in {".", "", "*"} or "." not in base) and context_has_lock(src):
            return True
    return False


SNAPSHOT = LazyPattern(
    r"snapshot\.debian\.org|snapshot\.ubuntu\.com|APT::Snapshot|apt(-get)?\b[^\n]*--snapshot"
)
