"""Read a Dockerfile and parse it as today's BuildKit frontend does (:mod:`.frontend`).

The parser returns instructions with their original line range, flags, JSON/shell form and
heredoc bodies, but drops comments and does not substitute ``ARG`` values: this module keeps
the source lines (for ``# servelab: ignore=`` comments), splits the instructions into build
stages, and resolves ``FROM`` references from ``ARG`` defaults, build arguments and the
frontend's automatic platform arguments, with every word operator of BuildKit's shell lexer
(:mod:`.words`).

Bad input (missing, not a regular file, over the size cap, binary, UTF-16/32, non-UTF-8,
empty, rejected by the parser, more than :data:`MAX_STAGES` stages, ``${...}`` nested more than
:data:`MAX_SUBSTITUTION_DEPTH` deep) is an :class:`~servelab.errors.InputError` naming the
file and, where known, the line.

The parser is plain Python and linear in the file, so Ctrl-C and SIGTERM stop it at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from servelab.errors import InputError
from servelab.findings import Record
from servelab.lint import frontend
from servelab.lint.frontend import Heredoc
from servelab.lint.words import PREDEFINED, Expansion, Lookup, process_word
from servelab.textio import TEXT_BYTES, Limit, ascii_int, decode, read_bytes

MAX_BYTES = TEXT_BYTES.default
#: Build stages of one Dockerfile (stages may build FROM each other, a chain is followed).
MAX_STAGES = Limit("SERVELAB_MAX_STAGES", 256, "build stages of one Dockerfile")
#: How deep ``${A:-${B:-...}}`` substitutions may nest.
MAX_SUBSTITUTION_DEPTH = Limit("SERVELAB_MAX_SUBSTITUTION_DEPTH", 32,
                               "nesting of ${...} substitutions")
#: Instructions BuildKit knows; anything else fails the build.
KNOWN = frozenset(
    [
        "ADD",
        "ARG",
        "CMD",
        "COPY",
        "ENTRYPOINT",
        "ENV",
        "EXPOSE",
        "FROM",
        "HEALTHCHECK",
        "LABEL",
        "MAINTAINER",
        "ONBUILD",
        "RUN",
        "SHELL",
        "STOPSIGNAL",
        "USER",
        "VOLUME",
        "WORKDIR",
    ]
)
#: fewest arguments BuildKit accepts (it refuses the build below that)
_MIN_ARGS = {
    "USER": 1,
    "WORKDIR": 1,
    "COPY": 2,
    "ADD": 2,
    "ARG": 1,
    "HEALTHCHECK": 1,
    "STOPSIGNAL": 1,
}


class Instruction(NamedTuple):
    """One instruction as the parser saw it; ``cmd`` upper-cased, lines 1-based."""

    cmd: str
    args: tuple[str, ...]
    flags: tuple[str, ...]
    json: bool
    original: str
    line: int
    end_line: int
    heredocs: tuple[Heredoc, ...] = ()
    sub_cmd: str | None = None

    def flag(self, name: str) -> str | None:
        """The value of ``--name=value`` (``""`` for a bare ``--name``), else None."""
        for f in self.flags:
            if f == f"--{name}":
                return ""
            if f.startswith(f"--{name}="):
                return f[len(name) + 3 :]
        return None

    def flag_values(self, name: str) -> list[str]:
        return [f[len(name) + 3 :] for f in self.flags if f.startswith(f"--{name}=")]

    def mounts(self) -> list[dict[str, str]]:
        """The options of each ``--mount=k=v,...``, with ``type`` filled in as BuildKit
        does when it is left out (``bind``)."""
        out = []
        for m in self.flag_values("mount"):
            opts = dict(p.partition("=")[::2] for p in m.split(","))
            opts.setdefault("type", "bind")
            out.append(opts)
        return out

    def text(self) -> str:
        """Shell text of a RUN/CMD/ENTRYPOINT: the command plus heredoc bodies (each ended by
        its terminator line)."""
        import shlex

        body = shlex.join(self.args) if self.json else " ".join(self.args)
        for h in self.heredocs:  # with its terminator line, as the shell reads it
            body += "\n" + h.content + ("" if h.content.endswith("\n") else "\n") + h.name
        return body


class Stage(Record):
    """One build stage: its FROM, base image and instructions."""

    __slots__ = (
        "base",
        "base_raw",
        "error",
        "from_instr",
        "index",
        "instructions",
        "name",
        "parent",
        "unresolved",
    )

    def __init__(self, index: int, name: str | None, from_instr: Instruction, base_raw: str,  # noqa: PLR0917
                 base: str | None, unresolved: list[str], parent: int | None,
                 instructions: list[Instruction] | None = None) -> None:
        self.index = index
        self.name = name
        self.from_instr = from_instr
        #: the reference as written and after substitution (None when an ARG has no value)
        self.base_raw = base_raw
        self.base = base
        self.unresolved = unresolved
        #: index of the earlier stage this one is built FROM, if any
        self.parent = parent
        #: BuildKit's error when it refuses the FROM word (``${V?}`` unset, bad pattern)
        self.error: str | None = None
        self.instructions: list[Instruction] = [] if instructions is None else instructions

    @property
    def label(self) -> str:
        return self.name or str(self.index)


class Dockerfile(Record):
    """A parsed Dockerfile: its lines, global ARGs, stages and every instruction."""

    __slots__ = (
        "directives",
        "display",
        "escape",
        "global_args",
        "global_scope",
        "instructions",
        "lines",
        "notes",
        "path",
        "stages",
    )

    def __init__(self, path: Path, display: str, lines: list[str], escape: str,  # noqa: PLR0917
                 global_args: list[Instruction], stages: list[Stage],
                 instructions: list[Instruction],
                 global_scope: dict[str, str | None]) -> None:
        self.path = path
        self.display = display
        self.lines = lines
        self.escape = escape
        self.global_args = global_args
        self.stages = stages
        self.instructions = instructions
        #: global ARG values after build arguments (None: declared without a value)
        self.global_scope = global_scope
        #: the parser directives (syntax, escape, check) and their lines
        self.directives: list[frontend.Directive] = []
        #: (line, what) of forms the current frontend reads and an older builder refuses
        self.notes: list[tuple[int, str]] = []

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage_by_ref(self, ref: str) -> Stage | None:
        """The stage a ``--from``/``FROM`` reference names (alias or index)."""
        low = ref.lower()
        for s in self.stages:
            if s.name == low:
                return s
        index = ascii_int(ref)
        if index is not None and index < len(self.stages):
            return self.stages[index]
        return None


def read_source(path: Path, display: str) -> str:
    """The text of a Dockerfile, or InputError for missing, binary or non-UTF-8 files."""
    raw = read_bytes(path, max_bytes=TEXT_BYTES, what="Dockerfile", display=display,
                     hint="check that this is a Dockerfile")
    return decode(raw, display, hint="save the Dockerfile as UTF-8", what="Dockerfile")


def escape_char(lines: list[str]) -> str:
    """The ``# escape=`` directive's character (default backslash), read as the frontend
    reads directives: any order, only before the first comment, blank line or instruction."""
    return frontend.directives(lines).escape


def check_nesting(lines: list[str], display: str) -> None:
    """InputError when ``${...}`` substitutions nest deeper than MAX_SUBSTITUTION_DEPTH."""
    cap = MAX_SUBSTITUTION_DEPTH.value()
    stack: list[bool] = []  # across lines: a substitution may go on after a line continuation
    depth = 0
    for n, line in enumerate(lines, start=1):
        if "{" not in line and "}" not in line:
            continue
        for i, c in enumerate(line):
            if c == "{":
                subst = i > 0 and line[i - 1] == "$"
                stack.append(subst)
                depth += subst
                if depth > cap:
                    raise InputError(
                        f"${{...}} substitutions nested more than {cap} deep", file=display,
                        line=n, hint="flatten the substitution; "
                        + MAX_SUBSTITUTION_DEPTH.raise_hint())
            elif c == "}" and stack:
                depth -= stack.pop()


def parse_text(text: str, display: str) -> list[Instruction]:
    """Parse *text* as BuildKit's frontend does; InputError (with the line) when it rejects
    it."""
    return parse_full(text, display).commands


class _Result(NamedTuple):
    commands: list[Instruction]
    escape: str
    directives: list[frontend.Directive]
    notes: list[tuple[int, str]]


def parse_full(text: str, display: str) -> _Result:
    """:func:`parse_text` with the parser directives, the escape character and the notes on
    forms an older builder refuses."""
    lines = text.splitlines()
    if not any(s.strip() and not s.strip().startswith("#") for s in lines):
        raise InputError(
            "empty Dockerfile: no instructions (only comments or whitespace)",
            file=display,
            hint="write at least a FROM instruction",
        )
    check_nesting(lines, display)
    try:
        parsed = frontend.parse(text)
    except frontend.FrontendError as e:
        raise InputError(
            f"the Dockerfile parser rejected it: {e}",
            file=display,
            line=e.line,
            hint="fix the Dockerfile syntax there; `docker build` would fail the same way",
        ) from None
    instrs = [_instruction(c) for c in parsed.commands]
    for ins in instrs:
        _check_arity(ins, display)
    return _Result(instrs, parsed.escape, parsed.directives, parsed.notes)


def _instruction(c: frontend.Command) -> Instruction:
    return Instruction(cmd=c.cmd, args=c.value, flags=c.flags, json=c.json,
                       original=c.original, line=c.start_line, end_line=c.end_line,
                       heredocs=c.heredocs, sub_cmd=c.sub_cmd)


def _check_arity(ins: Instruction, display: str) -> None:
    if ins.cmd not in KNOWN:
        raise InputError(
            f"unknown instruction {ins.cmd}",
            file=display,
            line=ins.line,
            hint="use a Dockerfile instruction (FROM, RUN, COPY, ...); "
            "`docker build` fails on this line",
        )
    need = _MIN_ARGS.get(ins.cmd, 0)
    bad_from = ins.cmd == "FROM" and not (
        len(ins.args) == 1 or (len(ins.args) == 3 and ins.args[1].lower() == "as")
    )
    if len(ins.args) < need or bad_from:
        form = "FROM <image> [AS <name>]" if ins.cmd == "FROM" else f"{ins.cmd} with arguments"
        raise InputError(
            f"{ins.cmd} has {len(ins.args)} argument(s)",
            file=display,
            line=ins.line,
            hint=f"write {form}; `docker build` fails on this line",
        )


def arg_items(ins: Instruction, escape: str) -> list[tuple[str, str | None, str]]:
    """``ARG`` items as (name, default or None, raw default text)."""
    out: list[tuple[str, str | None, str]] = []
    for item in ins.args:
        name, eq, default = item.partition("=")
        out.append((name, default if eq else None, default))
    return out


def global_scope(
    args: list[Instruction], build_args: Mapping[str, str], escape: str
) -> dict[str, str | None]:
    """Values of the ARGs declared before the first FROM, as BuildKit uses them: the
    frontend's automatic platform arguments first, then each ARG in order, a build argument
    winning over its default. An ARG declared again without a value keeps the value it has
    (None: declared, no value anywhere)."""
    scope: dict[str, str | None] = dict(PREDEFINED)
    for k in PREDEFINED:
        if k in build_args:
            scope[k] = build_args[k]
    for ins in args:
        for name, default, _raw in arg_items(ins, escape):
            if name in build_args:
                scope[name] = build_args[name]
            elif default is not None:
                scope[name] = process_word(default, scoped(scope), escape).value
            else:
                scope.setdefault(name, None)
    return scope


def scoped(scope: Mapping[str, str | None]) -> Lookup:
    """The lookup of *scope* where names BuildKit's frontend reserves (``BUILDKIT_*``: its
    own options, set or not) are never missing."""

    def get(name: str) -> str | None:
        value = scope.get(name)
        if value is None and name.startswith("BUILDKIT_"):
            return ""
        return value

    return get


def _stage(
    index: int,
    ins: Instruction,
    *,
    scope: Mapping[str, str | None],
    escape: str,
    display: str,
    earlier: list[Stage],
) -> Stage:
    if not ins.args:
        raise InputError(
            "FROM without an image",
            file=display,
            line=ins.line,
            hint="write FROM <image>[:tag][@digest] [AS name]",
        )
    raw = ins.args[0]
    name = ins.args[2].lower() if len(ins.args) >= 3 and ins.args[1].lower() == "as" else None
    exp: Expansion = process_word(raw, scoped(scope), escape)
    base = None if exp.unresolved or exp.error else exp.value
    parent = None
    if base is not None:
        for s in earlier:
            if s.name is not None and s.name == base.lower():
                parent = s.index
    stage = Stage(index, name, ins, raw, base, sorted(set(exp.unresolved)), parent)
    stage.error = exp.error
    return stage


def build(
    path: Path, display: str, text: str, build_args: Mapping[str, str] | None = None
) -> Dockerfile:
    """Parse *text* (the contents of *path*) into stages with resolved bases."""
    parsed = parse_full(text, display)
    instrs = parsed.commands
    lines = text.splitlines()
    escape = parsed.escape
    global_args: list[Instruction] = []
    stages: list[Stage] = []
    scope: dict[str, str | None] = {}
    for ins in instrs:
        if ins.cmd == "FROM":
            if not stages:
                scope = global_scope(global_args, build_args or {}, escape)
            stages.append(
                _stage(
                    len(stages), ins, scope=scope, escape=escape, display=display, earlier=stages
                )
            )
        elif stages:
            stages[-1].instructions.append(ins)
        elif ins.cmd == "ARG":
            global_args.append(ins)
        else:
            raise InputError(
                f"{ins.cmd} before the first FROM",
                file=display,
                line=ins.line,
                hint="only ARG may come before the first FROM",
            )
    if not stages:
        raise InputError(
            "no FROM instruction", file=display, hint="a Dockerfile needs at least one FROM"
        )
    if len(stages) > MAX_STAGES.value():
        raise InputError(
            f"{len(stages)} build stages, more than servelab checks ({MAX_STAGES.value()})",
            file=display, line=stages[MAX_STAGES.value()].from_instr.line,
            hint="split the Dockerfile; " + MAX_STAGES.raise_hint(),
        )
    df = Dockerfile(path, display, lines, escape, global_args, stages, instrs, scope)
    df.directives = parsed.directives
    df.notes = parsed.notes
    return df


def load(
    path: Path, display: str | None = None, build_args: Mapping[str, str] | None = None
) -> Dockerfile:
    """Read and parse the Dockerfile at *path*."""
    name = display or str(path)
    return build(path, name, read_source(path, name), build_args)

