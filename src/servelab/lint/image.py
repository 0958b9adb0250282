"""What each stage of a Dockerfile leaves behind: ENV, ARG values, WORKDIR, USER, start
command, HEALTHCHECK, and which image paths hold files copied from the build context.

Stages built ``FROM`` an earlier stage inherit its state; ``COPY --from`` makes the stage it
copies from part of the image (see :meth:`Analysis.reachable`).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from servelab.errors import InputError
from servelab.findings import Record
from servelab.lint.coverage import CoverageNote, Notes, bound
from servelab.lint.frontend import Heredoc
from servelab.lint.parse import Dockerfile, Instruction, Stage, arg_items
from servelab.lint.words import expand_heredoc, process_word
from servelab.textio import head_of, read_bytes

_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_GLOB = re.compile(r"[*?\[]")
#: bytes of one file lint follows (a script, a Makefile, a Python module): past them, the
#: first MAX_SCRIPT_BYTES are read and a coverage note says the rest was not
MAX_SCRIPT_BYTES = 256 * 1024


def is_url(src: str) -> bool:
    return bool(_URL.match(src)) or src.startswith("git@")


class FileSource(NamedTuple):
    """A file in the image whose content we know: from the context or a heredoc."""

    image_path: str
    instr: Instruction
    context_path: Path | None = None
    inline: str | None = None


class StageState(Record):
    """What a stage has set by a given instruction: ENV, ARG values, WORKDIR, USER, start
    command, HEALTHCHECK, and the image paths whose content is known."""

    __slots__ = (
        "args",
        "cmd",
        "cmd_set",
        "dirs",
        "entrypoint",
        "env",
        "files",
        "healthcheck",
        "unread_binds",
        "user",
        "workdir",
        "workdirs",
    )

    def __init__(self, env: dict[str, str] | None = None,  # noqa: PLR0917
                 args: dict[str, str | None] | None = None, workdir: str = "/",
                 user: tuple[str | None, Instruction] | None = None,
                 entrypoint: Instruction | None = None, cmd: Instruction | None = None,
                 healthcheck: Instruction | None = None, cmd_set: bool = False,
                 files: dict[str, FileSource] | None = None,
                 dirs: list[tuple[str, Path, Instruction]] | None = None,
                 workdirs: dict[int, str] | None = None) -> None:
        self.env: dict[str, str] = {} if env is None else env
        self.args: dict[str, str | None] = {} if args is None else args
        self.workdir = workdir
        #: (resolved user or None when it cannot be resolved, the USER instruction)
        self.user = user
        self.entrypoint = entrypoint
        self.cmd = cmd
        self.healthcheck = healthcheck
        #: whether this stage itself set CMD (an ENTRYPOINT then keeps it)
        self.cmd_set = cmd_set
        self.files: dict[str, FileSource] = {} if files is None else files
        #: (image directory, context directory, COPY instruction), latest last
        self.dirs: list[tuple[str, Path, Instruction]] = [] if dirs is None else dirs
        #: workdir in effect at each instruction line
        self.workdirs: dict[int, str] = {} if workdirs is None else workdirs
        #: a RUN's bind mounts from another stage or an image whose files are not known:
        #: image path -> (what is mounted there, the RUN), for a coverage note
        self.unread_binds: dict[str, tuple[str, Instruction]] = {}

    def lookup(self, name: str) -> str | None:
        if name in self.env:
            return self.env[name]
        return self.args.get(name)

    def inherit(self) -> StageState:
        """The state a child stage starts from (ARG values are per stage)."""
        return self.copy(
            env=dict(self.env),
            args={},
            cmd_set=False,
            files=dict(self.files),
            dirs=list(self.dirs),
            workdirs={},
        )


def image_path(dest: str, workdir: str) -> str:
    keep_slash = dest.endswith("/")
    p = dest if dest.startswith("/") else posixpath.join(workdir, dest)
    p = posixpath.normpath(p)
    return p + "/" if keep_slash and p != "/" else p


@lru_cache(maxsize=256)
def _relative(path: Path, context: Path) -> str:
    """*path* relative to the build context, ``/``-separated (for notes)."""
    return os.path.relpath(path, context).replace(os.sep, "/")


#: follow.source's signature: (analysis, image path, stage) -> where the file comes from
SourceFinder = Callable[["Analysis", str, Stage], "FileSource | None"]


class Analysis:
    """Per-Dockerfile facts the rules share, computed once."""

    def __init__(
        self, df: Dockerfile, context: Path, build_args: Mapping[str, str] | None = None,
        *, source_finder: SourceFinder | None = None,
    ) -> None:
        self.df = df
        #: where an image file of a stage comes from, through ``COPY --from`` too
        #: (follow.source, handed in: follow builds on this module)
        self.source_finder = source_finder
        self.context = context
        self.build_args = dict(build_args or {})
        self._states: dict[int, StageState] = {}
        #: COPY source patterns whose search stopped at its limit (walk.glob)
        self.stopped_globs: set[str] = set()
        #: what following the start command did not fully read (bounds, files not parsed)
        self.coverage = Notes()
        #: each stage's ``COPY --from`` list (follow.source), computed once: every word of
        #: every RUN may ask, and recomputing it made lint quadratic in the instructions
        self.from_copies: dict[int, dict[str, list[tuple[int, str, Stage, Instruction]]]] = {}
        #: follow.reaches_final of each stage, computed once (each finding asks for its stage)
        self.reaches: dict[int, list[Instruction]] = {}

    # -- stage graph -----------------------------------------------------------------
    def chain(self, stage: Stage | None = None) -> list[Stage]:
        """*stage* (default: the final one) and the stages it is built FROM, root first."""
        s: Stage | None = stage or self.df.final
        out: list[Stage] = []
        while s is not None:
            out.append(s)
            s = self.df.stages[s.parent] if s.parent is not None else None
        return out[::-1]

    def copied_from(self, stage: Stage) -> list[Stage]:
        out: list[Stage] = []
        for ins in stage.instructions:
            refs = []
            if ins.cmd in {"COPY", "ADD"} and ins.flag("from"):
                refs.append(ins.flag("from") or "")
            if ins.cmd == "RUN":
                refs += [m["from"] for m in ins.mounts() if "from" in m]
            for ref in refs:
                st = self.df.stage_by_ref(ref)
                if st is not None and st.index < stage.index:
                    out.append(st)
        return out

    def reachable(self) -> list[Stage]:
        """Stages whose results reach the final image: its FROM chain and what it copies."""
        seen: set[int] = set()
        todo = [s.index for s in self.chain()]
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            st = self.df.stages[i]
            todo += [p.index for p in self.chain(st)]
            todo += [c.index for c in self.copied_from(st)]
        return [s for s in self.df.stages if s.index in seen]

    # -- state -----------------------------------------------------------------------
    def state(self, stage: Stage | None = None) -> StageState:
        """The state at the end of *stage* (default: the final stage)."""
        st = stage or self.df.final
        if st.index not in self._states:
            base = (
                self.state(self.df.stages[st.parent]).inherit()
                if st.parent is not None
                else StageState()
            )
            for ins in st.instructions:
                base.workdirs[ins.line] = base.workdir
                self._apply(base, ins)
            self._states[st.index] = base
        return self._states[st.index]

    def _value(self, state: StageState, raw: str) -> str | None:
        """*raw* as BuildKit's ProcessWord gives it (None: a name without a value, or a
        word BuildKit refuses)."""
        exp = process_word(raw, state.lookup, self.df.escape)
        return None if exp.unresolved or exp.error else exp.value

    def _apply(self, state: StageState, ins: Instruction) -> None:
        handler = {
            "ARG": self._arg,
            "ENV": self._env,
            "WORKDIR": self._workdir,
            "USER": self._user,
            "COPY": self._copy,
            "ADD": self._copy,
        }.get(ins.cmd)
        if handler:
            handler(state, ins)
        elif ins.cmd == "ENTRYPOINT":
            state.entrypoint = ins
            if not state.cmd_set:  # BuildKit drops a CMD inherited from the parent
                state.cmd = None
        elif ins.cmd == "CMD":
            state.cmd = ins
            state.cmd_set = True
        elif ins.cmd == "HEALTHCHECK":
            none = bool(ins.args) and ins.args[0].upper() == "NONE"
            state.healthcheck = None if none else ins

    def _arg(self, state: StageState, ins: Instruction) -> None:
        for name, default, _raw in arg_items(ins, self.df.escape):
            if name in self.build_args:
                state.args[name] = self.build_args[name]
            elif default is not None:
                state.args[name] = self._value(state, default)
            else:
                state.args[name] = self.df.global_scope.get(name)

    def _env(self, state: StageState, ins: Instruction) -> None:
        for name, raw in zip(ins.args[0::2], ins.args[1::2], strict=False):
            state.env[name] = self._value(state, raw) or ""

    def _workdir(self, state: StageState, ins: Instruction) -> None:
        value = self._value(state, ins.args[0]) if ins.args else None
        if value:
            state.workdir = image_path(value, state.workdir).rstrip("/") or "/"

    def _user(self, state: StageState, ins: Instruction) -> None:
        value = self._value(state, ins.args[0]) if ins.args else None
        state.user = (value, ins)

    def _copy(self, state: StageState, ins: Instruction) -> None:
        if ins.flag("from") is not None or len(ins.args) < 2:
            return
        dest_raw = self._value(state, ins.args[-1])
        if dest_raw is None:
            return
        dest = image_path(dest_raw, state.workdir)
        sources = list(ins.args[:-1])
        # "COPY f ." copies into the WORKDIR; a trailing slash or several sources mean a dir
        as_dir = (
            dest.endswith("/")
            or dest_raw in {".", ".."}
            or dest_raw.endswith(("/.", "/.."))
            or len(sources) > 1
        )
        docs = {h.name: h for h in ins.heredocs}
        for src in sources:
            if src.startswith("<<"):
                name = src.lstrip("<-").strip("'\"")
                target = posixpath.join(dest, name) if as_dir else dest.rstrip("/")
                state.files[target] = FileSource(target, ins, inline=self._body(state,
                                                                                 docs.get(name)))
                continue
            value = self._value(state, src)
            if value is None or is_url(value):
                continue
            excluded = ins.excluder()
            for ctx in self.context_matches(value):
                if excluded is not None and ctx.is_file() and excluded(ctx.name):
                    continue  # COPY --exclude leaves the file out
                if ins.flag_true("parents"):
                    self._map(state, ins, ctx, self._parents_dest(value, ctx, dest), False)
                else:
                    self._map(state, ins, ctx, dest, as_dir or bool(_GLOB.search(value)))

    @staticmethod
    def _body(state: StageState, doc: Heredoc | None) -> str:
        """A heredoc file's content as BuildKit writes it: ARG and ENV values substituted
        unless its terminator is quoted (``<<'EOF'``), an unset name empty."""
        if doc is None:
            return ""
        if not doc.expand:
            return doc.content
        exp = expand_heredoc(doc.content, state.lookup)
        return doc.content if exp.error else exp.value

    def _parents_dest(self, src: str, ctx: Path, dest: str) -> str:
        """Where ``COPY --parents`` puts the context path *ctx* that *src* matched: below
        *dest* at its path in the context, or at its path after a ``/./`` in *src*
        (``COPY --parents ./x/./y/*.txt /p/`` puts x/y/a.txt at /p/y/a.txt)."""
        root = os.path.realpath(self.context)
        rel = os.path.relpath(ctx, root).replace(os.sep, "/")
        cut = src.lstrip("/").split("/./", 1)
        if len(cut) == 2:
            keep = len([p for p in posixpath.normpath(cut[0]).split("/") if p not in {"", "."}])
            rel = "/".join(rel.split("/")[keep:]) or "."
        return posixpath.normpath(posixpath.join(dest, rel))

    def context_matches(self, src: str) -> list[Path]:
        """The existing context paths a COPY source names, as BuildKit reads them: symbolic
        links re-rooted at the context root, globs bounded (:mod:`servelab.lint.walk`)."""
        from servelab.lint import walk

        rel = posixpath.normpath(src.lstrip("/")) if src not in {"", "/"} else "."
        if rel.startswith(".."):
            return []
        if _GLOB.search(rel):
            found = walk.glob(self.context, rel)
            if found.stopped:
                self.stopped_globs.add(src)
                self.coverage.add(bound(
                    f"the build context files COPY {src} matches",
                    "SERVELAB_MAX_CONTEXT_FILES, MAX_GLOB_MATCHES",
                    f"{walk.CONTEXT_ENTRIES.value()} entries looked at or "
                    f"{walk.MAX_GLOB_MATCHES}", "matches of one pattern",
                    walk.CONTEXT_ENTRIES.raise_hint()))
            return found.matches
        path = walk.reroot(self.context, rel, self.coverage)
        return [] if path is None else [path]

    @staticmethod
    def _map(state: StageState, ins: Instruction, ctx: Path, dest: str, as_dir: bool) -> None:
        if ctx.is_dir():
            state.dirs.append((dest.rstrip("/") or "/", ctx, ins))
            return
        target = posixpath.join(dest, ctx.name) if as_dir else dest.rstrip("/")
        state.files[target] = FileSource(target, ins, context_path=ctx)

    def with_binds(self, state: StageState, ins: Instruction) -> StageState:
        """*state* plus what a RUN's ``--mount=type=bind`` mounts (``source=`` to
        ``target=``): from the build context, or from an earlier stage's files whose
        origin is known (``from=<stage>``: a file it copied from the context or wrote from a
        heredoc), so that a script run from the mount can be read. A bind from an image, or
        of a stage's file made by its RUNs, is kept in ``unread_binds``."""
        binds = []
        for opts in ins.mounts():  # source= and target= take ARG/ENV values, as in BuildKit
            dst = self._value(state, opts.get("target", ""))
            src = self._value(state, opts.get("source") or ".")
            if opts["type"] == "bind" and dst and src is not None:
                binds.append((src, image_path(dst, state.workdir), opts.get("from")))
        if not binds:
            return state
        out = state.copy(files=dict(state.files), dirs=list(state.dirs),
                         unread_binds=dict(state.unread_binds))
        for src, dst, ref in binds:
            if ref is None:
                for ctx in self.context_matches(src):
                    self._map(out, ins, ctx, dst, False)
            elif not self._bind_from(out, ins, src, dst.rstrip("/") or "/", ref):
                stage = self.df.stage_by_ref(ref)
                what = f"stage {stage.label}" if stage is not None else f"image {ref}"
                out.unread_binds[dst.rstrip("/") or "/"] = (
                    f"{what}'s {posixpath.normpath('/' + src.lstrip('/'))}", ins)
        return out

    def _bind_from(self, out: StageState, ins: Instruction, src: str, dst: str,
                   ref: str) -> bool:
        """Map the bind of *src* from the stage *ref* at *dst*, when that stage's file (or
        folder) comes from the build context or a heredoc."""
        stage = self.df.stage_by_ref(ref)
        if stage is None:
            return False
        path = posixpath.normpath("/" + src.lstrip("/"))
        found = (self.source_finder(self, path, stage) if self.source_finder is not None
                 else self.source_of(path, self.state(stage)))
        if found is not None:
            out.files[dst] = found._replace(image_path=dst)
            return True
        for img_dir, ctx_dir, _copy in reversed(self.state(stage).dirs):
            if path == img_dir or path.startswith(img_dir.rstrip("/") + "/"):
                sub = ctx_dir / path[len(img_dir):].lstrip("/")
                if sub.is_dir():
                    out.dirs.append((dst, sub, ins))
                    return True
        return False

    # -- files -----------------------------------------------------------------------
    def source_of(self, path: str, state: StageState) -> FileSource | None:
        """Where the image file at *path* came from, if from the context or a heredoc."""
        p = posixpath.normpath(path)
        if p in state.files:
            return state.files[p]
        for img_dir, ctx_dir, ins in reversed(state.dirs):
            prefix = img_dir.rstrip("/") + "/"
            if p.startswith(prefix):
                from servelab.lint import walk

                sub = p[len(prefix):]
                excluded = ins.excluder()
                if excluded is not None and excluded(sub):
                    continue  # COPY --exclude left it out of the folder
                shown = posixpath.join(_relative(ctx_dir, self.context), sub)
                cand = walk.reroot(ctx_dir, sub, self.coverage, shown)
                if cand is not None and cand.is_file() and self._inside(cand):
                    return FileSource(p, ins, context_path=cand)
        return None

    def _inside(self, path: Path) -> bool:
        """Whether *path* really lies in the build context (symbolic links resolved)."""
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(self.context))

    @staticmethod
    def read(src: FileSource, notes: Notes | None = None) -> str | None:
        """The text of *src*, or None when it cannot be read as text. With *notes*, a file
        past :data:`MAX_SCRIPT_BYTES` (its start is read) or holding NUL bytes (read with
        them blanked) leaves a coverage note; without, such a file is not read."""
        if src.inline is not None:
            return src.inline
        if src.context_path is None:
            return None
        try:  # the safe reader: a regular file only (no pipe, no device), capped
            raw = read_bytes(src.context_path, max_bytes=MAX_SCRIPT_BYTES, what="start script")
        except InputError:
            head = head_of(src.context_path, MAX_SCRIPT_BYTES) if notes is not None else None
            if notes is None or head is None or head[0] <= MAX_SCRIPT_BYTES:
                return None
            raw = head[1]
            notes.add(bound(f"{src.image_path} past its first {MAX_SCRIPT_BYTES} bytes "
                            f"({head[0]} bytes)", "MAX_SCRIPT_BYTES", MAX_SCRIPT_BYTES,
                            "bytes a file"))
        if b"\x00" in raw:
            if notes is None:
                return None
            notes.add(CoverageNote(src.image_path, "it holds NUL bytes (a binary file, or one "
                                   "made to look like one): read with them blanked"))
            raw = raw.replace(b"\x00", b" ")
        return raw.decode("utf-8", errors="replace")

    def resolve_in_image(self, word: str, state: StageState) -> str | None:
        """An image path for a command word that names a file (``/start.sh``, ``./run``)."""
        if word.startswith("/"):
            return posixpath.normpath(word)
        if "/" in word or re.search(r"\.(sh|bash|py)$", word):
            return posixpath.normpath(posixpath.join(state.workdir, word))
        return None
