"""Python files the running interpreter cannot parse, read as far as they can be.

servelab runs on Python 3.11; an application may use newer syntax (3.12's ``type X = int``
and generics ``def f[T](x: T)``, nested same-quote f-strings ``f"{d["k"]}"``), or hold a
line that does not parse at all. :func:`scan` reads such a file in two tries, each bounded:

1. the newer forms are rewritten to 3.11's (type parameters dropped, ``type`` statements
   blanked) and each line that still does not parse is blanked (a block header becomes
   ``if True:``), at most :data:`MAX_REPAIRS` lines, then :func:`pyscan.scan` reads the rest
   with its scopes, hooks and calls;
2. failing that, a token scan (:mod:`tokenize`, which reads those forms) finds the imports
   and the hub loads with literal ids, all taken as run at start.

The blanked lines are scanned by the token scan too, so a hub load on one is still found.
Either way the caller gets the reason to put in a coverage note: the file was not read by
the parser.
"""

from __future__ import annotations

import io
import re
import tokenize

from servelab.lint import pyscan

#: lines of one file blanked before the token scan takes over
MAX_REPAIRS = 32
#: characters of a file past which it is not repaired (each repair parses it again) but
#: read by the token scan at once
MAX_REPAIR_CHARS = 64 * 1024

_TYPE_STMT = re.compile(r"^(\s*)type\s+[A-Za-z_]\w*\s*(\[[^\]=]*\])?\s*=")
_TYPE_PARAMS = re.compile(r"^(\s*(?:async\s+)?(?:def|class)\s+[A-Za-z_]\w*)\s*\[[^\]]*\]")
_HEADER = re.compile(r"^(\s*)\S.*:\s*(#.*)?$")
#: the dotted prefix of a call is at most 20 names: unbounded, a line of 30,000 ``a.`` with no
#: load at the end was tried from each name to the end (quadratic: over 45 s for 60 KB)
_CALL = re.compile(
    r"\b((?:[A-Za-z_]\w*\.){0,20}(?:snapshot_download|hf_hub_download|from_pretrained|pipeline|"
    r"SentenceTransformer|CrossEncoder))\s*\(\s*(?:[A-Za-z_]\w*\s*=\s*)?[rbuRBU]?"
    r"([\"'])([^\"'\n]{1,300})\2")
_CALLED = re.compile(r"\b((?:[A-Za-z_]\w*\.){0,20}(?:snapshot_download|hf_hub_download|"
                     r"from_pretrained|pipeline|SentenceTransformer|CrossEncoder))\s*\(")
_KWARG = re.compile(r"\b(?:model|model_id|model_name|model_name_or_path|repo_id|"
                    r"pretrained_model_name_or_path)\s*=\s*[rbuRBU]?([\"'])([^\"'\n]{1,300})\1")
_IMPORT = re.compile(r"^\s*(?:from\s+(\.*)([\w.]*)\s+import\s+(.+)|import\s+(.+))$")


def scan(text: str, env: pyscan.EnvLookup) -> tuple[pyscan.Module | None, str]:
    """(the module's facts, or None; why it was not read by the parser)."""
    lines = [_rewrite(line) for line in text.split("\n")]
    blanked: list[int] = []
    for _try in range(MAX_REPAIRS + 1 if len(text) <= MAX_REPAIR_CHARS else 0):
        got = _parse(lines)
        if got is None:
            mod = pyscan.scan("\n".join(lines), env)
            if mod is None:
                break
            _add_loads(mod, text, blanked)
            shown = ", ".join(str(n) for n in blanked[:5]) + (" ..." if len(blanked) > 5 else "")
            why = ("Python 3.11's parser cannot read it (newer syntax or an error); read with "
                   "newer forms rewritten" + (f" and line(s) {shown} blanked (searched for hub "
                                              "loads only)" if blanked else ""))
            return mod, why
        n = got
        if n < 1 or n > len(lines) or n in blanked:
            break
        blanked.append(n)
        lines[n - 1] = _blank(lines[n - 1])
    mod = _tokens(text)
    return mod, ("Python 3.11's parser cannot read it, and repairing it did not help "
                 f"(servelab repairs at most {MAX_REPAIRS} lines, MAX_REPAIRS, of files up to "
                 f"{MAX_REPAIR_CHARS} characters, MAX_REPAIR_CHARS): read by a token scan for "
                 "imports and hub loads only, all taken as run at start")


def _rewrite(line: str) -> str:
    if m := _TYPE_STMT.match(line):
        return f"{m.group(1)}pass"
    return _TYPE_PARAMS.sub(r"\1", line, count=1)


def _blank(line: str) -> str:
    indent = line[:len(line) - len(line.lstrip())]
    return f"{indent}if True:" if _HEADER.match(line) else f"{indent}pass"


def _parse(lines: list[str]) -> int | None:
    """None when *lines* parse, else the line of the first error (0: unknown)."""
    try:
        compile("\n".join(lines), "<module>", "exec", 1024)  # PyCF_ONLY_AST
    except SyntaxError as e:
        return e.lineno or 0
    except (ValueError, RecursionError, MemoryError):
        return 0
    return None


def _add_loads(mod: pyscan.Module, text: str, lines: list[int]) -> None:
    """Hub loads with literal ids on the blanked *lines*, at module level."""
    rows = text.split("\n")
    for n in lines:
        for load in _loads_in(rows[n - 1], n):
            mod.top.loads.append(load)


def _loads_in(line: str, n: int) -> list[pyscan.Load]:
    out = []
    found = [(m.group(1), m.group(3)) for m in _CALL.finditer(line)]
    if call := _CALLED.search(line):
        found += [(call.group(1), m.group(2)) for m in _KWARG.finditer(line, call.end())]
    for name, value in dict.fromkeys(found):
        last = name.rsplit(".", 1)[-1]
        if last in {"snapshot_download", "hf_hub_download"}:
            if not pyscan.local_value(value):
                out.append(pyscan.Load(f"{last}({value!r})", n))
        elif pyscan.hub_id(value) and (last != "from_pretrained" or "." in name):
            out.append(pyscan.Load(f"{name if last == 'from_pretrained' else last}({value!r})",
                                   n))
    return out


def _tokens(text: str) -> pyscan.Module:
    """Imports and hub loads of *text* by lines, the lines found by :mod:`tokenize` (a line
    it cannot tokenize is still searched)."""
    mod = pyscan.Module()
    logical = _logical_lines(text)
    for n, line in logical:
        if m := _IMPORT.match(line):
            _add_import(mod, m)
        mod.top.loads += _loads_in(line, n)
    return mod


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each logical line, comments removed; the physical lines when
    tokenize gives up."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in {tokenize.NEWLINE, tokenize.ENDMARKER}:
                if parts:
                    out.append((start, " ".join(parts)))
                parts = []
            elif tok.type not in {tokenize.COMMENT, tokenize.NL, tokenize.INDENT,
                                  tokenize.DEDENT}:
                if not parts:
                    start = tok.start[0]
                parts.append(tok.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [(i, line) for i, line in enumerate(text.split("\n"), start=1)]
    return [(n, _joined(t)) for n, t in out]


def _joined(text: str) -> str:
    """Tokens joined by spaces, back to source-like text around dots and brackets."""
    return re.sub(r"\s*([.(),=\[\]])\s*", r"\1", text).replace(",", ", ")


def _add_import(mod: pyscan.Module, m: re.Match[str]) -> None:
    if m.group(4) is not None:
        for part in m.group(4).split(","):
            name, _as, alias = part.strip().partition(" as ")
            if name:
                mod.top.imports.append((name.strip(), 0, []))
                local = alias.strip() or name.split(".", 1)[0]
                mod.aliases.setdefault(local, (name if alias else local, "", 0))
        return
    module, level = m.group(2), len(m.group(1))
    names = []
    for part in m.group(3).strip("() ").split(","):
        name, _as, alias = part.strip().partition(" as ")
        if name.strip() and name.strip() != "*":
            names.append((name.strip(), alias.strip() or name.strip()))
    mod.top.imports.append((module, level, names))
    for name, local in names:
        mod.aliases[local] = (module, name, level)
