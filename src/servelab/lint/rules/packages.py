"""Package installs in build steps: unpinned-packages."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Iterator

from servelab.findings import Severity
from servelab.lint import follow
from servelab.lint import packages as pkg
from servelab.lint.fetch import expand_known, expander, network_values
from servelab.lint.image import Analysis, StageState
from servelab.lint.parse import Instruction, Stage
from servelab.lint.shell import SimpleCommand, commands, normalise

from . import RULES, Context, Hit
from ._common import listing
from ._start import missing_note


def _snapshot_configured(ctx: Context) -> bool:
    for ins in ctx.df.instructions:
        if pkg.SNAPSHOT.search(ins.text() if ins.cmd == "RUN" else ins.original):
            return True
    for st in ctx.df.stages:
        state = ctx.analysis.state(st)
        for path, src in state.files.items():
            if path.startswith("/etc/apt/"):
                text = Analysis.read(src)
                if text and pkg.SNAPSHOT.search(text):
                    return True
    return False


def _npm_lock_copied(ctx: Context, stage: Stage) -> bool:
    def context_has_lock(src: str) -> bool:
        d = ctx.context_dir / src.strip("/*")
        return any((d / lock).is_file() for lock in pkg.NPM_LOCKS)

    for st in ctx.analysis.chain(stage):
        for ins in st.instructions:
            if (
                ins.cmd in {"COPY", "ADD"}
                and len(ins.args) >= 2
                and pkg.copies_npm_lock(list(ins.args[:-1]), context_has_lock)
            ):
                return True
    return False


def _lock_copied(ctx: Context, stage: Stage, ins: Instruction, locks: tuple[str, ...],
                 manifest: str) -> bool:
    """Whether one of *locks* is in the image before the RUN *ins*: copied by a COPY/ADD
    of the stage or a stage it is built FROM (by name, or a folder of the context that
    holds it, or a folder or stage servelab cannot see into), or bind-mounted into the RUN
    (``--mount=type=bind,source=uv.lock,...``)."""
    if any(lock in f for f in ins.flags for lock in locks):
        return True

    def context_has(src: str, lock: str) -> bool | None:
        d = ctx.context_dir / src.strip("/*")
        if not (d / manifest).is_file():
            return None  # a folder the context does not show: not judged
        return (d / lock).is_file()

    def unseen(_src: str, _lock: str) -> bool | None:
        return None

    dirs = _project_dirs(ctx, stage, ins)
    for st in ctx.analysis.chain(stage):
        state = ctx.analysis.state(st)
        for other in st.instructions:
            if st is stage and other.line >= ins.line:
                break
            if other.cmd not in {"COPY", "ADD"} or len(other.args) < 2:
                continue
            sources = [a for a in other.args[:-1] if not a.startswith("<<")]
            if pkg.copies_lock(sources, locks, lambda _s, _l: False):
                return True  # by name
            # a folder lands where the project is (`COPY . .`, `COPY --from=b /app /app`),
            # not elsewhere (`COPY --from=uv /uv /usr/local/bin/uv`)
            cwd = state.workdirs.get(other.line) or state.workdir or "/"
            dest = posixpath.normpath(posixpath.join(cwd, expand_known(other.args[-1],
                                                                       state.lookup)))
            if "$" not in dest and not any(_related(dest, d) for d in dirs):
                continue  # (a folder still holding a variable may be the project's)
            from_other = other.flag("from") is not None  # a stage or image: not seen into
            if pkg.copies_lock(sources, locks, unseen if from_other else context_has):
                return True
    return False


def _related(a: str, b: str) -> bool:
    """Whether folder *a* is *b* or holds it (where an installer run in *b* looks for its
    project); a folder *b* still holding a variable may be any."""
    return "$" in b or a == b or b.startswith(a.rstrip("/") + "/")


def _project_dirs(ctx: Context, stage: Stage, ins: Instruction) -> list[str]:
    """The folders a RUN's installer may run in: its WORKDIR and the folders its `cd`s
    enter (as written where they hold a variable)."""
    state = ctx.analysis.state(stage)
    cwd = state.workdirs.get(ins.line) or state.workdir or "/"
    out = [cwd]
    for cmd in commands(ins.text()):
        if cmd.name == "cd" and len(cmd.argv) > 1:
            into = expand_known(cmd.argv[1], state.lookup)
            out.append(posixpath.normpath(posixpath.join(cwd, into)))
    return out


def _lock_unpinned(ctx: Context, st: Stage, cmd: SimpleCommand,
                   ins: Instruction | None) -> tuple[str, str, list[str]] | None:
    """``uv sync`` (``poetry install``, ``pdm install``, ``pipenv install``) run with no lock
    file in the image and no option that needs one: it resolves the newest versions."""
    found = pkg.lock_install(cmd)
    if found is None or ins is None:
        return None
    state = ctx.analysis.state(st)
    if cmd.name == "uv" and any((state.lookup(v) or "").lower() in {"1", "true", "yes", "on"}
                                for v in pkg.UV_LOCK_VARS):
        return None
    if _lock_copied(ctx, st, ins, found.locks, found.manifest):
        return None
    what = " ".join(cmd.argv[:2])
    return (cmd.name, what, [f"(no {found.locks[0]} copied before `{what}`)"])


def _expanded(ctx: Context, state: StageState, text: str) -> list[SimpleCommand]:
    """The RUN's simple commands with ARG/ENV values (and its own assignments) substituted;
    a substituted list of packages (``$PKGS`` = ``a b``) becomes several words."""
    exp = expander(state.lookup, text, ctx.df.escape)
    out = []
    for cmd in commands(text):
        argv: list[str] = []
        for word in cmd.argv:
            value = exp(word)
            # only an unquoted word (no blank in it) is split: `"x=$(echo $V | cut ...)"`
            # stays one word, whatever its value holds
            split = value != word and " " in value and " " not in word
            argv += value.split() if split else [value]
        # `ENV PIP_INSTALL="python -m pip install"` then `RUN $PIP_INSTALL x`: the program
        # itself came from a variable, so it is normalised again (python -m pip -> pip)
        out.append(SimpleCommand(normalise(_unwrapped(argv)), cmd.env, cmd.line, cmd.piped))
    return out


def _unwrapped(argv: list[str]) -> list[str]:
    """The command that ``conda run -n env CMD ...`` (mamba, micromamba) runs: ``conda run
    -n py310 pip install x`` installs with pip."""
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] not in pkg.CONDA_MANAGERS or argv[1] != "run":
        return argv
    i = 2
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in pkg.CONDA_WITH_VALUE else 1
    return argv[i:] or argv


def _unpinned(ctx: Context, st: Stage, cmd: SimpleCommand, read: pkg.ReadFile,
              snapshot: Callable[[], bool], *, fetched: Collection[str] = (),
              ins: Instruction | None = None) -> tuple[str, str, list[str]] | None:
    """(manager, what it ran, unpinned packages) of one command, or None (*fetched*: the
    variables the RUN sets from a download; *ins*: the RUN, to judge a lock-based install)."""
    name = cmd.name
    sub = cmd.argv[1] if len(cmd.argv) > 1 else ""
    found: tuple[str, str, list[str]] | None = None
    if name in pkg.LOCK_INSTALLERS and sub in pkg.LOCK_INSTALLERS[name].subs:
        found = _lock_unpinned(ctx, st, cmd, ins)
    elif name == "pip":
        found = ("pip", "pip install", pkg.pip_unpinned(cmd, read, fetched))
    elif name in {"pipx", "uv"}:
        found = ("pipx", " ".join(cmd.argv[: 3 if name == "uv" else 2]), pkg.pipx_unpinned(cmd))
    elif name in {"apt-get", "apt"}:
        bad = pkg.apt_unpinned(cmd)
        found = ("apt", f"{name} install", bad if bad and not snapshot() else [])
    elif name == "apk":
        found = ("apk", "apk add", pkg.apk_unpinned(cmd))
    elif name == "npm":
        found = ("npm", "npm install", pkg.npm_unpinned(cmd, _npm_lock_copied(ctx, st)))
    elif name in pkg.RPM_MANAGERS:
        found = ("dnf", f"{name} install", pkg.rpm_unpinned(cmd))
    elif name == "zypper":
        found = ("zypper", "zypper install", pkg.zypper_unpinned(cmd))
    elif name in pkg.CONDA_MANAGERS:
        found = ("conda", f"{name} {sub}", pkg.conda_unpinned(cmd))
    return found if found and found[2] else None


@RULES.rule(
    "unpinned-packages",
    Severity.WARNING,
    "packages installed without pinned versions",
    rationale="An unpinned install resolves to whatever is newest on the day of the build, so "
    "two builds of the same commit differ, and a bad release reaches the image unnoticed. "
    "One finding per RUN and package manager, naming every unpinned package.",
    fix="pin versions (pip, pipx, uv: name==1.2.3 or a hashed lock with --require-hashes; apt: "
    "name=version with a snapshot.debian.org mirror; apk: name=version; dnf/yum/microdnf: "
    "name-1.2.3; zypper: name=1.2.3; conda/mamba: name=1.2.3, no conda update; npm: copy "
    "package-lock.json and run npm ci; uv/poetry/pdm/pipenv: copy the lock file and run "
    "uv sync --locked, pipenv install --deploy)",
)
def check_unpinned_packages(ctx: Context) -> Iterator[Hit]:
    snapshot: list[bool] = []

    def snapshot_configured() -> bool:
        if not snapshot:
            snapshot.append(_snapshot_configured(ctx))
        return snapshot[0]

    for st in ctx.df.stages:
        state = ctx.analysis.state(st)
        for ins in st.instructions:
            if ins.cmd == "RUN":
                yield from _run_hits(ctx, st, state, ins, snapshot_configured)


def _run_hits(ctx: Context, st: Stage, state: StageState, ins: Instruction,
              snapshot: Callable[[], bool]) -> Iterator[Hit]:
    workdir = state.workdirs.get(ins.line, "/")
    missing: list[tuple[str, Instruction]] = []

    def read(path: str) -> str | None:
        # relative to the WORKDIR in effect at this RUN, not the stage's last one
        img = posixpath.normpath(posixpath.join(workdir, path))
        src = ctx.analysis.source_of(img, state)
        if src is None or (src.context_path is not None and not src.context_path.is_file()):
            copy = follow.missing_copy(ctx.analysis, st, img)
            if copy is not None:  # copied from a context that lacks it
                missing.append((img, copy))
        return Analysis.read(src) if src else None

    by_manager: dict[str, tuple[list[str], list[str]]] = {}
    fetched = set(network_values(ins.text()))
    for cmd in _expanded(ctx, state, ins.text()):
        found = _unpinned(ctx, st, cmd, read, snapshot, fetched=fetched, ins=ins)
        if found:
            manager, what, bad = found
            whats, pkgs = by_manager.setdefault(manager, ([], []))
            whats.append(what)
            pkgs.extend(bad)
    note = missing_note(ctx, missing, "the packages it lists were not read") if missing else ""
    for manager, (whats, bad) in by_manager.items():
        yield Hit(
            "unpinned-packages",
            ins.line,
            f"{listing(whats)} without pinned versions: {listing(bad)}"
            + (f"; {note}" if note and manager == "pip" else ""),
            context={"stage": st.label, "manager": manager},
        )
    if note and "pip" not in by_manager:
        yield Hit("unpinned-packages", ins.line, f"whether this RUN's pip install pins its "
                  f"packages was not judged: {note}", fix="pass --context with the directory "
                  f"docker build is given (now {ctx.context_dir})",
                  context={"stage": st.label, "manager": "pip"}, severity=Severity.INFO)
