"""The package map promised in docs/architecture.md: one package per stage, a small top level,
no import circle of any length (every import anywhere in a file counts: module level, inside
functions, under TYPE_CHECKING), and every module path the docs name importable."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "servelab"
STAGE_PACKAGES = ("build", "image", "scan", "smoke", "node", "run", "github", "lint", "k8s",
                  "gpu", "commands")
#: cross-cutting modules only (docs/architecture.md lists each)
TOP_LEVEL_LIMIT = 12


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _imports(tree: ast.Module, name: str, is_pkg: bool) -> set[str]:
    """servelab modules *name* imports anywhere: at module level, under ``if``/``try`` (e.g.
    TYPE_CHECKING) and inside functions and methods (a deferred import is still a dependency:
    two modules that import each other inside functions are a circle all the same)."""
    out: set[str] = set()
    known = _modules()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("servelab"))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                mod = ".".join([*base, mod] if mod else base)
            if mod.startswith("servelab"):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps = _imports(tree, name, path.name == "__init__.py")
        # A submodule importing its own parent package is Python's import order, not a circle.
        graph[name] = {d for d in deps if d in mods and d != name and not name.startswith(d + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                found.append([*stack[stack.index(d):], d])
            elif d not in state:
                dfs(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            dfs(n)
    return found


def test_no_import_circle() -> None:
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_an_import_inside_a_function_counts() -> None:
    """The errors <-> proc circle of 0.1 went through an import inside a function."""
    tree = ast.parse("def f():\n    from servelab.proc import tail\n")
    assert "servelab.proc" in _imports(tree, "servelab.errors", False)


def test_top_level_is_small_and_has_no_catch_all() -> None:
    top = sorted(p.stem for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= TOP_LEVEL_LIMIT, top
    names = {p.stem for p in SRC.rglob("*.py")}
    assert not names & {"util", "utils", "misc", "helpers", "common"}


@pytest.mark.parametrize("pkg", STAGE_PACKAGES)
def test_stage_package_states_its_api(pkg: str) -> None:
    init = SRC / pkg / "__init__.py"
    assert init.is_file()
    tree = ast.parse(init.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"servelab.{pkg} needs a docstring saying what it holds"
    mod = importlib.import_module(f"servelab.{pkg}")
    for name in getattr(mod, "__all__", []):
        assert getattr(mod, name) is not None, f"servelab.{pkg}.{name} in __all__ but missing"
    where = getattr(mod, "_WHERE", None)
    if where is not None:  # a lazy package: its table and __all__ name the same things
        assert sorted(where) == sorted(mod.__all__)


@pytest.mark.parametrize("pkg", ["build", "image", "scan", "smoke", "node", "run", "github"])
def test_new_stage_packages_import_nothing_eagerly(pkg: str) -> None:
    """Importing a stage package loads none of its submodules (lint's start-up must not grow)."""
    import subprocess
    import sys

    code = (f"import sys, servelab.{pkg}; "
            f"print(sorted(m for m in sys.modules if m.startswith('servelab.{pkg}.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "[]"


def _doc_module_paths() -> set[str]:
    found: set[str] = set()
    for doc in [*ROOT.joinpath("docs").glob("*.md"), ROOT / "README.md"]:
        text = doc.read_text(encoding="utf-8")
        found.update(re.findall(r"\bservelab(?:\.[a-z_][a-z0-9_]*)+", text))
        found.update("servelab." + p.replace("/", ".")
                     for p in re.findall(r"src/servelab/([a-z_/]+?)(?:/__init__)?\.py", text))
    return found


def test_every_module_path_the_docs_name_imports() -> None:
    """Dotted names whose first part is one of servelab's modules (labels such as
    ``servelab.run-id`` are not module paths) import, down to the attribute they name."""
    first = {p.stem for p in SRC.glob("*.py")} | {p.parent.name for p in SRC.glob("*/__init__.py")}
    missing = []
    for dotted in sorted(d for d in _doc_module_paths() if d.split(".")[1] in first):
        parts = dotted.split(".")
        # the longest importable prefix, then attributes
        for i in range(len(parts), 0, -1):
            try:
                obj: object = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    missing.append(dotted)
                    break
                obj = getattr(obj, attr)
            break
        else:
            missing.append(dotted)
    assert missing == []


def test_every_file_the_architecture_map_names_exists() -> None:
    """`pkg/module.py` and `module.py` in docs/architecture.md name real files under src/servelab
    (the map is where a newcomer looks first)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    names = set(re.findall(r"`((?:[a-z0-9_]+/)*[a-z0-9_]+\.py)`", text))
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for row in rows:  # "`build/` | `stage.py` ..., `export.py`": files named inside a package row
        pkg = re.match(r"\| `([a-z0-9_]+)/`", row)
        if pkg:
            names.update(f"{pkg.group(1)}/{n}" for n in re.findall(r"`([a-z0-9_]+\.py)`", row))
    missing = sorted(n for n in names if not (SRC / n).is_file()
                     and not any(SRC.glob(f"*/{n}")) and not (ROOT / n).is_file())
    assert len(names) > 30 and missing == []
