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

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
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

    def excluder(self) -> Callable[[str], bool] | None:
        """What a COPY/ADD ``--exclude=<pattern>`` leaves out (each pattern matched as a
        .dockerignore line is, against a path relative to the source it is copied from),
        or None without ``--exclude``. BuildKit does not substitute ARGs in the patterns."""
        pats = self.flag_values("exclude") if self.cmd in {"COPY", "ADD"} else []
        return _excluder(tuple(pats)) if pats else None

    def flag_true(self, name: str) -> bool:
        """Whether a boolean flag is on: ``--name`` or ``--name=true`` (any case)."""
        value = self.flag(name)
        return value is not None and value.lower() in {"", "true"}

    def mounts(self) -> list[dict[str, str]]:
        """The options of each ``--mount=k=v,...`` as BuildKit's parseMount reads them:
        CSV fields (quotes allowed), keys in any case, each key under its one name
        (``src`` is ``source``; ``dst`` and ``destination`` are ``target``; ``ro``,
        ``readonly``, ``rw`` and ``readwrite`` set ``readonly`` to ``true``/``false``),
        ``type`` lower-cased and ``bind`` when left out."""
        return [mount_options(m) for m in self.flag_values("mount")]

    def text(self) -> str:
        """Shell text of a RUN/CMD/ENTRYPOINT: the command plus heredoc bodies (each ended by
        its terminator line)."""
        import shlex

        body = shlex.join(self.args) if self.json else " ".join(self.args)
        for h in self.heredocs:  # with its terminator line, as the shell reads it
            body += "\n" + h.content + ("" if h.content.endswith("\n") else "\n") + h.name
        return body


@lru_cache(maxsize=64)
def _excluder(pats: tuple[str, ...]) -> Callable[[str], bool]:
    """The matcher of ``--exclude`` patterns (parsed once: every word a rule resolves asks)."""
    from servelab.lint import ignore

    parsed = ignore.parse("\n".join(p for p in pats if p.strip()))
    return lambda rel: ignore.excluded(rel, parsed)


#: parseMount's other names for an option key
_MOUNT_KEYS = {"src": "source", "dst": "target", "destination": "target", "ro": "readonly",
               "readwrite": "rw"}


def _csv_fields(text: str) -> list[str]:
    """The fields of one CSV record (Go's encoding/csv: a field that starts with ``"`` is
    quoted, ``""`` inside it is one ``"``)."""
    fields: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            buf: list[str] = []
            i += 1
            while i < n:
                if text[i] == '"':
                    if text[i + 1:i + 2] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            end = text.find(",", i)
            fields.append("".join(buf) + (text[i:] if end < 0 else text[i:end]))
        else:
            end = text.find(",", i)
            fields.append(text[i:] if end < 0 else text[i:end])
        if end < 0:
            return fields
        i = end + 1


def mount_options(text: str) -> dict[str, str]:
    """One ``--mount`` value's options, named as :meth:`Instruction.mounts` says."""
    opts: dict[str, str] = {}
    for field in _csv_fields(text):
        key, eq, value = field.partition("=")
        key = _MOUNT_KEYS.get(key.lower(), key.lower())
        if not eq and key in {"readonly", "rw"}:
            value = "true"
        if key == "rw":
            key, value = "readonly", "false" if value.lower() in _TRUE else "true"
        opts[key] = value.lower() if key == "type" else value
    opts.setdefault("type", "bind")
    return opts


_TRUE = frozenset({"1", "t", "true"})


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
        """The stage a ``--from``/``FROM`` reference names (alias or index); of stages
        given one name twice, the last, as BuildKit's findStateByName."""
        low = ref.lower()
        for s in reversed(self.stages):
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
        _check_flags(ins, display)
        _check_stage_name(ins, display)
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


_BOOL, _STRING, _STRINGS = "bool", "string", "strings"
#: the flags each instruction's parser takes (instructions/parse.go, the RUN hooks), and
#: their kind; ARG, STOPSIGNAL and HEALTHCHECK NONE never read theirs
FLAGS: dict[str, dict[str, str]] = {
    "ADD": {"chown": _STRING, "chmod": _STRING, "link": _BOOL, "keep-git-dir": _BOOL,
            "checksum": _STRING, "unpack": _BOOL, "exclude": _STRINGS},
    "COPY": {"chown": _STRING, "from": _STRING, "chmod": _STRING, "link": _BOOL,
             "exclude": _STRINGS, "parents": _BOOL},
    "FROM": {"platform": _STRING},
    "RUN": {"mount": _STRINGS, "network": _STRING, "security": _STRING, "device": _STRINGS},
    "HEALTHCHECK": {"interval": _STRING, "timeout": _STRING, "start-period": _STRING,
                    "start-interval": _STRING, "retries": _STRING},
}
_FLAGLESS = frozenset({"ENV", "MAINTAINER", "LABEL", "ONBUILD", "WORKDIR", "CMD",
                       "ENTRYPOINT", "EXPOSE", "USER", "VOLUME", "SHELL"})


def _flag_problem(ins: Instruction) -> str | None:
    """BuildKit's BFlags.Parse error for the flags of *ins*, or None."""
    if ins.cmd == "HEALTHCHECK" and ins.args and ins.args[0].upper() == "NONE":
        return None
    known = FLAGS.get(ins.cmd)
    if known is None and ins.cmd not in _FLAGLESS:
        return None
    known = known or {}
    used: set[str] = set()
    for word in ins.flags:
        if word == "--":
            return None
        if not word.startswith("--"):
            return f"arg should start with -- : {word}"
        name, eq, value = word.partition("=")
        kind = known.get(name[2:])
        if kind is None:
            return f"unknown flag: {name}"
        if name in used and kind != _STRINGS:
            return f"duplicate flag specified: {name}"
        used.add(name)
        if kind == _BOOL and eq and not value:
            return f"missing a value on flag: {name}"
        if kind == _BOOL and value.lower() not in {"", "true", "false"}:
            return f"expecting boolean value for flag {name}, not: {value}"
        if kind != _BOOL and not eq:
            return f"missing a value on flag: {name}"
    return None


def _check_flags(ins: Instruction, display: str) -> None:
    problem = _flag_problem(ins)
    if problem is None:
        return
    takes = ", ".join(f"--{f}" for f in FLAGS.get(ins.cmd, {})) or "no flags"
    hint = f"{ins.cmd} takes {takes}; `docker build` fails on this line"
    if ins.cmd == "COPY" and problem == "unknown flag: --checksum":
        hint = ("only ADD takes --checksum (ADD --checksum=sha256:<hex> <url> <dest>, or a "
                "commit for a git source); a COPY from the context needs none, so drop it")
    raise InputError(f"BuildKit refuses {ins.cmd}: {problem}", file=display, line=ins.line,
                     hint=hint)


#: parseBuildStageName's pattern, matched against the lower-cased name
_STAGE_NAME = re.compile(r"[a-z][a-z0-9_.-]*\Z")


def _check_stage_name(ins: Instruction, display: str) -> None:
    if ins.cmd != "FROM" or len(ins.args) != 3:
        return
    name = ins.args[2]
    if not _STAGE_NAME.match(name.lower()):
        raise InputError(
            f"invalid name for build stage: {name!r}, name can't start with a number or "
            "contain symbols", file=display, line=ins.line,
            hint="name the stage with a letter, then letters, digits, '-', '_' or '.' "
            "(FROM <image> AS builder); `docker build` fails on this line")


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
    _duplicate_stages(df, build_args or {})
    return df


def check_is_error(directives: list[frontend.Directive], build_args: Mapping[str, str],
                   check: str) -> bool:
    """Whether BuildKit fails the build on its build check *check*: ``# check=error=true``
    (or the BUILDKIT_DOCKERFILE_CHECK build argument) without ``skip=all`` or
    ``skip=<check>``."""
    text = build_args.get("BUILDKIT_DOCKERFILE_CHECK")
    if text is None:
        text = next((d.value for d in directives if d.name == "check"), "")
    error, skip = False, set[str]()
    for part in text.split(";", 2):
        key, _eq, value = part.partition("=")
        if key.strip() == "error":
            error = value.strip().lower() in {"1", "t", "true"}
        elif key.strip() == "skip":
            skip = {v.strip() for v in value.split(",")}
    return error and not skip & {"all", check}


def _duplicate_stages(df: Dockerfile, build_args: Mapping[str, str]) -> None:
    """A stage name given twice: BuildKit builds the file, warns (its DuplicateStageName
    check) and resolves the name to the last such stage (:meth:`Dockerfile.stage_by_ref`);
    with ``# check=error=true`` it fails the build."""
    first: dict[str, Stage] = {}
    for st in df.stages:
        if st.name is None:
            continue
        if st.name not in first:
            first[st.name] = st
            continue
        line, was = st.from_instr.line, first[st.name].from_instr.line
        if check_is_error(df.directives, build_args, "DuplicateStageName"):
            raise InputError(
                f'duplicate stage name "{st.name}" (first given at line {was}): BuildKit\'s '
                "DuplicateStageName check fails the build under # check=error=true",
                file=df.display, line=line, hint="give each stage its own name")
        df.notes.append((line, f'duplicate stage name "{st.name}" (first given at line '
                               f"{was}): BuildKit warns (DuplicateStageName) and resolves "
                               f"--from={st.name}, a RUN mount's from={st.name} and "
                               f"docker build --target {st.name} to the last stage of that "
                               "name, and so does "
                               "servelab; give each stage its own name"))


def load(
    path: Path, display: str | None = None, build_args: Mapping[str, str] | None = None
) -> Dockerfile:
    """Read and parse the Dockerfile at *path*."""
    name = display or str(path)
    return build(path, name, read_source(path, name), build_args)

