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


def start_texts(state: StageState) -> list[tuple[Instruction, str]]:
    """(instruction, shell text) of the start command, as BuildKit combines them."""
    ep, cmd = state.entrypoint, state.cmd

    def text(ins: Instruction) -> str:
        return shlex.join(ins.args) if ins.json else " ".join(ins.args)

    if ep is None:
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


def scripts(ctx: Context, text: str, state: StageState, workdir: str | None = None,
            stage: Stage | None = None) -> Iterator[tuple[FileSource, str]]:
    """Files the commands of *text* run (or read) whose content is known, two levels deep.
    *workdir* is the WORKDIR the commands run in (default: the state's last); with *stage*
    (the stage *state* belongs to), files that ``COPY --from`` brought are found too."""
    if workdir is not None and workdir != state.workdir:
        state = state.copy(workdir=workdir)
    seen: set[str] = set()
    todo = [(text, 0)]
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
            for src, content in _run_by(ctx, cmd, cur, stage, seen):
                yield src, content
                if depth < 2:
                    todo.append((content, depth + 1))


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
        if src is None or src.image_path in seen or not _in_context(ctx, src):
            continue
        seen.add(src.image_path)
        content = Analysis.read(src)
        if content is not None:
            yield src, content


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
    content = follow.source_text(src, ctx.analysis.context)
    recipe = follow.make_recipe(content, call[1]) if content else ""
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
    text = " ".join(t for _i, t in start_texts(state))
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
