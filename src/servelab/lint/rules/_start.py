"""What the final image runs when it starts, and whether that is a server.

:func:`start_texts` gives the start command (ENTRYPOINT + CMD as BuildKit combines them);
:func:`scripts` follows the files a command runs that the Dockerfile put into the image
(copied from the build context, bind-mounted by a RUN, or written by a heredoc);
:func:`role` decides from EXPOSE, the start command and those scripts whether the image is a
long-running server, a one-shot job (init container, downloader, test run), or a base or
library image with no start command of its own.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from servelab.lint import follow
from servelab.lint.coverage import CoverageNote, bound
from servelab.lint.image import Analysis, FileSource, StageState
from servelab.lint.lazyre import LazyPattern
from servelab.lint.parse import Instruction, Stage
from servelab.lint.shell import SimpleCommand, commands

from . import Context
from ._common import judged

_SERVER = LazyPattern(
    r"\b(serve|server|launcher|router|api_server|entrypoints|uvicorn|gunicorn|hypercorn|daphne|"
    r"waitress-serve|torchserve|trtllm-serve|nginx|httpd|caddy|envoy|streamlit|gradio)\b|"
    r"\w+(server|router|launcher)\b|--(port|host|listen)\b|0\.0\.0\.0"
)
_JOB = LazyPattern(
    r"initiali[sz]er|download|pytest|\bbench(mark)?|migrat|convert|quantiz|/tests?/|"
    r"\btrain(ing)?\b|finetune|\bcron\b|\b(model-)?load(er)?\b"
)
_BARE = LazyPattern(r"^(/\S*/)?(sh|bash|zsh|dash|ash|python[\d.]*|node|irb|ipython)$")


if TYPE_CHECKING:
    from servelab.lint.basecfg import BaseFacts


class Role:
    """What the final image is for (plain strings: no Enum class to build at import)."""

    SERVER = "server"
    JOB = "job"
    LIBRARY = "library"
    UNKNOWN = "unknown"


class RoleVerdict(NamedTuple):
    #: one of the :class:`Role` values
    role: str
    #: what showed it (``EXPOSE 8000``, ``text-generation-launcher``, ...)
    evidence: str


#: the ENTRYPOINT of well-known serving base images (repository, a word its tag must hold or
#: "") -> the launcher a CMD of flags only is given to: ``FROM vllm/vllm-openai`` + ``CMD
#: ["--model", "org/m"]`` runs the OpenAI server with ``--model org/m``
BASE_LAUNCHERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "vllm/vllm-openai": ("", ("python3", "-m", "vllm.entrypoints.openai.api_server")),
    "rocm/vllm": ("", ("python3", "-m", "vllm.entrypoints.openai.api_server")),
    "ghcr.io/huggingface/text-generation-inference": ("", ("text-generation-launcher",)),
    "ghcr.io/huggingface/text-embeddings-inference": ("", ("text-embeddings-router",)),
    "ghcr.io/predibase/lorax": ("", ("lorax-launcher",)),
    "nvcr.io/nvidia/tritonserver": ("", ("tritonserver",)),
    "ollama/ollama": ("", ("/bin/ollama",)),
    "ghcr.io/ggml-org/llama.cpp": ("server", ("/app/llama-server",)),
    "ghcr.io/ggerganov/llama.cpp": ("server", ("/app/llama-server",)),
}


#: the program a CMD of flags only is given to when the base image's ENTRYPOINT is not known
UNKNOWN_LAUNCHER = "the-base-image-ENTRYPOINT"


def base_launcher(base: str | None) -> tuple[str, ...]:
    """The ENTRYPOINT the image *base* (a FROM reference) is known to have, else ()."""
    if not base:
        return ()
    name = base.split("@", 1)[0]
    repo, colon, tag = name.rpartition(":")
    if not colon or "/" in tag:
        repo, tag = name, ""
    repo = repo.lower().removeprefix("docker.io/").removeprefix("index.docker.io/")
    known = BASE_LAUNCHERS.get(repo.removeprefix("library/"))
    if known is None or (known[0] and known[0] not in tag.lower()):
        return ()
    return known[1]


def _flags_only(args: list[str]) -> bool:
    return bool(args) and args[0].startswith("-")


def start_texts(state: StageState, base: str | None = None) -> list[tuple[Instruction, str]]:
    """(instruction, shell text) of the start command, as BuildKit combines them. A CMD of
    flags only, with no ENTRYPOINT in the Dockerfile, is the argument list of the base
    image's ENTRYPOINT: with *base* (the final image's FROM) a known server launcher
    (:data:`BASE_LAUNCHERS`), it is read as that server's command line."""
    ep, cmd = state.entrypoint, state.cmd

    def text(ins: Instruction) -> str:
        return shlex.join(ins.args) if ins.json else " ".join(ins.args)

    if ep is None:
        launcher = base_launcher(base) if cmd is not None and cmd.json else ()
        if cmd is not None and cmd.json and _flags_only(list(cmd.args)):
            return [(cmd, shlex.join([*(launcher or (UNKNOWN_LAUNCHER,)), *cmd.args]))]
        return [(cmd, text(cmd))] if cmd else []
    if not ep.json or cmd is None:
        return [(ep, text(ep))]
    tail = list(cmd.args) if cmd.json else ["/bin/sh", "-c", " ".join(cmd.args)]
    return [(ep, shlex.join([*ep.args, *tail]))]


#: commands that change or inspect a file without running it
_FILE_TOOLS = frozenset({"chmod", "chown", "chgrp", "cp", "mv", "rm", "ln", "mkdir", "touch",
                         "install", "dos2unix", "sed", "ls", "stat", "test", "[", "echo",
                         "printf", "head", "tail", "wc", "file", "sha256sum", "md5sum", "cmp",
                         "diff"})


#: levels of scripts followed below the command (a script that runs a script that runs a
#: script ...): past them, a coverage note names the script not followed
MAX_SCRIPT_DEPTH = 3


def scripts(ctx: Context, text: str, state: StageState, workdir: str | None = None,
            stage: Stage | None = None) -> Iterator[tuple[FileSource, str]]:
    """Files the commands of *text* run (or read) whose content is known, at most
    :data:`MAX_SCRIPT_DEPTH` levels deep (past them, a coverage note). *workdir* is the
    WORKDIR the commands run in (default: the state's last); with *stage* (the stage
    *state* belongs to), files that ``COPY --from`` brought are found too."""
    if workdir is not None and workdir != state.workdir:
        state = state.copy(workdir=workdir)
    seen: set[str] = set()
    todo = [(text, 1)]
    while todo:
        body, depth = todo.pop()
        # `for f in */install.py; do python "$f"; done`, `find -exec`: once per file found
        todo += [(b, depth) for b in follow.loop_bodies(body, state, ctx.analysis,
                                                        state.workdir) if b != body]
        cur = state
        for cmd in commands(body):
            if cmd.name == "cd" and len(cmd.argv) == 2 and "$" not in cmd.argv[1]:
                cur = cur.copy(workdir=posixpath.normpath(
                    posixpath.join(cur.workdir, cmd.argv[1])))
                continue
            if cmd.name in _FILE_TOOLS:  # `chmod +x start.sh` does not run start.sh
                continue
            if depth > MAX_SCRIPT_DEPTH:
                _depth_note(ctx, cmd, cur, stage)
                continue
            for src, content in _run_by(ctx, cmd, cur, stage, seen):
                yield src, content
                todo.append((content, depth + 1))


def _depth_note(ctx: Context, cmd: SimpleCommand, state: StageState,
                stage: Stage | None) -> None:
    """A coverage note when *cmd*, one level below :data:`MAX_SCRIPT_DEPTH`, runs a file
    whose content is known (it is not followed)."""
    for word in cmd.argv:
        path = ctx.analysis.resolve_in_image(word, state)
        src = ctx.analysis.source_of(path, state) if path else None
        if src is None and path and stage is not None:
            src = follow.source(ctx.analysis, path, stage)
        if src is not None:
            ctx.analysis.coverage.add(bound(
                f"{src.image_path}, run by a script {MAX_SCRIPT_DEPTH} levels below the "
                "command", "MAX_SCRIPT_DEPTH", MAX_SCRIPT_DEPTH, "levels of scripts"))
            return


def _run_by(ctx: Context, cmd: SimpleCommand, state: StageState, stage: Stage | None,
            seen: set[str]) -> Iterator[tuple[FileSource, str]]:
    """The files one command runs or reads (a Makefile's recipe for ``make``)."""
    made = _make(ctx, cmd, state, seen)
    if made is not None:
        yield made
        return
    for word in [*cmd.argv, *_modules(cmd.argv)]:
        path = ctx.analysis.resolve_in_image(word, state)
        src = ctx.analysis.source_of(path, state) if path else None
        if src is None and path and stage is not None:
            src = follow.source(ctx.analysis, path, stage)
        if src is None and path:
            _unread_bind(ctx, state, path)
        if src is None or src.image_path in seen or not _in_context(ctx, src):
            continue
        seen.add(src.image_path)
        content = Analysis.read(src, ctx.analysis.coverage)
        if content is not None:
            yield src, content


def _unread_bind(ctx: Context, state: StageState, path: str) -> None:
    """A coverage note when *path*, a file a command runs, lies in a RUN's bind mount from
    an image or from a stage file servelab does not know the content of."""
    for target, (what, ins) in state.unread_binds.items():
        if path == target or path.startswith(target.rstrip("/") + "/"):
            inner = path[len(target):].lstrip("/")
            shown = f"{what}/{inner}" if inner else what
            ctx.analysis.coverage.add(CoverageNote(
                path, f"the RUN at line {ins.line} bind-mounts it from {shown}, which "
                "servelab does not read (only files the Dockerfile copies from the build "
                "context or writes in a heredoc are known), so what it runs was not judged",
                line=ins.line))
            return


#: programs that run the script named by their first operand
_SCRIPT_RUNNERS = LazyPattern(r"^(sh|bash|dash|zsh|ash|ksh|source|\.|python[\d.]*|perl|ruby|node)$")


def _ran_words(cmd: SimpleCommand) -> list[str]:
    """The words of *cmd* that name the script it runs: the program itself
    (``./scripts/fetch.sh``), an interpreter's first operand (``python fetch.py``), or the
    module of ``python -m pkg.mod``."""
    if cmd.name in _FILE_TOOLS:
        return []
    words = [cmd.argv[0]]
    if _SCRIPT_RUNNERS.match(cmd.name):
        operands = [a for a in cmd.argv[1:] if not a.startswith("-")]
        words += operands[:1] + _modules(cmd.argv)
    return words


def missing_scripts(ctx: Context, text: str, state: StageState, workdir: str | None,
                    stage: Stage) -> list[tuple[str, Instruction]]:
    """(image path, the COPY/ADD that should bring it) of each script the commands of *text*
    run that a COPY takes from a build context path that does not exist: the context given
    is not the one docker build gets, so what the script does was not read."""
    if workdir is not None and workdir != state.workdir:
        state = state.copy(workdir=workdir)
    out: list[tuple[str, Instruction]] = []
    for cmd in commands(text):
        for word in _ran_words(cmd):
            path = ctx.analysis.resolve_in_image(word, state)
            if path is None or any(p == path for p, _c in out):
                continue
            src = ctx.analysis.source_of(path, state) or follow.source(ctx.analysis, path, stage)
            if src is not None and (src.context_path is None or src.context_path.is_file()):
                continue  # a heredoc, or a file the context holds
            copy = follow.missing_copy(ctx.analysis, stage, path)
            if copy is not None:
                out.append((path, copy))
    return out


def missing_note(ctx: Context, missing: list[tuple[str, Instruction]],
                 unread: str = "what it runs was not read") -> str:
    """What :func:`missing_scripts` found, as the end of a finding's message (*unread*: what
    was not read because of it)."""
    shown = ", ".join(f"{p} ({c.cmd} at line {c.line})" for p, c in missing[:3])
    return (f"{shown} comes from the build context {ctx.context_dir}, which lacks it, so "
            f"{unread} (pass --context with the directory docker build is "
            "given)")


def _in_context(ctx: Context, src: FileSource) -> bool:
    """Whether *src* is a heredoc or a file whose real path is inside the build context
    (a link out of the context is never followed)."""
    return src.context_path is None or follow.inside(src.context_path, ctx.analysis.context)


def _make(ctx: Context, cmd: SimpleCommand, state: StageState,
          seen: set[str]) -> tuple[FileSource, str] | None:
    """The Makefile a ``make TARGET`` command reads, with the recipe it runs as its text
    (at the recipe's lines in the Makefile)."""
    call = follow.make_call(cmd, state.workdir)
    if call is None:
        return None
    src = ctx.analysis.source_of(call[0], state)
    key = f"{call[0]} {' '.join(call[1])}"
    if src is None or key in seen:
        return None
    seen.add(key)
    content = follow.source_text(src, ctx.analysis.context, ctx.analysis.coverage)
    recipe = follow.make_recipe(content, call[1], ctx.analysis.coverage,
                                src.image_path) if content else ""
    return (src, recipe) if recipe else None


_APP_SPEC = LazyPattern(r"^([A-Za-z_][\w.]*):[A-Za-z_]\w*(\(\))?$")


def _modules(argv: list[str]) -> list[str]:
    """Source files a command names as Python modules: ``uvicorn app.main:app`` ->
    app/main.py, ``python -m server`` -> server.py and server/__main__.py."""
    out: list[str] = []
    for i, word in enumerate(argv):
        if m := _APP_SPEC.match(word):
            out.append(m.group(1).replace(".", "/") + ".py")
        elif word == "-m" and i + 1 < len(argv) and re.match(r"^[A-Za-z_][\w.]*$", argv[i + 1]):
            mod = argv[i + 1].replace(".", "/")
            out += [f"{mod}.py", f"{mod}/__main__.py"]
    return out


def script_name(src: FileSource) -> str:
    if src.context_path is not None:
        return os.path.relpath(src.context_path)
    return f"{src.image_path} (heredoc at line {src.instr.line})"


def final_base(ctx: Context) -> str | None:
    """The image the final stage is built on (its chain's first FROM)."""
    return ctx.analysis.chain()[0].base


def base_facts(ctx: Context) -> BaseFacts | None:
    """The config of the image the final stage is built on (only with --resolve-base)."""
    root = ctx.analysis.chain()[0]
    if ctx.resolve_base is None or not judged(root):
        return None
    return ctx.resolve_base(root.base or "")


def _words(text: str) -> str:
    return " ".join(w for w in text.split() if not w.startswith("-"))


def role(ctx: Context) -> RoleVerdict:
    """Whether the final image is a server, a one-shot job, or a base/library image."""
    chain = ctx.analysis.chain()
    exposed = [a for st in chain for i in st.instructions if i.cmd == "EXPOSE" for a in i.args]
    facts = base_facts(ctx)
    if exposed:
        return RoleVerdict(Role.SERVER, f"EXPOSE {' '.join(exposed)}")
    if facts is not None and facts.exposed:
        return RoleVerdict(Role.SERVER, f"its base exposes {', '.join(facts.exposed)}")
    state = ctx.analysis.state()
    text = " ".join(t for _i, t in start_texts(state, final_base(ctx)))
    if not text.strip() and facts is not None:
        text = shlex.join(facts.start)
    words = text.split()
    if not words or (len(words) == 1 and _BARE.match(words[0])):
        return RoleVerdict(Role.LIBRARY, "no start command of its own" if not words
                           else f"its start command is a bare {words[0]}")
    if m := _SERVER.search(text):
        return RoleVerdict(Role.SERVER, f"its start command runs {m.group(0)!r}")
    if m := _JOB.search(_words(text)):
        return RoleVerdict(Role.JOB, f"its start command looks like a one-shot job "
                                     f"({m.group(0)!r})")
    for src, content in scripts(ctx, text, state, stage=ctx.df.final):
        if m := _SERVER.search(content):
            return RoleVerdict(Role.SERVER, f"{src.image_path} runs {m.group(0)!r}")
    return RoleVerdict(Role.UNKNOWN, "nothing shows whether it is a server")
