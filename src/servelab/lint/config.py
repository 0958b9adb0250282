"""Lint settings (disabled rules, severities, hadolint on/off), inline suppressions, and
build-argument files.

Settings come from ``--config FILE`` or the first of ``.servelab.yaml``/``.servelab.yml``
(under a ``lint:`` key) or ``pyproject.toml`` (``[tool.servelab.lint]``) found in the
current directory or its parents, never above the repository (the git top level; outside
git, only the current directory): a pull request cannot reach a settings file elsewhere on
the machine, and the report names the file used and the rules it disabled::

    [tool.servelab.lint]
    disable = ["no-health", "DL3008"]
    severity = { "base-latest" = "error" }
    hadolint = true
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from servelab.errors import InputError
from servelab.findings import Severity
from servelab.textio import AllowedPath, PathPolicy, repository_root

_EXTERNAL_ID = re.compile(r"^(DL|SC)\d{4}$")
_SUPPRESS = re.compile(r"#\s*servelab:\s*ignore\s*=\s*([A-Za-z0-9_,\s.-]+)")
_KEYS = {"disable", "severity", "hadolint"}


class LintConfig(NamedTuple):
    """Lint settings: rules off, severities changed, whether hadolint runs, and where from."""

    disable: frozenset[str] = frozenset()
    severity: Mapping[str, Severity] = MappingProxyType({})
    hadolint: bool = True
    #: the file the settings came from, if any
    source: str | None = None


def _known(rid: str, known: set[str]) -> bool:
    return rid in known or bool(_EXTERNAL_ID.match(rid))


#: the line of a place in the settings (``("disable", 2)``, ``("severity", "no-health")``,
#: ``()`` for the lint table itself), None when not known
Locate = Callable[[tuple[str | int, ...]], "int | None"]
_RULE_HINT = ("use a servelab rule id (servelab lint --list-rules) or a hadolint code "
              "(DL3008, SC2086)")
_SHAPE = ("the lint settings hold disable (a list of rule ids), severity (rule id: error, "
          "warning or info) and hadolint (true or false)")


def _nowhere(_at: tuple[str | int, ...]) -> int | None:
    return None


def _close(word: str, options: set[str]) -> list[str]:
    import difflib  # only on the way to an error: not on lint's start

    return difflib.get_close_matches(word, sorted(options), n=1)


def _check_rule(rid: object, known: set[str], where: str, source: str | None = None,
                line: int | None = None) -> str:
    if not isinstance(rid, str) or not _known(rid, known):
        close = _close(str(rid), known)
        raise InputError(
            f"unknown lint rule {rid!r} in {where}"
            + (f"; did you mean {close[0]!r}?" if close else ""),
            file=source, line=line, hint=_RULE_HINT,
        )
    return rid


def from_mapping(data: Any, source: str, known: set[str],
                 locate: Locate = _nowhere) -> LintConfig:
    """Validate a settings mapping (the ``lint`` table) into a :class:`LintConfig`; each
    error names the line *locate* gives for its place, and the fix."""
    if not isinstance(data, dict):
        raise InputError(f"lint settings must be a table/mapping, not {_kind(data)}",
                         file=source, line=locate(()), hint=_SHAPE)
    unknown = sorted(map(str, set(data) - _KEYS))
    if unknown:
        close = _close(unknown[0], _KEYS)
        raise InputError(
            f"unknown lint setting(s): {', '.join(unknown)}"
            + (f"; did you mean {close[0]!r}?" if close else ""),
            file=source, line=locate((unknown[0],)),
            hint="use disable, severity and hadolint",
        )
    disable = data.get("disable", [])
    if not isinstance(disable, list):
        raise InputError(f"lint.disable must be a list of rule ids, not {_kind(disable)}",
                         file=source, line=locate(("disable",)),
                         hint="write disable: [no-health, DL3008] (TOML: disable = "
                         '["no-health", "DL3008"])')
    sev_in = data.get("severity", {})
    if not isinstance(sev_in, dict):
        raise InputError("lint.severity must map rule ids to error, warning or info, not "
                         f"{_kind(sev_in)}", file=source, line=locate(("severity",)),
                         hint="write severity: {base-latest: error} (TOML: severity = "
                         '{ "base-latest" = "error" })')
    severity: dict[str, Severity] = {}
    for rid, level in sev_in.items():
        _check_rule(rid, known, f"{source} (severity)", source, locate(("severity", rid)))
        try:
            severity[rid] = Severity.parse(str(level))
        except ValueError as e:
            raise InputError(f"lint.severity.{rid}: {e}", file=source,
                             line=locate(("severity", rid)),
                             hint="use error, warning or info") from e
    hadolint = data.get("hadolint", True)
    if not isinstance(hadolint, bool):
        raise InputError(f"lint.hadolint must be true or false, not {_kind(hadolint)}",
                         file=source, line=locate(("hadolint",)),
                         hint="write hadolint: false (or true), unquoted")
    return LintConfig(
        frozenset(_check_rule(r, known, f"{source} (disable)", source,
                              locate(("disable", i))) for i, r in enumerate(disable)),
        severity,
        hadolint,
        source,
    )


def _kind(value: Any) -> str:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
    return f"{type(value).__name__} {shown}"


def _from_toml(path: Path, known: set[str], *, found: bool = False) -> LintConfig | None:
    """``[tool.servelab.lint]`` of *path*, None when absent. *found*: a pyproject.toml met
    while searching upwards, which most often belongs to someone else: one without the word
    ``servelab`` is skipped without parsing it (tomllib costs ~7 ms of a lint start)."""
    from servelab.textio import read_text

    text = read_text(path, what="TOML settings file")
    if found and "servelab" not in text:
        return None
    import tomllib

    try:
        data = tomllib.loads(text)
    except (ValueError, RecursionError) as e:  # TOMLDecodeError, 5000-digit numbers, nesting
        at = _TOML_AT.search(str(e))
        end = len(text.splitlines()) or 1 if "end of document" in str(e) else None
        raise InputError(f"malformed TOML: {_TOML_AT.sub('', str(e)).strip()}", file=str(path),
                         line=int(at.group(1)) if at else end,
                         column=int(at.group(2)) if at else None,
                         hint="fix the TOML syntax at that position (a missing quote, "
                         "bracket or '=')") from e
    table = _table(data, ("tool", "servelab", "lint"), path)
    if table is None:
        return None
    return from_mapping(table, str(path), known, _toml_locate(text))


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
_TOML_HEADER = re.compile(r"^[ \t]*\[\s*tool\s*\.\s*servelab\s*\.\s*lint\s*\]", re.MULTILINE)


def _toml_locate(text: str) -> Locate:
    """Lines in ``[tool.servelab.lint]`` of a TOML *text* (tomllib gives no positions): the
    table's header, a key's ``key =`` line below it, a rule id's quoted text after its key;
    None when not found (another way of writing the table)."""
    lines = text.splitlines()
    header = _TOML_HEADER.search(text)
    start = text.count("\n", 0, header.start()) if header else None

    def locate(at: tuple[str | int, ...]) -> int | None:
        if start is None:
            return None
        if not at:
            return start + 1
        key_line = None
        for n in range(start + 1, len(lines)):
            if lines[n].lstrip().startswith("["):
                break
            if re.match(rf'^\s*"?{re.escape(str(at[0]))}"?\s*=', lines[n]):
                key_line = n
                break
        if key_line is None or len(at) == 1:
            return None if key_line is None else key_line + 1
        # a key of an inline table ("base-latest" = ...), or item N of an array: the Nth
        # quoted string after the key's '='
        word = re.compile(rf'["\']{re.escape(at[1])}["\']' if isinstance(at[1], str)
                          else r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')
        seen = -1
        for n in range(key_line, len(lines)):
            line = lines[n].split("=", 1)[1] if n == key_line else lines[n]
            if n > key_line and lines[n].lstrip().startswith("["):
                break
            for _ in word.finditer(line):
                seen += 1
                if isinstance(at[1], str) or seen == at[1]:
                    return n + 1
        return key_line + 1

    return locate


def _table(data: dict[str, Any], keys: tuple[str, ...], path: Path) -> Any:
    """``data[k1][k2]...``, None when a key is absent; InputError when a level is no table."""
    for n, key in enumerate(keys):
        if key not in data:
            return None
        data = data[key]
        if n < len(keys) - 1 and not isinstance(data, dict):
            raise InputError(f"{'.'.join(keys[: n + 1])} must be a table, not "
                             f"{type(data).__name__} {data!r:.40}", file=str(path),
                             hint="write [tool.servelab.lint] tables, see docs/lint.md")
    return data


def _from_yaml(path: Path, known: set[str]) -> LintConfig | None:
    from servelab import yamlsafe

    docs = yamlsafe.load_file(path, what="lint settings file")
    doc = docs[0]
    data = doc.data
    if not isinstance(data, dict):
        raise InputError("expected a mapping at the top", file=str(path), line=doc.line,
                         hint="write the settings under a top-level lint: key")
    if "lint" not in data:
        return None
    lint = data["lint"]

    def locate(at: tuple[str | int, ...]) -> int | None:
        full = ("lint", *at)
        if at and isinstance(lint, dict) and isinstance(at[-1], str) and len(at) <= 2:
            return doc.key_position(full).line  # a key's own line: `colour: red`
        return doc.position(full).line

    return from_mapping(lint, str(path), known, locate)


def load_config(path: Path, known: set[str]) -> LintConfig:
    """Settings from an explicit file (YAML, or TOML with ``[tool.servelab.lint]``)."""
    if not path.exists():
        raise InputError("no such config file", file=str(path), hint="check the path")
    loader = _from_toml if path.suffix == ".toml" else _from_yaml
    cfg = loader(path, known)
    if cfg is None:
        raise InputError(
            "no lint settings in this file",
            file=str(path),
            hint="add [tool.servelab.lint] (TOML) or a top-level lint: mapping (YAML)",
        )
    return cfg


def _within(start: Path, root: Path) -> list[Path]:
    """*start* and its parents up to *root* (the repository), nearest first."""
    dirs = [start]
    for d in start.parents:
        if not (start.is_relative_to(root) and d.is_relative_to(root)):
            break
        dirs.append(d)
    return dirs if start.is_relative_to(root) else []


def _found(d: Path, policy: PathPolicy) -> list[tuple[Path, bool]]:
    """The settings files in *d*, each confined to the repository (a symbolic link to a
    file outside it is an InputError, as any path an experiment names)."""
    out = []
    for name in (".servelab.yaml", ".servelab.yml", "pyproject.toml"):
        if (d / name).is_file():
            path = policy.confine(name, d, kind="settings", field="settings file",
                                  file=str(d / name))
            out.append((path, name == "pyproject.toml"))
    return out


def discover(start: Path, known: set[str], allowed: tuple[AllowedPath, ...] = ()) -> LintConfig:
    """Settings from the nearest .servelab.yaml or pyproject.toml at or above *start*, never
    above its repository (the git top level, or *start* itself outside git), or the defaults.
    A file found is opened by its resolved path, and must resolve inside the repository."""
    policy = PathPolicy(repository_root(start), allowed)
    for d in _within(Path(os.path.realpath(start)), policy.root):
        for path, toml in _found(d, policy):
            cfg = _from_toml(path, known, found=True) if toml else _from_yaml(path, known)
            if cfg is not None:
                return cfg
    return LintConfig()


def settings_of(cfg: LintConfig) -> dict[str, Any] | None:
    """What a report says about the settings used (``FindingsReport.settings``)."""
    if cfg.source is None:
        return None
    return {"file": cfg.source, "disabled": sorted(cfg.disable),
            "severity": {k: v.value for k, v in sorted(cfg.severity.items())},
            "hadolint": cfg.hadolint}


def suppressions(lines: list[str], start: int) -> set[str]:
    """Rule ids named by ``# servelab: ignore=`` comments directly above line *start*."""
    out: set[str] = set()
    i = start - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        m = _SUPPRESS.search(lines[i])
        if m:
            out.update(r.strip() for r in m.group(1).split(",") if r.strip())
        i -= 1
    return out


_HADOLINT_IGNORE = re.compile(r"#\s*hadolint\s+(global\s+)?ignore\s*=\s*([A-Za-z0-9_,\s]+)")


def _codes(text: str) -> set[str]:
    return {c.strip() for c in text.split(",") if c.strip()}


def global_hadolint_ignores(lines: list[str]) -> set[str]:
    """hadolint codes of ``# hadolint global ignore=`` comments anywhere in the file."""
    out: set[str] = set()
    for raw in lines:
        m = _HADOLINT_IGNORE.search(raw) if "hadolint" in raw else None
        if m and m.group(1):
            out |= _codes(m.group(2))
    return out


def hadolint_ignores(lines: list[str], start: int,
                     global_codes: set[str] | None = None) -> set[str]:
    """hadolint codes ignored for the instruction at line *start*: ``# hadolint ignore=``
    comments directly above it, and ``# hadolint global ignore=`` anywhere in the file
    (*global_codes*, when the caller computed them once)."""
    out = set(global_hadolint_ignores(lines) if global_codes is None else global_codes)
    i = start - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        m = _HADOLINT_IGNORE.search(lines[i])
        if m and not m.group(1):
            out |= _codes(m.group(2))
        i -= 1
    return out


class Suppressions:
    """What a Dockerfile's comments suppress, read once per file and per instruction (so the
    work per finding is constant): the instruction a line belongs to, the ``# servelab:
    ignore=`` and ``# hadolint ignore=`` comments above it, the global hadolint ignores."""

    __slots__ = ("_ends", "_global", "_hadolint", "_lines", "_servelab", "_starts")

    def __init__(self, lines: list[str], spans: list[tuple[int, int]]) -> None:
        """*spans*: (first line, last line) of each instruction, 1-based, in order."""
        self._lines = lines
        self._starts = [a for a, _b in spans]
        self._ends = [b for _a, b in spans]
        self._global: set[str] | None = None
        self._servelab: dict[int, set[str]] = {}
        self._hadolint: dict[int, set[str]] = {}

    def start(self, line: int) -> int:
        """The first line of the instruction that holds *line* (else *line* itself)."""
        from bisect import bisect_right

        k = bisect_right(self._starts, line) - 1
        return self._starts[k] if k >= 0 and line <= self._ends[k] else line

    def servelab(self, start: int) -> set[str]:
        if start not in self._servelab:
            self._servelab[start] = suppressions(self._lines, start)
        return self._servelab[start]

    def hadolint(self, start: int) -> set[str]:
        if self._global is None:
            self._global = global_hadolint_ignores(self._lines)
        if start not in self._hadolint:
            self._hadolint[start] = hadolint_ignores(self._lines, start, self._global)
        return self._hadolint[start]


def unknown_suppressions(lines: list[str], known: set[str]) -> list[tuple[int, str]]:
    """(line, id) of rule ids in ``# servelab: ignore=`` comments that name no rule."""
    out: list[tuple[int, str]] = []
    for n, raw in enumerate(lines, start=1):
        m = _SUPPRESS.search(raw) if "servelab" in raw else None
        if m:
            for rid in (r.strip() for r in m.group(1).split(",")):
                if rid and not _known(rid, known):
                    out.append((n, rid))
    return out


