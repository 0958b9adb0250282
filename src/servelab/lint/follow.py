"""Follow the code a Dockerfile runs into the build context.

* :func:`apps`: from the start command (and the shell scripts it runs) to the Python
  application it starts (``uvicorn pkg.main:app``, ``gunicorn 'pkg:create_app()'``,
  ``python -m pkg``, ``python app.py``, ``fastapi run``, ``streamlit run``...), mapped to
  image paths through WORKDIR, ``cd``, ``--app-dir``/``--chdir`` and PYTHONPATH, and to the
  build context through the COPY/ADD instructions (``COPY --from`` stages included). The
  module's imports that resolve inside the context are followed, at most
  :data:`MAX_MODULES` modules per application, and :mod:`servelab.lint.pyscan` says which
  hub loads run at start and which at the first request.
* :func:`loop_bodies`: the commands of ``for f in */install.py; do python "$f"; done`` and
  ``find ... -name install.py -exec python {} \\;`` with each file the glob finds in the
  image.
* :func:`make_recipe`: the recipe ``make TARGET`` runs (its prerequisites' recipes too),
  kept at its lines in the Makefile.
* :func:`reaches_final`: the instructions through which a builder stage reaches the final
  image.

Every file is read with the project's safe reader, and only when its real path is inside the
build context.
"""

from __future__ import annotations

import os
import posixpath
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from servelab.lint import walk
from servelab.lint.coverage import CoverageNote, Notes, bound
from servelab.lint.downloads import offline
from servelab.lint.image import Analysis, FileSource, StageState, image_path
from servelab.lint.lazyre import LazyPattern
from servelab.lint.parse import Instruction, Stage
from servelab.lint.shell import SimpleCommand, assignments, commands

if TYPE_CHECKING:
    from servelab.lint.pyscan import Module, Scope

START = "start"
REQUEST = "request"
#: modules followed per application (the entry module included)
MAX_MODULES = 64
#: files one loop or ``find -exec`` is followed into
MAX_LOOP_FILES = 50
#: Makefile targets one ``make`` call is followed through (prerequisites included)
MAX_MAKE_TARGETS = 32
#: characters all ``$(VAR)`` expansions of one Makefile may add together: past them, lines
#: are kept as written (a Makefile whose variables double at each level stays linear)
MAX_MAKE_EXPANSION = 256 * 1024
#: rounds of ``$(VAR)`` expansion of one line (a variable naming a variable ...)
MAX_MAKE_DEPTH = 8

_APP_SPEC = LazyPattern(r"^([A-Za-z_][\w.]*):([A-Za-z_][\w.]*)(\(.*\))?$")
_MODULE = LazyPattern(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*$")
_PYTHON = LazyPattern(r"^python(\d+(\.\d+)?)?$")
_ASGI = frozenset({"uvicorn", "gunicorn", "hypercorn", "daphne", "granian", "waitress-serve"})
#: options of the servers above that take a value (the app spec is the first operand)
_ASGI_VALUE = frozenset({
    "--host", "-b", "--bind", "--port", "-p", "-w", "--workers", "-k", "--worker-class",
    "--app-dir", "--chdir", "--log-level", "--timeout", "-t", "--env-file", "--root-path",
    "-c", "--config", "--threads", "--max-requests", "--graceful-timeout", "--keep-alive",
    "--access-logfile", "--error-logfile", "--log-config", "--interface", "--loop", "--http",
    "--ws", "--forwarded-allow-ips", "--limit-concurrency", "--timeout-keep-alive",
    "--uds", "--fd", "--ssl-keyfile", "--ssl-certfile", "-u", "--user", "-g", "--group",
    "--pythonpath", "--name", "-n", "--backlog", "--worker-tmp-dir", "--preload-app",
})
_PY_VALUE = frozenset({"-W", "-X", "-Q"})
#: fastapi-cli's discovery order when ``fastapi run`` is given no path
_FASTAPI_DEFAULTS = ("main.py", "app.py", "api.py", "app/main.py", "app/app.py", "app/api.py")
#: ``streamlit run app.py``: the script runs for each browser session, so at first request
_UI_RUNNERS = {("streamlit", "run"): "request", ("chainlit", "run"): "request",
               ("gradio", ""): "start", ("panel", "serve"): "start"}


class Entry(NamedTuple):
    """A Python application a command starts."""

    #: what the command says (``uvicorn app.main:app``)
    shown: str
    #: candidate image paths of the entry module's file, first found wins
    paths: tuple[str, ...]
    #: image directories on the module search path
    roots: tuple[str, ...]
    #: a factory the server calls at start (``create_app``), else ""
    factory: str = ""
    #: whether the module runs as ``__main__``
    as_main: bool = False
    #: when the module's top level runs: "start", or "request" (Streamlit)
    when: str = "start"
    #: whether it is imported as a module (its packages' ``__init__.py`` run first), not
    #: run as a script by its path (``python app/run.py``, ``streamlit run``)
    package: bool = True


class Found(NamedTuple):
    """A hub load found by following an application."""

    what: str
    #: ``app/model.py:12`` (context-relative)
    where: str
    #: "start" or "request"
    when: str
    #: how it is reached (``in load_model(), from the lifespan hook lifespan()``)
    via: str
    #: "install" for a package install, else "hub"
    kind: str = "hub"


class Followed:
    """What following one application found."""

    __slots__ = ("entry", "loads", "missing", "read", "truncated")

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self.loads: list[Found] = []
        #: (image path, the COPY that should bring it) where the build context lacks it
        self.missing: list[tuple[str, Instruction]] = []
        #: context paths of the modules read (their text is judged here, not by patterns)
        self.read: set[Path] = set()
        #: whether :data:`MAX_MODULES` stopped the walk
        self.truncated = False


# -- reading files of the image ----------------------------------------------------------


def inside(path: Path, context: Path) -> bool:
    """Whether *path*'s real path lies inside the build context (no link leaves it)."""
    try:
        root = _real(str(context))
        real = (os.path.realpath(path) if path.is_symlink()
                else str(Path(_real(str(path.parent))) / path.name))
    except (OSError, ValueError):
        return False
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


@lru_cache(maxsize=512)
def _real(path: str) -> str:
    return os.path.realpath(path)


def source_text(src: FileSource, context: Path, notes: Notes | None = None) -> str | None:
    """The text of *src* (a heredoc, or a context file inside the context), else None; with
    *notes*, a file read only in part (size, NUL bytes) says so there."""
    if src.inline is not None:
        return src.inline
    if src.context_path is None or not inside(src.context_path, context):
        return None
    return Analysis.read(src, notes)


CopyIndex = dict[str, list[tuple[int, str, Stage, Instruction]]]
Copies = dict[int, CopyIndex]


def _from_copies(analysis: Analysis, stage: Stage) -> CopyIndex:
    """Each ``COPY --from=<stage>`` of *stage*'s chain by its image destination: (order,
    source path in the other stage, that stage, COPY), later COPYs with larger orders."""
    out: CopyIndex = {}
    n = 0
    for st in analysis.chain(stage):
        state = analysis.state(st)
        for ins in st.instructions:
            ref = ins.flag("from") if ins.cmd in {"COPY", "ADD"} else None
            other = analysis.df.stage_by_ref(ref) if ref else None
            if other is None or other.index >= st.index or len(ins.args) < 2:
                continue
            dest = ins.args[-1]
            base = state.workdirs.get(ins.line, "/")
            dest = posixpath.normpath(dest if dest.startswith("/") else posixpath.join(base, dest))
            for src in ins.args[:-1]:
                out.setdefault(dest, []).append((n, src, other, ins))
                n += 1
    return out


def _copies_to(index: CopyIndex, path: str) -> list[tuple[str, str, Stage]]:
    """(destination, source, stage) of the COPY --from entries whose destination is *path*
    or a folder above it, latest first: a look-up per folder of the path, not a walk of
    every COPY (issue 32: that walk, for each word of each RUN, was quadratic)."""
    found: list[tuple[int, str, str, Stage]] = []
    p = path
    while True:
        found += [(n, p, src, other) for n, src, other, _ins in index.get(p, ())]
        parent = posixpath.dirname(p)
        if parent == p or not p:
            break
        p = parent
    found.sort(key=lambda e: -e[0])
    return [(dest, src, other) for _n, dest, src, other in found]


def missing_copy(analysis: Analysis, stage: Stage, path: str) -> Instruction | None:
    """The COPY/ADD of *stage*'s chain that would put *path* into the image from a build
    context path that does not exist (the context given is not the one docker build gets)."""
    for st in reversed(analysis.chain(stage)):
        state = analysis.state(st)
        for ins in reversed(st.instructions):
            if ins.cmd not in {"COPY", "ADD"} or ins.flag("from") is not None or len(
                    ins.args) < 2:
                continue
            dest = image_path(ins.args[-1], state.workdirs.get(ins.line, "/"))
            for src in ins.args[:-1]:
                if ("$" in src or src.startswith("<<") or "*" in src or "://" in src
                        or not _covers(src, dest, path)):
                    continue
                rel = posixpath.normpath(src.lstrip("/"))
                if not rel.startswith("..") and not (analysis.context / rel).exists():
                    return ins
    return None


def _covers(src: str, dest: str, path: str) -> bool:
    """Whether COPY *src* *dest* can put the image file *path* there: a folder (``app/``,
    ``.``, a name without a dot) anywhere below *dest*, a file at *dest* or in it."""
    d = dest.rstrip("/") or "/"
    name = posixpath.basename(src.rstrip("/"))
    if src.endswith("/") or name in {"", "."} or "." not in name:
        return path == d or path.startswith(d.rstrip("/") + "/")
    return path in {d, posixpath.join(d, name)}


def source(analysis: Analysis, path: str, stage: Stage, depth: int = 0,
           known: Copies | None = None) -> FileSource | None:
    """Where the image file *path* of *stage* comes from: the build context (directly, or
    through ``COPY --from`` of an earlier stage), or a heredoc. *known* keeps each stage's
    ``COPY --from`` index between calls."""
    found = analysis.source_of(path, analysis.state(stage))
    if found is not None or depth > 4:
        return found
    known = analysis.from_copies if known is None else known
    if stage.index not in known:
        known[stage.index] = _from_copies(analysis, stage)
    for dest, src, other in _copies_to(known[stage.index], path):
        src_path = posixpath.normpath(src if src.startswith("/") else "/" + src)
        if path == dest:
            inner = src_path
        elif path.startswith(dest.rstrip("/") + "/"):
            inner = posixpath.join(src_path, path[len(dest.rstrip("/")) + 1:])
        else:
            continue
        got = source(analysis, inner, other, depth + 1, known)
        if got is not None:
            return got._replace(image_path=path)
    return None


# -- entries -----------------------------------------------------------------------------


def _pythonpath(state: StageState, cwd: str, env: dict[str, str]) -> list[str]:
    raw = env.get("PYTHONPATH") or state.env.get("PYTHONPATH", "")
    return [posixpath.normpath(posixpath.join(cwd, p)) for p in raw.split(":")
            if p and "$" not in p]


def _module_paths(module: str, roots: list[str], main: bool = False) -> tuple[str, ...]:
    rel = module.replace(".", "/")
    out = []
    for r in roots:
        out.append(posixpath.join(r, rel + ".py"))
        out.append(posixpath.join(r, rel, "__main__.py" if main else "__init__.py"))
    return tuple(out)


def _operands(args: list[str], with_value: frozenset[str]) -> tuple[list[str], dict[str, str]]:
    """(operands, {option: value}) of *args*."""
    ops: list[str] = []
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and a != "-":
            name, eq, value = a.partition("=")
            if not eq and name in with_value and i + 1 < len(args):
                value = args[i + 1]
                i += 1
            opts[name] = value
        else:
            ops.append(a)
        i += 1
    return ops, opts


def _server_entry(cmd: SimpleCommand, cwd: str, path: list[str]) -> Entry | None:
    ops, opts = _operands(cmd.argv[1:], _ASGI_VALUE)
    matches = [(o, m) for o in ops if (m := _APP_SPEC.match(o))]
    if not matches:
        return None
    spec, m = matches[0]
    base = opts.get("--app-dir") or opts.get("--chdir") or ""
    root = posixpath.normpath(posixpath.join(cwd, base)) if base else cwd
    extra = [posixpath.normpath(posixpath.join(root, p))
             for p in opts.get("--pythonpath", "").split(",") if p]
    roots = [root, *path, *extra]
    factory = m.group(2) if (m.group(3) or "--factory" in opts) else ""
    return Entry(f"{cmd.name} {spec}", _module_paths(m.group(1), roots), tuple(roots),
                 factory=factory)


def _python_entry(cmd: SimpleCommand, cwd: str, path: list[str]) -> Entry | None:
    ops, opts = _operands(cmd.argv[1:], _PY_VALUE)
    if "-c" in opts or not ops:
        return None
    script = posixpath.normpath(posixpath.join(cwd, ops[0]))
    if not ops[0].endswith(".py") and "/" not in ops[0]:
        return None
    return Entry(f"{cmd.name} {ops[0]}", (script, posixpath.join(script, "__main__.py")),
                 (posixpath.dirname(script), *path), as_main=True, package=False)


def _module_entry(cmd: SimpleCommand, cwd: str, path: list[str]) -> Entry | None:
    """``python -m pkg`` (the shell splitter names the command by its module)."""
    if not _MODULE.match(cmd.argv[0]):
        return None
    roots = [cwd, *path]
    return Entry(f"python -m {cmd.argv[0]}", _module_paths(cmd.argv[0], roots, main=True),
                 tuple(roots), as_main=True)


def _cli_entry(cmd: SimpleCommand, cwd: str, path: list[str]) -> Entry | None:
    args = list(cmd.argv[1:])
    sub = args[0] if args else ""
    if cmd.name == "fastapi" and sub in {"run", "dev"}:
        ops, _opts = _operands(args[1:], frozenset({"--host", "--port", "--app",
                                                    "--root-path", "--workers"}))
        files = [ops[0]] if ops else list(_FASTAPI_DEFAULTS)
        paths = tuple(posixpath.normpath(posixpath.join(cwd, f)) for f in files)
        dirs = tuple(posixpath.dirname(p) for p in paths)
        return Entry(f"fastapi {sub}", paths + tuple(posixpath.join(p, "__init__.py")
                                                    for p in paths), (*dirs, cwd, *path))
    key = (cmd.name, sub) if (cmd.name, sub) in _UI_RUNNERS else (cmd.name, "")
    if key not in _UI_RUNNERS:
        return None
    rest = args[1:] if key[1] else args
    ops, _opts = _operands(rest, frozenset({"--server.port", "--port", "--host"}))
    if not ops or not ops[0].endswith(".py"):
        return None
    script = posixpath.normpath(posixpath.join(cwd, ops[0]))
    return Entry(" ".join([cmd.name, *([sub] if key[1] else []), ops[0]]), (script,),
                 (posixpath.dirname(script), cwd, *path), as_main=True, when=_UI_RUNNERS[key],
                 package=False)


_PY_M = LazyPattern(r"\bpython[\d.]*\s+(?:-[A-Za-z]+\s+)*-m\s+([A-Za-z_][\w.]*)")


def entries(text: str, state: StageState, cwd: str) -> list[Entry]:
    """The Python applications the commands of *text* start, run in *cwd*."""
    out: list[Entry] = []
    env = assignments(text)
    run_as_module = {m.group(1) for m in _PY_M.finditer(text)} if "-m" in text else set()
    for cmd in commands(text):
        if cmd.name == "cd" and len(cmd.argv) > 1 and "$" not in cmd.argv[1]:
            cwd = posixpath.normpath(posixpath.join(cwd, cmd.argv[1]))
            continue
        path = _pythonpath(state, cwd, {**env, **cmd.env})
        if cmd.name in _ASGI:
            found = _server_entry(cmd, cwd, path)
        elif cmd.name.startswith("python") and _PYTHON.match(cmd.name):
            found = _python_entry(cmd, cwd, path)
        elif cmd.argv[0] in run_as_module:
            found = _module_entry(cmd, cwd, path)
        else:
            found = _cli_entry(cmd, cwd, path)
        if found is not None:
            out.append(found)
    return out


# -- the module walk ---------------------------------------------------------------------


class _Walk:
    """The modules of one application, read and scanned, within :data:`MAX_MODULES`."""

    def __init__(self, analysis: Analysis, stage: Stage, entry: Entry,
                 env: dict[str, str]) -> None:
        self.analysis = analysis
        self.stage = stage
        self.entry = entry
        self.env = env
        self.result = Followed(entry)
        #: image path -> (module facts, context-relative name)
        self.modules: dict[str, tuple[Module, str]] = {}
        self.order: list[str] = []
        #: image paths looked for and not found (or not readable)
        self.absent: set[str] = set()
        self.copies: Copies = {}

    def lookup(self, name: str) -> str | None:
        if name in self.env:
            return self.env[name]
        return self.analysis.state(self.stage).lookup(name)

    def load(self, image_path: str) -> str | None:
        """Read and scan the module at *image_path*; its key, or None when it is not in the
        image from the context (or missing from the context: noted)."""
        if image_path in self.modules:
            return image_path
        if image_path in self.absent:
            return None
        self.absent.add(image_path)  # until it is read
        src = source(self.analysis, image_path, self.stage, known=self.copies)
        if src is None or (src.context_path is not None and not src.context_path.is_file()):
            copy = missing_copy(self.analysis, self.stage, image_path)
            if copy is not None:
                self.result.missing.append((image_path, copy))
            return None
        if len(self.modules) >= MAX_MODULES:
            self.result.truncated = True
            self.analysis.coverage.add(bound(
                f"the modules {self.entry.shown} imports past the first {MAX_MODULES}",
                "MAX_MODULES", MAX_MODULES, "modules per application"))
            return None
        text = source_text(src, self.analysis.context, self.analysis.coverage)
        if text is None:
            return None
        from servelab.lint import pyfallback, pyscan

        mod = pyscan.scan(text, self.lookup)
        if mod is None:
            mod, why = pyfallback.scan(text, self.lookup)
            self.analysis.coverage.add(CoverageNote(_display(src, self.analysis.context), why))
            if mod is None:
                return None
        if src.context_path is not None:
            self.result.read.add(src.context_path)
        self.modules[image_path] = (mod, _display(src, self.analysis.context))
        self.order.append(image_path)
        return image_path

    def resolve(self, module: str, level: int, here: str) -> list[str]:
        """Image paths of *module* imported from the module at *here*."""
        if level:
            base = posixpath.dirname(here)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
            roots = [base]
        else:
            roots = list(self.entry.roots)
            if module.split(".", 1)[0] == posixpath.basename(posixpath.dirname(here)):
                roots.append(posixpath.dirname(posixpath.dirname(here)))
        rel = module.replace(".", "/") if module else ""
        out = []
        for r in roots:
            p = posixpath.join(r, rel) if rel else r
            out += [p + ".py" if rel else posixpath.join(p, "__init__.py"),
                    posixpath.join(p, "__init__.py")]
        return out

    def first(self, candidates: list[str] | tuple[str, ...]) -> str | None:
        for c in candidates:
            key = self.load(posixpath.normpath(c))
            if key is not None:
                return key
        return None

    def packages(self, module: str, level: int, here: str) -> list[str]:
        """Keys of the ``__init__.py`` files importing *module* runs first: ``import a.b.c``
        runs ``a/__init__.py`` and ``a/b/__init__.py`` before ``a/b/c.py``."""
        parts = module.split(".") if module else []
        out = []
        for n in range(1, len(parts)):
            cands = [c for c in self.resolve(".".join(parts[:n]), level, here)
                     if c.endswith("/__init__.py")]
            got = self.first(cands)
            if got is not None:
                out.append(got)
        return out

    def entry_packages(self, key: str) -> list[str]:
        """Keys of the package ``__init__.py`` files above the entry module *key* (``uvicorn
        app.main:app`` imports ``app`` first, so ``app/__init__.py`` runs at start too)."""
        for root in self.entry.roots:
            prefix = root.rstrip("/") + "/"
            if key.startswith(prefix):
                dirs = key[len(prefix):].split("/")[:-1]
                cands = [posixpath.join(prefix, *dirs[:n], "__init__.py")
                         for n in range(1, len(dirs) + 1)]
                found = [self.load(c) for c in cands if c != key]
                return [k for k in found if k is not None]
        return []

    def imports_of(self, key: str, scope: Scope) -> list[str]:
        """Keys of the modules *scope* imports (submodules named in ``from`` imports too)."""
        out = []
        for module, level, names in scope.imports:
            out += self.packages(module, level, key)
            target = self.first(self.resolve(module, level, key))
            if target is not None:
                out.append(target)
            for name, _local in names:
                sub = f"{module}.{name}" if module else name
                got = self.first([c for c in self.resolve(sub, level, key)
                                  if not c.endswith("/__init__.py") or c.count("/") > 1])
                if got is not None:
                    out.append(got)
        return out


def _display(src: FileSource, context: Path) -> str:
    if src.context_path is not None:
        return os.path.relpath(src.context_path, context).replace(os.sep, "/")
    return f"{src.image_path} (heredoc at line {src.instr.line})"


# -- what runs when ----------------------------------------------------------------------


class _Reach:
    """Which scopes run at start and which at the first request, and their hub loads."""

    def __init__(self, walk: _Walk) -> None:
        self.walk = walk
        self.done: set[tuple[str, str]] = set()

    def run(self) -> None:
        walk, entry = self.walk, self.walk.entry
        key = walk.first(entry.paths)
        if key is None:
            return
        mod, _name = walk.modules[key]
        top = "at module level" if entry.when == START else "when a session runs the script"
        todo: list[tuple[str, Scope, str, str]] = [(key, mod.top, entry.when, top)]
        if entry.package:
            for pkg in walk.entry_packages(key):
                todo.append((pkg, walk.modules[pkg][0].top, entry.when,
                             f"at import of the package {walk.modules[pkg][1]}"))
        if entry.as_main:
            todo.append((key, mod.main, entry.when, "under __main__"))
        if entry.factory and entry.factory in mod.functions:
            todo.append((key, mod.functions[entry.factory], "start",
                         f"in the app factory {entry.factory}()"))
        self.visit(todo)
        self.hooks()

    def hooks(self) -> None:
        """Lifespan and startup hooks (at start), then route handlers (at a request), of
        every module read."""
        for when in ("start", "request"):
            todo: list[tuple[str, Scope, str, str]] = []
            for key in list(self.walk.order):
                mod, _n = self.walk.modules[key]
                for name, (w, kind) in mod.hooks.items():
                    target = self.callee(key, mod, name, "")
                    if w == when and target is not None:
                        todo.append((target[0], target[1], when,
                                     f"in the {kind} {name}()"))
            self.visit(todo)

    def visit(self, todo: list[tuple[str, Scope, str, str]]) -> None:
        while todo:
            key, scope, when, via = todo.pop()
            if (key, scope.name) in self.done:
                continue
            self.done.add((key, scope.name))
            mod, name = self.walk.modules[key]
            for load in scope.loads:
                if load.kind == "install" or not mod.offline:
                    self.walk.result.loads.append(Found(load.what, f"{name}:{load.line}",
                                                        when, via, load.kind))
            for target in self.walk.imports_of(key, scope):
                tmod, _tn = self.walk.modules[target]
                todo.append((target, tmod.top, when, via))
            owner = scope.name.rsplit(".", 1)[0] if "." in scope.name else ""
            for call in scope.calls:
                got = self.callee(key, mod, call.name, owner)
                if got is not None:
                    inner = f"in {got[1].name}() ({name}:{call.line})"
                    todo.append((got[0], got[1], when,
                                 inner if via == "at module level" else f"{inner}, {via}"))

    def callee(self, key: str, mod: Module, name: str, owner: str) -> tuple[str, Scope] | None:
        """The scope a call of *name* in module *key* runs (a class: its ``__init__``)."""
        head, _dot, rest = name.partition(".")
        if head == "self" and owner and rest:
            return _function(key, mod, f"{owner}.{rest}")
        local = _function(key, mod, name)
        if local is not None:
            return local
        alias = mod.aliases.get(head)
        if alias is None:
            return None
        module, attr, level = alias
        parts = [p for p in (*attr.split("."), *rest.split(".")) if p]
        # `from app.core import model_loader; model_loader.load()`, `import app.x;
        # app.x.load()`: the longest module prefix that is a file, the rest its function
        for cut in range(len(parts) - 1, -1, -1):
            sub = ".".join([m for m in (module, *parts[:cut]) if m])
            if not sub and not level:
                continue
            for cand in self.walk.resolve(sub, level, key):
                tkey = self.walk.load(posixpath.normpath(cand))
                if tkey is not None:
                    tmod, _tn = self.walk.modules[tkey]
                    found = _function(tkey, tmod, ".".join(parts[cut:]))
                    if found is not None:
                        return found
        return None


def _function(key: str, mod: Module, name: str) -> tuple[str, Scope] | None:
    for cand in (name, f"{name}.__init__"):
        if cand in mod.functions:
            return key, mod.functions[cand]
    return None


def follow_app(analysis: Analysis, entry: Entry, env: dict[str, str],
               stage: Stage | None = None) -> Followed:
    """Follow *entry* into the build context and find its hub loads (none when the image
    or the command sets HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE)."""
    walk = _Walk(analysis, stage or analysis.df.final, entry, env)
    _Reach(walk).run()
    if offline({**analysis.state(walk.stage).env, **env}):  # installs still need network
        walk.result.loads = [f for f in walk.result.loads if f.kind == "install"]
    unique: dict[tuple[str, str, str], Found] = {}
    for f in walk.result.loads:
        unique.setdefault((f.where, f.what, f.when), f)
    walk.result.loads = list(unique.values())
    return walk.result


# -- loops, find -exec, make -------------------------------------------------------------

_FOR = LazyPattern(
    r"\bfor\s+([A-Za-z_]\w*)\s+in\s+([^;\n]{1,500}?)\s*(?:;|\n)\s*do\b(.{0,4000}?)"
    r"(?:;|\n)\s*done\b", re.S)
_FIND = LazyPattern(
    r"\bfind\s+(\S+)(?P<opts>(?:[ \t]+(?!-exec\b)\S+){0,40}?)[ \t]+-exec[ \t]+"
    r"(?P<cmd>[^\n]{1,500}?)[ \t]+\{\}(?P<tail>[^;+\n]{0,200}?)[ \t]*(?:\\;|';'|\";\"|\+)")
_NAME_OPT = LazyPattern(r"-(?:i?name|path)\s+[\"']?([^\"'\s]+)")


def image_glob(pattern: str, state: StageState, analysis: Analysis) -> list[str]:
    """Image paths the glob *pattern* (absolute) matches among files copied from the
    context (at most :data:`MAX_LOOP_FILES`; past them, a coverage note)."""
    rx = _glob_rx(pattern)
    found = [p for p in state.files if rx.match(p)]
    for img_dir, ctx_dir, _ins in state.dirs:
        prefix = img_dir.rstrip("/") + "/"
        if not pattern.startswith(prefix) or not inside(ctx_dir, analysis.context):
            continue
        hits = walk.glob(ctx_dir, pattern[len(prefix):])  # bounded, links re-rooted
        found += [prefix + name for name, h in zip(hits.names, hits.matches, strict=True)
                  if inside(h, analysis.context)][:MAX_LOOP_FILES + 1]
        if hits.stopped:
            _loop_note(analysis, pattern)
    unique = list(dict.fromkeys(found))
    if len(unique) > MAX_LOOP_FILES:
        _loop_note(analysis, pattern)
    return unique[:MAX_LOOP_FILES]


def _loop_note(analysis: Analysis, pattern: str) -> None:
    analysis.coverage.add(bound(f"the files {pattern} matches past the first {MAX_LOOP_FILES}",
                                "MAX_LOOP_FILES", MAX_LOOP_FILES, "files one loop runs"))


def _glob_rx(pattern: str) -> re.Pattern[str]:
    out = []
    for part in re.split(r"(\*\*/|\*|\?)", pattern):
        out.append({"**/": "(.*/)?", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part)))
    return re.compile("^" + "".join(out) + "$")


def _substitute(body: str, var: str, value: str) -> str:
    return re.sub(r"\$\{" + var + r"\}|\$" + var + r"\b", value, body)


def loop_bodies(text: str, state: StageState, analysis: Analysis, cwd: str) -> list[str]:
    """The commands loops and ``find -exec`` of *text* run, once per file they find."""
    out: list[str] = []
    if "for" not in text and "find" not in text:  # most texts: no pattern to compile
        return out
    for m in _FOR.finditer(text) if "done" in text else ():
        var, words, body = m.group(1), m.group(2).split(), m.group(3)
        for w in words:
            pattern = posixpath.join(cwd, w.strip("\"'"))
            if not re.search(r"[*?]", pattern):
                continue
            out += [_substitute(body, var, p) for p in image_glob(pattern, state, analysis)]
    for m in _FIND.finditer(text) if "-exec" in text else ():
        root = posixpath.normpath(posixpath.join(cwd, m.group(1).strip("\"'")))
        names = _NAME_OPT.compiled.findall(m.group("opts")) or ["*"]
        for name in names:
            pattern = posixpath.join(root, "**/" + name if "/" not in name else name)
            out += [f"{m.group('cmd')} {p}{m.group('tail')}"
                    for p in image_glob(pattern, state, analysis)]
    if len(out) > MAX_LOOP_FILES:
        _loop_note(analysis, "the loops of one command")
    return out[:MAX_LOOP_FILES]


_MAKE_VAR = LazyPattern(r"^([A-Za-z_][\w.-]*)\s*(?::{1,3}=|\?=|=|\+=)\s*(.*)$")
_MAKE_AUTO = LazyPattern(r"\$@|\$\(@\)")
_MAKE_REF = LazyPattern(r"\$[({]([A-Za-z_][\w.-]*)[)}]")


class _Expansion:
    """``$(VAR)`` expansion of one Makefile within :data:`MAX_MAKE_EXPANSION` characters
    and :data:`MAX_MAKE_DEPTH` rounds a line; what stopped it, for the coverage note."""

    __slots__ = ("left", "stopped", "variables")

    def __init__(self, variables: dict[str, str]) -> None:
        self.variables = variables
        self.left = MAX_MAKE_EXPANSION
        self.stopped = ""

    def expand(self, line: str, target: str = "") -> str:
        """*line* with the Makefile's ``$(VAR)`` (and ``$@``: *target*) substituted."""
        for _round in range(MAX_MAKE_DEPTH):
            if self.left <= 0:
                self.stopped = self.stopped or "size"
                return line
            out = self._round(line, target)
            if out == line:
                return out
            line = out
        if _MAKE_REF.search(line):
            self.stopped = self.stopped or "depth"
        return line

    def _round(self, line: str, target: str) -> str:
        parts: list[str] = []
        pos = 0
        for m in _MAKE_REF.finditer(line):
            value = self.variables.get(m.group(1))
            if value is None:
                continue
            grow = len(value) - len(m.group(0))
            if grow > self.left:
                self.stopped = "size"
                self.left = 0
                break
            self.left -= max(grow, 0)
            parts += [line[pos:m.start()], value]
            pos = m.end()
        parts.append(line[pos:])
        out = "".join(parts)
        if target:
            out = _MAKE_AUTO.sub(lambda _m: target, out)
        return out.replace("$(MAKE)", "make").replace("${MAKE}", "make").replace("$$", "$")

    def note(self, what: str) -> CoverageNote | None:
        if self.stopped == "size":
            return bound(what, "MAX_MAKE_EXPANSION", MAX_MAKE_EXPANSION,
                         "characters of $(VAR) expansion a Makefile, the rest kept as written")
        if self.stopped == "depth":
            return bound(what, "MAX_MAKE_DEPTH", MAX_MAKE_DEPTH,
                         "rounds of $(VAR) expansion a line")
        return None


def _make_rules(text: str) -> tuple[dict[str, tuple[list[str], list[tuple[int, str]]]],
                                    str, _Expansion]:
    """{target: (prerequisites, [(line, recipe line)])}, the default target, the
    Makefile's variables (as an :class:`_Expansion`)."""
    rules: dict[str, tuple[list[str], list[tuple[int, str]]]] = {}
    variables: dict[str, str] = {}
    expansion = _Expansion(variables)
    default = ""
    current: list[str] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        if raw.startswith("\t"):
            for t in current:
                rules[t][1].append((n, raw[1:].lstrip("@-+ ")))
            continue
        line = raw.split("#", 1)[0].rstrip()
        if m := _MAKE_VAR.match(line):
            variables.setdefault(m.group(1), m.group(2))
            current = []
        elif rule := _rule(expansion.expand(line) if "$" in line else line):
            targets, prereqs, inline = rule
            current = targets
            for t in targets:
                rules.setdefault(t, ([], []))[0].extend(prereqs)
                if inline:
                    rules[t][1].append((n, inline))
            if not default and not targets[0].startswith("."):
                default = targets[0]
        elif line.strip():
            current = []
    return rules, default, expansion


def _rule(line: str) -> tuple[list[str], list[str], str] | None:
    """(targets, prerequisites, recipe after ``;``) of a rule line ``a b: c d; cmd``."""
    head, colon, rest = line.partition(":")
    if not colon or not head.strip() or head[0].isspace() or rest.startswith("="):
        return None
    rest = rest.removeprefix(":")  # a double-colon rule
    if rest.startswith("="):
        return None  # `x ::= value`
    prereqs, _semi, inline = rest.partition(";")
    normal, _bar, order_only = prereqs.partition("|")
    return head.split(), normal.split() + order_only.split(), inline.strip()


def make_recipe(text: str, targets: list[str], notes: Notes | None = None,
                what: str = "Makefile") -> str:
    """The recipe lines ``make TARGETS`` runs (prerequisites first), with the Makefile's
    simple ``$(VAR)`` values substituted, each at its own line (other lines blank). A
    bound reached (targets, expansion) is a coverage note in *notes* naming *what*."""
    rules, default, expansion = _make_rules(text)
    todo = list(reversed(targets or [default]))
    seen: set[str] = set()
    keep: dict[int, str] = {}
    while todo:
        t = todo.pop()
        if t in seen or t not in rules:
            continue
        if len(seen) >= MAX_MAKE_TARGETS:
            if notes is not None:
                notes.add(bound(f"the recipes of {what} past its first {MAX_MAKE_TARGETS} "
                                f"targets ({t} ...)", "MAX_MAKE_TARGETS", MAX_MAKE_TARGETS,
                                "targets one make call"))
            break
        seen.add(t)
        prereqs, recipe = rules[t]
        todo += reversed(prereqs)
        for n, line in recipe:
            keep[n] = expansion.expand(line, t)
    note = expansion.note(f"the variables of {what}")
    if note is not None and notes is not None:
        notes.add(note)
    if not keep:
        return ""
    return "\n".join(keep.get(n, "") for n in range(1, max(keep) + 1))


def make_call(cmd: SimpleCommand, cwd: str) -> tuple[str, list[str]] | None:
    """(image path of the Makefile, targets) of a ``make`` command, else None."""
    if cmd.name not in {"make", "gmake"}:
        return None
    ops, opts = _operands(cmd.argv[1:], frozenset({"-C", "--directory", "-f", "--file",
                                                    "--makefile", "-j", "--jobs", "-l"}))
    where = opts.get("-C") or opts.get("--directory") or ""
    base = posixpath.normpath(posixpath.join(cwd, where)) if where else cwd
    name = opts.get("-f") or opts.get("--file") or opts.get("--makefile") or "Makefile"
    targets = [o for o in ops if "=" not in o]
    return posixpath.normpath(posixpath.join(base, name)), targets


# -- builder stages ----------------------------------------------------------------------


def reaches_final(analysis: Analysis, stage: Stage) -> list[Instruction]:
    """The ``COPY --from``/``RUN --mount=from`` instructions of the final image's stages
    through which *stage* (or a stage built from it) reaches the final image; empty when
    *stage* is one the final image is built FROM. Computed once per stage."""
    if stage.index not in analysis.reaches:
        analysis.reaches[stage.index] = _reaches_final(analysis, stage)
    return analysis.reaches[stage.index]


def _reaches_final(analysis: Analysis, stage: Stage) -> list[Instruction]:
    chain = {s.index for s in analysis.chain()}
    if stage.index in chain:
        return []
    family = {s.index for s in analysis.df.stages if stage.index in
              {c.index for c in analysis.chain(s)}}
    out = []
    for st in analysis.reachable():
        if st.index in family:
            continue
        for ins in st.instructions:
            refs = [ins.flag("from") or ""] if ins.cmd in {"COPY", "ADD"} else []
            if ins.cmd == "RUN":
                refs += [m.get("from", "") for m in ins.mounts()]
            for ref in refs:
                other = analysis.df.stage_by_ref(ref) if ref else None
                if other is not None and other.index in family:
                    out.append(ins)
    return out


# -- comments ----------------------------------------------------------------------------


def without_comments(text: str, python: bool = False) -> str:
    """*text* with its comments blanked, each line kept where it was: a call that appears
    only in a comment is never evidence. Python comments are found by :mod:`tokenize`
    (imported only here, for a Python file); shell comments are whole ``#`` lines."""
    if python:
        blanked = _python_without_comments(text)
        if blanked is not None:
            return blanked
    return "\n".join("" if line.lstrip().startswith("#") and not line.startswith("#!")
                     else line for line in text.split("\n"))


def _python_without_comments(text: str) -> str | None:
    import io
    import tokenize

    lines = text.split("\n")
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return "\n".join(lines)
