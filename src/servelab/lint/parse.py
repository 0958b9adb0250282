"""Read a Dockerfile and parse it with BuildKit's own parser (PyPI ``dockerfile``).

The binding returns instructions with their original line range, flags, JSON/shell form and
heredoc bodies, but drops comments and does not substitute ``ARG`` values: this module keeps
the source lines (for ``# servelab: ignore=`` comments), splits the instructions into build
stages, and resolves ``FROM`` references from ``ARG`` defaults and build arguments.

Bad input (missing, not a regular file, over the size cap, binary, UTF-16/32, non-UTF-8,
empty, rejected by the parser, more than :data:`MAX_STAGES` stages, ``${...}`` nested more than
:data:`MAX_SUBSTITUTION_DEPTH` deep) is an :class:`~servelab.errors.InputError` naming the
file and, where known, the line.

The parser is a Go extension that never checks for signals: it runs in a worker thread that
the main thread waits for in short steps, so Ctrl-C and SIGTERM are handled at once and the
worker is abandoned. Finding the line of a parse error takes linear time (one parse of each
block of instructions, then of each instruction of the failing block).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from servelab.errors import InputError
from servelab.findings import Record
from servelab.lint.words import PREDEFINED, expand, unquote
from servelab.textio import TEXT_BYTES, Limit, ascii_int, decode, read_bytes

_T = TypeVar("_T")
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
_DIRECTIVE = re.compile(r"^#\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(\S*)\s*$")
_HEREDOC = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z_][\w.-]*)\2")
#: Instructions parsed together while looking for the one the parser rejects.
_LOCATE_BLOCK = 200


class Heredoc(NamedTuple):
    name: str
    content: str


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
        self.instructions: list[Instruction] = [] if instructions is None else instructions

    @property
    def label(self) -> str:
        return self.name or str(self.index)


class Dockerfile(Record):
    """A parsed Dockerfile: its lines, global ARGs, stages and every instruction."""

    __slots__ = (
        "display",
        "escape",
        "global_args",
        "global_scope",
        "instructions",
        "lines",
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
    """The ``# escape=`` directive's character (default backslash)."""
    for raw in lines:
        m = _DIRECTIVE.match(raw.strip())
        if not m:
            break
        if m.group(1).lower() == "escape" and m.group(2) in {"\\", "`"}:
            return m.group(2)
    return "\\"


def _is_ok_prefix(text: str) -> bool:
    import dockerfile

    try:
        dockerfile.parse_string(text)
    except dockerfile.GoParseError as e:
        return "no instructions" in str(e)
    return True


def instruction_spans(lines: list[str], escape: str) -> Iterator[tuple[int, int]]:
    """(first, last) 0-based line of each instruction, continuation lines and heredoc bodies
    included; comment and blank lines between instructions are skipped. Linear."""
    i, n = 0, len(lines)
    while i < n:
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        end = i
        while end < n - 1 and lines[end].rstrip().endswith(escape):
            end += 1
            while end < n - 1 and lines[end].strip().startswith("#"):
                end += 1
        last = _heredoc_end(lines, i, end)
        yield i, last
        i = last + 1


def _heredoc_end(lines: list[str], first: int, end: int) -> int:
    """The last line of the heredoc bodies of the RUN/COPY/ADD at lines first..end (or end)."""
    if "<<" not in lines[first] and first == end:
        return end
    if lines[first].strip().split(None, 1)[0].upper() not in {"RUN", "COPY", "ADD"}:
        return end
    j = end
    for m in _HEREDOC.finditer(" ".join(lines[first : end + 1])):
        j += 1
        while j < len(lines) and (lines[j].lstrip("\t") if m.group(1) else lines[j]).rstrip(
            "\r") != m.group(3):
            j += 1
    return min(j, len(lines) - 1)


def _locate_error(lines: list[str], message: str) -> int | None:
    """The line where the parser's complaint starts.

    The binding's errors carry no line, and each instruction parses on its own: parse blocks
    of instructions, then each instruction of the first block that fails (linear time).
    """
    escape = escape_char(lines)
    if "escape token" in message:
        for i, raw in enumerate(lines):
            m = _DIRECTIVE.match(raw.strip())
            if m and m.group(1).lower() == "escape":
                return i + 1
    head = "# escape=`\n" if escape == "`" else ""
    spans = list(instruction_spans(lines, escape))
    if "unterminated heredoc" in message and spans:  # its body runs to the end of the file
        return spans[-1][0] + 1

    def ok(first: int, last: int) -> bool:
        return _is_ok_prefix(head + "\n".join(lines[first : last + 1]) + "\n")

    for b in range(0, len(spans), _LOCATE_BLOCK):
        block = spans[b : b + _LOCATE_BLOCK]
        if not ok(block[0][0], block[-1][1]):
            return next((first + 1 for first, last in block if not ok(first, last)), None)
    return None


def _parse_go(text: str, lines: list[str]) -> tuple[list[Any], Exception | None, int | None]:
    """The parser's instructions, or its error and the line it points at."""
    import dockerfile

    try:
        return list(dockerfile.parse_string(text)), None, None
    except dockerfile.GoParseError as e:
        return [], e, _locate_error(lines, str(e))


#: Above this many characters the parser runs in a child process. BuildKit's parser is Go code
#: that holds the GIL: in a thread, a Ctrl-C waits until it returns (seconds on a large file);
#: a child process is stopped at once (its process group is killed by :func:`servelab.proc.run`).
CHILD_PARSE_BYTES = 64 * 1024


def _parse_in_child(text: str, display: str) -> tuple[list[Any], Exception | None, int | None]:
    """:func:`_parse_go` in ``python -m servelab.lint.parse`` (text on stdin, JSON back)."""
    import json
    import sys
    from types import SimpleNamespace

    from servelab import proc

    done = proc.run([sys.executable, "-m", "servelab.lint.parse"], input_text=text,
                    timeout=None, hint=f"the Dockerfile parser failed on {display}")
    out = json.loads(done.stdout)
    if out["error"] is not None:
        return [], RuntimeError(out["error"]), out["line"]
    commands = [SimpleNamespace(**{**c, "heredocs": [SimpleNamespace(**h) for h in c["heredocs"]]})
                for c in out["commands"]]
    return commands, None, None


def _child_main() -> int:
    """The child side of :func:`_parse_in_child`."""
    import json
    import sys

    text = sys.stdin.read()
    parsed, error, line = _parse_go(text, text.splitlines())
    commands = [{"cmd": c.cmd, "sub_cmd": c.sub_cmd, "json": c.json, "original": c.original,
                 "start_line": c.start_line, "end_line": c.end_line, "flags": list(c.flags),
                 "value": list(c.value),
                 "heredocs": [{"name": h.name, "content": h.content} for h in c.heredocs]}
                for c in parsed]
    # one write: json.dump's many small writes made the parent wake for each (146,000 reads
    # for a 40,000-instruction file)
    sys.stdout.write(json.dumps({"commands": commands,
                                 "error": None if error is None else str(error), "line": line}))
    return 0


def interruptible(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` in a daemon worker thread; the calling thread waits in 0.1 s steps, so a
    signal (KeyboardInterrupt, Terminated) is raised here at once and the worker abandoned."""
    out: list[_T] = []
    err: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            out.append(fn(*args))
        except BaseException as e:  # handed to the caller
            err.append(e)
        finally:
            done.set()

    threading.Thread(target=work, name="servelab-dockerfile-parse", daemon=True).start()
    while not done.wait(0.1):
        pass
    if err:
        raise err[0]
    return out[0]


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


def _instruction(c: object) -> Instruction:
    heredocs = tuple(Heredoc(h.name, h.content) for h in getattr(c, "heredocs", ()))
    sub = getattr(c, "sub_cmd", None)
    return Instruction(
        cmd=str(getattr(c, "cmd", "")).upper(),
        args=tuple(getattr(c, "value", ())),
        flags=tuple(getattr(c, "flags", ())),
        json=bool(getattr(c, "json", False)),
        original=str(getattr(c, "original", "")),
        line=int(getattr(c, "start_line", 0)),
        end_line=int(getattr(c, "end_line", 0)),
        heredocs=heredocs,
        sub_cmd=sub.upper() if isinstance(sub, str) else None,
    )


def parse_text(text: str, display: str) -> list[Instruction]:
    """Parse *text* with BuildKit's parser; InputError (with the line) when it rejects it."""
    lines = text.splitlines()
    if not any(s.strip() and not s.strip().startswith("#") for s in lines):
        raise InputError(
            "empty Dockerfile: no instructions (only comments or whitespace)",
            file=display,
            hint="write at least a FROM instruction",
        )
    check_nesting(lines, display)
    if len(text) > CHILD_PARSE_BYTES:
        parsed, error, line = _parse_in_child(text, display)
    else:
        parsed, error, line = interruptible(_parse_go, text, lines)
    if error is not None:
        raise InputError(
            f"the Dockerfile parser rejected it: {error}",
            file=display,
            line=line,
            hint="fix the Dockerfile syntax there; `docker build` would fail the same way",
        ) from error
    instrs = [_instruction(c) for c in parsed]
    for ins in instrs:
        _check_arity(ins, display)
    return instrs


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
    """Values of the ARGs declared before the first FROM, as BuildKit would use them."""
    scope: dict[str, str | None] = dict(PREDEFINED)
    for k in PREDEFINED:
        if k in build_args:
            scope[k] = build_args[k]
    for ins in args:
        for name, default, _raw in arg_items(ins, escape):
            if name in build_args:
                scope[name] = build_args[name]
            elif default is not None:
                scope[name] = unquote(expand(default, scope.get, escape).value, escape)
            else:
                scope[name] = None
    return scope


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
    exp = expand(raw, scope.get, escape)
    base = None if exp.unresolved else unquote(exp.value, escape)
    parent = None
    if base is not None:
        for s in earlier:
            if s.name is not None and s.name == base.lower():
                parent = s.index
    return Stage(index, name, ins, raw, base, sorted(set(exp.unresolved)), parent)


def build(
    path: Path, display: str, text: str, build_args: Mapping[str, str] | None = None
) -> Dockerfile:
    """Parse *text* (the contents of *path*) into stages with resolved bases."""
    instrs = parse_text(text, display)
    lines = text.splitlines()
    escape = escape_char(lines)
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
    return Dockerfile(path, display, lines, escape, global_args, stages, instrs, scope)


def load(
    path: Path, display: str | None = None, build_args: Mapping[str, str] | None = None
) -> Dockerfile:
    """Read and parse the Dockerfile at *path*."""
    name = display or str(path)
    return build(path, name, read_source(path, name), build_args)


if __name__ == "__main__":
    raise SystemExit(_child_main())
