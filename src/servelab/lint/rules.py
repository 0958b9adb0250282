"""The lint rules: each a small function registered with its public :class:`Rule`.

A check gets a :class:`Context` (the parsed Dockerfile, its stage analysis, the build
context) and yields :class:`Hit` s. Rules about the running image judge the final stage and
the stages it is built FROM; ``weights-baked`` also looks at stages copied from; build-time
rules look at every stage.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from servelab.findings import Rule, Severity
from servelab.image.ref import ImageRef, pinned_digest
from servelab.lint import downloads, ignore, packages
from servelab.lint.image import Analysis, FileSource, StageState, is_url
from servelab.lint.parse import Dockerfile, Instruction, Stage, arg_items
from servelab.lint.shell import commands
from servelab.lint.words import expand, references, unquote

DOCS = "https://github.com/servelab/servelab/blob/main/docs/lint.md#"
_WHOLE_CONTEXT = {".", "./", "*", "./*", "/", ""}
_MAX_WALK = 5000
_SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".tox", ".mypy_cache"}
_SECRET_WORDS = {
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "SECRET",
    "CREDENTIALS",
    "CREDENTIAL",
    "APIKEY",
    "PAT",
}
_SECRET_PAIRS = {
    ("API", "KEY"),
    ("ACCESS", "KEY"),
    ("PRIVATE", "KEY"),
    ("SECRET", "KEY"),
    ("AUTH", "KEY"),
    ("SIGNING", "KEY"),
    ("CLIENT", "SECRET"),
}
_NOT_SECRET_SUFFIX = {"FILE", "PATH", "DIR", "ENV", "NAME", "ID", "URL", "MOUNT", "LENGTH", "TYPE"}


@dataclass
class Hit:
    rule: str
    line: int
    message: str
    fix: str | None = None
    context: dict[str, str] = field(default_factory=dict)


@dataclass
class Context:
    df: Dockerfile
    analysis: Analysis
    context_dir: Path
    health_declared: bool = False


Check = Callable[[Context], Iterable[Hit]]
RULES: dict[str, Rule] = {}
CHECKS: list[tuple[str, Check]] = []


def rule(
    rid: str, severity: Severity, summary: str, rationale: str, fix: str
) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        RULES[rid] = Rule(rid, severity, summary, rationale, fix, DOCS + rid)
        CHECKS.append((rid, fn))
        return fn

    return deco


def _judged(stage: Stage) -> bool:
    """Whether a FROM names a real image (not scratch, not a stage, resolved)."""
    return stage.base is not None and stage.parent is None and stage.base.lower() != "scratch"


def _shown(stage: Stage) -> str:
    if stage.base is not None and stage.base != stage.base_raw:
        return f"{stage.base_raw} (resolves to {stage.base})"
    return stage.base_raw


# -- base images ---------------------------------------------------------------------------


@rule(
    "base-unpinned",
    Severity.ERROR,
    "FROM image not pinned by digest",
    "A tag is a moving pointer: the same Dockerfile builds on a different base tomorrow, so "
    "the image cannot be rebuilt bit for bit and a base update can change the serving "
    "runtime without a code change. Every stage counts, builders included.",
    "pin the base: FROM name:tag@sha256:<digest> (docker buildx imagetools inspect name:tag "
    "shows it); let a bot such as Renovate update the digest",
)
def check_base_unpinned(ctx: Context) -> Iterator[Hit]:
    for st in ctx.df.stages:
        if _judged(st) and not pinned_digest(st.base or ""):
            yield Hit(
                "base-unpinned",
                st.from_instr.line,
                f"FROM {_shown(st)} is not pinned by @sha256 digest",
                context={"stage": st.label},
            )


@rule(
    "base-latest",
    Severity.WARNING,
    "FROM image with tag latest or no tag",
    "`latest` (or no tag, which means latest) says nothing about the version: readers and "
    "update bots cannot tell which release the digest belongs to, and an unpinned build "
    "jumps major versions.",
    "name the release in the tag (python:3.11.9-slim-bookworm), then pin its digest",
)
def check_base_latest(ctx: Context) -> Iterator[Hit]:
    for st in ctx.df.stages:
        if not _judged(st):
            continue
        _name, tag, _digest = ImageRef.split(st.base or "")
        if tag is None or tag == "latest":
            what = "tag latest" if tag else "no tag"
            yield Hit(
                "base-latest",
                st.from_instr.line,
                f"FROM {_shown(st)} has {what}",
                context={"stage": st.label},
            )


@rule(
    "arg-unresolved",
    Severity.ERROR,
    "FROM uses an ARG that has no value",
    "servelab substitutes ARG defaults and build arguments into FROM as BuildKit does. An ARG "
    "with no default and no --build-arg makes the base unknown (BuildKit substitutes an empty "
    "string), so the base rules cannot judge it; servelab does not guess.",
    "give the ARG a pinned default (ARG BASE=name:tag@sha256:...), or pass the value with "
    "--build-arg NAME=VALUE or --build-args-file FILE",
)
def check_arg_unresolved(ctx: Context) -> Iterator[Hit]:
    declared = {n for i in ctx.df.global_args for n, _d, _r in arg_items(i, ctx.df.escape)}
    for st in ctx.df.stages:
        for name in st.unresolved:
            why = (
                "has no default and no build argument"
                if name in declared
                else "is not declared by an ARG before the first FROM"
            )
            yield Hit(
                "arg-unresolved",
                st.from_instr.line,
                f"FROM {st.base_raw}: ARG {name} {why}",
                context={"stage": st.label},
            )


@rule(
    "devel-base",
    Severity.WARNING,
    "final image built on a -devel (SDK) base",
    "CUDA/PyTorch -devel images carry compilers and headers, gigabytes that every node pulls "
    "before the server can start; serving needs only the -runtime variant.",
    "compile in a -devel builder stage and COPY --from it into a -runtime (or -base) image",
)
def check_devel_base(ctx: Context) -> Iterator[Hit]:
    root = ctx.analysis.chain()[0]
    if _judged(root):
        _name, tag, _d = ImageRef.split(root.base or "")
        if tag and re.search(r"(^|[-_.])devel([-_.]|$)", tag):
            yield Hit(
                "devel-base",
                root.from_instr.line,
                f"the final image is built on {root.base}, a -devel image",
                context={"stage": root.label},
            )


# -- running image -------------------------------------------------------------------------


def _is_root(user: str) -> bool:
    name = user.split(":", 1)[0].strip()
    return name == "root" or (name.isdigit() and int(name) == 0)


@rule(
    "root-user",
    Severity.ERROR,
    "the final image runs as root",
    "A serving process has no need for root; as root a compromised model server owns the "
    "container and whatever it mounts. The final stage's user counts: a USER in a builder "
    "stage the final stage is not built FROM does not carry over.",
    "create an unprivileged user and end with USER <uid> (e.g. RUN useradd -u 10001 app, "
    "then USER 10001)",
)
def check_root_user(ctx: Context) -> Iterator[Hit]:
    state = ctx.analysis.state()
    final = ctx.df.final
    if state.user is None:
        yield Hit(
            "root-user",
            final.from_instr.line,
            "the final stage sets no USER: it runs as the base image's user, root "
            "unless the base sets another",
            context={"stage": final.label},
        )
        return
    value, ins = state.user
    if value is not None and _is_root(value):
        yield Hit(
            "root-user",
            ins.line,
            f"the final image runs as USER {value}",
            context={"stage": final.label},
        )


@rule(
    "no-health",
    Severity.WARNING,
    "no HEALTHCHECK and no health endpoint declared",
    "Without a readiness signal nobody can tell a server that is loading weights from one "
    "that hangs, and cold-start time cannot be measured.",
    "add HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1, or declare the "
    "health endpoint in the experiment spec",
)
def check_no_health(ctx: Context) -> Iterator[Hit]:
    if ctx.health_declared or ctx.analysis.state().healthcheck is not None:
        return
    final = ctx.df.final
    yield Hit(
        "no-health",
        final.from_instr.line,
        "the final image has no HEALTHCHECK (or HEALTHCHECK NONE) and no health "
        "endpoint is declared",
        context={"stage": final.label},
    )


def _start_texts(state: StageState) -> list[tuple[Instruction, str]]:
    ep, cmd = state.entrypoint, state.cmd

    def text(ins: Instruction) -> str:
        return shlex.join(ins.args) if ins.json else " ".join(ins.args)

    if ep is None:
        return [(cmd, text(cmd))] if cmd else []
    if not ep.json or cmd is None:
        return [(ep, text(ep))]
    tail = list(cmd.args) if cmd.json else ["/bin/sh", "-c", " ".join(cmd.args)]
    return [(ep, shlex.join([*ep.args, *tail]))]


def _attribute(token: str, primary: Instruction, state: StageState) -> Instruction:
    cmd = state.cmd
    if cmd is not None and cmd is not primary and token and token in cmd.original:
        return cmd
    return primary


def _scripts(ctx: Context, text: str, state: StageState) -> Iterator[tuple[FileSource, str]]:
    seen: set[str] = set()
    todo = [(text, 0)]
    while todo:
        body, depth = todo.pop()
        for cmd in commands(body):
            for word in cmd.argv:
                path = ctx.analysis.resolve_in_image(word, state)
                src = ctx.analysis.source_of(path, state) if path else None
                if src is None or src.image_path in seen:
                    continue
                seen.add(src.image_path)
                content = Analysis.read(src)
                if content is not None:
                    yield src, content
                    if depth < 2:
                        todo.append((content, depth + 1))


def _script_name(src: FileSource) -> str:
    if src.context_path is not None:
        return os.path.relpath(src.context_path)
    return f"{src.image_path} (heredoc at line {src.instr.line})"


@rule(
    "startup-download",
    Severity.ERROR,
    "the start command downloads or installs at start",
    "Work done at every start (pip install, model downloads, git clone) makes cold start slow "
    "and fragile: it fails without network, varies with the hub, and runs again on each "
    "replica. Scripts the Dockerfile copies in and the start command runs are read too.",
    "install at build time, mount the weights read-only (-v model:/models:ro) and set "
    "HF_HUB_OFFLINE=1 so hub model ids resolve from the local cache",
)
def check_startup_download(ctx: Context) -> Iterator[Hit]:
    state = ctx.analysis.state()
    for primary, text in _start_texts(state):
        for p in downloads.start_problems(text, state.env):
            ins = _attribute(p.token, primary, state)
            yield Hit("startup-download", ins.line, f"the {ins.cmd} {p.what}")
        for src, content in _scripts(ctx, text, state):
            for p in downloads.start_problems(content, state.env):
                ins = _attribute(src.image_path.rsplit("/", 1)[-1], primary, state)
                where = f"{_script_name(src)}:{p.line}"
                yield Hit(
                    "startup-download",
                    ins.line,
                    f"{src.image_path}, run by {ins.cmd}, {p.what} ({where})",
                    context={"script": where},
                )


# -- build steps ---------------------------------------------------------------------------


def _values(ctx: Context, stage: Stage, words: Iterable[str]) -> list[str]:
    state = ctx.analysis.state(stage)
    out = []
    for w in words:
        exp = expand(w, state.lookup, ctx.df.escape)
        out.append(unquote(exp.value if not exp.unresolved else w, ctx.df.escape))
    return out


@rule(
    "weights-baked",
    Severity.ERROR,
    "model weights copied or downloaded into the image",
    "Weights in a layer make the image gigabytes larger: every node pulls them before the "
    "server starts, a new model means a new image, and the pull cache is useless across "
    "models. Stages the final image copies from count.",
    "keep weights out of the image: mount them at run time (-v model:/models:ro, a PVC, or an "
    "init container), and point the server at the mount with HF_HUB_OFFLINE=1",
)
def check_weights_baked(ctx: Context) -> Iterator[Hit]:
    for st in ctx.analysis.reachable():
        for ins in st.instructions:
            if ins.cmd in {"COPY", "ADD"} and len(ins.args) >= 2:
                srcs = [a for a in ins.args[:-1] if not a.startswith("<<")]
                for src in _values(ctx, st, srcs):
                    if downloads.is_weight_path(src):
                        yield Hit(
                            "weights-baked",
                            ins.line,
                            f"{ins.cmd} puts model weights ({src}) into the image",
                            context={"stage": st.label},
                        )
            elif ins.cmd == "RUN":
                for what in dict.fromkeys(downloads.build_weight_downloads(ins.text())):
                    yield Hit(
                        "weights-baked",
                        ins.line,
                        f"RUN downloads model weights at build time ({what})",
                        context={"stage": st.label},
                    )


@rule(
    "remote-add",
    Severity.ERROR,
    "ADD of a URL without --checksum",
    "ADD <url> fetches whatever the server returns at build time: the build is not "
    "reproducible and a compromised server changes the image silently.",
    "add --checksum=sha256:<hex> to the ADD (BuildKit verifies it), or download in a RUN that "
    "checks a known hash",
)
def check_remote_add(ctx: Context) -> Iterator[Hit]:
    for st in ctx.df.stages:
        for ins in st.instructions:
            if ins.cmd != "ADD" or ins.flag("checksum"):
                continue
            for src in _values(ctx, st, ins.args[:-1]):
                if is_url(src):
                    yield Hit(
                        "remote-add",
                        ins.line,
                        f"ADD {src} without --checksum",
                        context={"stage": st.label},
                    )


def _snapshot_configured(ctx: Context) -> bool:
    for ins in ctx.df.instructions:
        if packages.SNAPSHOT.search(ins.text() if ins.cmd == "RUN" else ins.original):
            return True
    for st in ctx.df.stages:
        state = ctx.analysis.state(st)
        for path, src in state.files.items():
            if path.startswith("/etc/apt/"):
                text = Analysis.read(src)
                if text and packages.SNAPSHOT.search(text):
                    return True
    return False


def _npm_lock_copied(ctx: Context, stage: Stage) -> bool:
    def context_has_lock(src: str) -> bool:
        d = ctx.context_dir / src.strip("/*")
        return any((d / lock).is_file() for lock in packages.NPM_LOCKS)

    for st in ctx.analysis.chain(stage):
        for ins in st.instructions:
            if (
                ins.cmd in {"COPY", "ADD"}
                and len(ins.args) >= 2
                and packages.copies_npm_lock(list(ins.args[:-1]), context_has_lock)
            ):
                return True
    return False


def _short(items: list[str]) -> str:
    return ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")


@rule(
    "unpinned-packages",
    Severity.WARNING,
    "packages installed without pinned versions",
    "An unpinned install resolves to whatever is newest on the day of the build, so two "
    "builds of the same commit differ, and a bad release reaches the image unnoticed.",
    "pin versions (pip: name==1.2.3 or a hashed lock with --require-hashes; apt: name=version "
    "with a snapshot.debian.org mirror; apk: name=version; npm: copy package-lock.json and "
    "run npm ci)",
)
def check_unpinned_packages(ctx: Context) -> Iterator[Hit]:
    snapshot = None
    for st in ctx.df.stages:
        state = ctx.analysis.state(st)
        for ins in st.instructions:
            if ins.cmd != "RUN":
                continue
            workdir = state.workdirs.get(ins.line, "/")

            def read(path: str, workdir: str = workdir, state: StageState = state) -> str | None:
                img = ctx.analysis.resolve_in_image(path, state) or path
                if not img.startswith("/"):
                    img = f"{workdir.rstrip('/')}/{img}"
                src = ctx.analysis.source_of(img, state)
                return Analysis.read(src) if src else None

            for cmd in commands(ins.text()):
                found: list[tuple[str, list[str]]] = [
                    ("pip install", packages.pip_unpinned(cmd, read)),
                    ("apk add", packages.apk_unpinned(cmd)),
                ]
                if cmd.name == "npm":
                    found.append(
                        ("npm install", packages.npm_unpinned(cmd, _npm_lock_copied(ctx, st)))
                    )
                apt = packages.apt_unpinned(cmd)
                if apt:
                    snapshot = _snapshot_configured(ctx) if snapshot is None else snapshot
                    if not snapshot:
                        found.append((f"{cmd.name} install", apt))
                for what, bad in found:
                    if bad:
                        yield Hit(
                            "unpinned-packages",
                            ins.line,
                            f"{what} without pinned versions: {_short(bad)}",
                            context={"stage": st.label},
                        )


def looks_secret(name: str) -> bool:
    parts = name.upper().split("_")
    if parts[-1] in _NOT_SECRET_SUFFIX:
        return False
    if any(p in _SECRET_WORDS for p in parts):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(parts))


_MOUNT_ADVICE = (
    "pass it as a BuildKit secret: RUN --mount=type=secret,id={id},env={name} ... and "
    "docker build --secret id={id},env={name}; never as ARG or ENV"
)


def _secret_fix(name: str) -> str:
    return _MOUNT_ADVICE.format(id=name.lower(), name=name)


def _secret_mount_env(ins: Instruction) -> set[str]:
    out = set()
    for m in ins.flag_values("mount"):
        opts = dict(p.partition("=")[::2] for p in m.split(","))
        if opts.get("type") == "secret" and opts.get("env"):
            out.add(opts["env"])
    return out


def _stage_secret_args(ctx: Context, st: Stage) -> Iterator[Hit]:
    for pos, ins in enumerate(st.instructions):
        if ins.cmd == "ENV":
            for name, raw in zip(ins.args[0::2], ins.args[1::2], strict=False):
                if looks_secret(name) and unquote(raw, ctx.df.escape):
                    yield Hit(
                        "secret-in-build",
                        ins.line,
                        f"ENV {name} puts a credential into the image config",
                        fix=_secret_fix(name),
                        context={"stage": st.label},
                    )
        if ins.cmd != "ARG":
            continue
        for name, default, _raw in arg_items(ins, ctx.df.escape):
            if not looks_secret(name):
                continue
            if default is not None and unquote(default, ctx.df.escape):
                yield Hit(
                    "secret-in-build",
                    ins.line,
                    f"ARG {name} has a default value in the Dockerfile",
                    fix=_secret_fix(name),
                    context={"stage": st.label},
                )
                continue
            for later in st.instructions[pos + 1 :]:
                if (
                    later.cmd == "RUN"
                    and references(later.text(), name)
                    and name not in _secret_mount_env(later)
                ):
                    yield Hit(
                        "secret-in-build",
                        ins.line,
                        f"ARG {name} is used by RUN at line {later.line}: build "
                        "arguments stay in the image history",
                        fix=_secret_fix(name),
                        context={"stage": st.label},
                    )
                    break


@rule(
    "secret-in-build",
    Severity.ERROR,
    "credential passed as ARG or ENV",
    "ARG values are recorded in the image history and provenance, ENV values in the image "
    "config: anyone who can pull the image can read the token.",
    "use RUN --mount=type=secret,id=hf_token,env=HF_TOKEN ... with docker build --secret "
    "id=hf_token,env=HF_TOKEN",
)
def check_secret_in_build(ctx: Context) -> Iterator[Hit]:
    for ins in ctx.df.global_args:
        for name, default, _raw in arg_items(ins, ctx.df.escape):
            if looks_secret(name) and default is not None and unquote(default, ctx.df.escape):
                yield Hit(
                    "secret-in-build",
                    ins.line,
                    f"ARG {name} has a default value in the Dockerfile",
                    fix=_secret_fix(name),
                )
    for st in ctx.df.stages:
        yield from _stage_secret_args(ctx, st)


# -- build context -------------------------------------------------------------------------


def _copies_whole_context(ctx: Context) -> Instruction | None:
    for st in ctx.df.stages:
        for ins in st.instructions:
            if ins.cmd not in {"COPY", "ADD"} or ins.flag("from") is not None:
                continue
            srcs = [a for a in ins.args[:-1] if not a.startswith("<<")]
            if any(s in _WHOLE_CONTEXT for s in _values(ctx, st, srcs)):
                return ins
    return None


def _weight_files(root: Path, pats: list[ignore.Pattern]) -> list[str]:
    found: list[str] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [
            d for d in dirnames if d not in _SKIP_DIRS and not ignore.excluded(rel_dir + d, pats)
        ]
        for f in filenames:
            seen += 1
            rel = rel_dir + f
            if downloads.is_weight_path(rel) and not ignore.excluded(rel, pats):
                found.append(rel)
        if seen > _MAX_WALK:
            break
    return found


_PROBES = ("model.safetensors", "models/model.safetensors")


@rule(
    "context-leak",
    Severity.WARNING,
    "COPY . with a build context that does not exclude weights or .git",
    "COPY . sends the whole context to the builder and into the layer: a checkout's .git "
    "and any model files beside the code inflate every build and image, and leak history.",
    "add a .dockerignore with at least .git, **/*.safetensors, **/*.gguf, **/*.pt, **/*.bin, "
    "**/models (or allowlist: * then !src), or COPY only what the image needs",
)
def check_context_leak(ctx: Context) -> Iterator[Hit]:
    ins = _copies_whole_context(ctx)
    if ins is None:
        return
    path = ignore.find(ctx.df.path, ctx.context_dir)
    if path is None:
        yield Hit(
            "context-leak",
            ins.line,
            f"{ins.cmd} copies the whole build context ({ctx.context_dir}), which has "
            "no .dockerignore",
        )
        return
    try:
        pats = ignore.parse(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return
    leaks: list[str] = []
    if (ctx.context_dir / ".git").exists() and not ignore.excluded(".git", pats):
        leaks.append(".git")
    if any(not ignore.excluded(p, pats) for p in _PROBES):
        leaks.append("weight files (*.safetensors, models/)")
    leaks += _weight_files(ctx.context_dir, pats)[:5]
    if leaks:
        yield Hit(
            "context-leak",
            ins.line,
            f"{ins.cmd} copies the whole build context and {path.name} does not "
            f"exclude: {_short(leaks)}",
            context={"dockerignore": str(path)},
        )


def run_checks(ctx: Context, enabled: Callable[[str], bool] = lambda _r: True) -> list[Hit]:
    hits: list[Hit] = []
    for rid, fn in CHECKS:
        if enabled(rid):
            hits.extend(fn(ctx))
    return hits
