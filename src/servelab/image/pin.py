"""Pin every tag-only ``FROM`` of a Dockerfile to ``name:tag@sha256:...`` by asking the registry.

API::

    report = pin_file(Path("Dockerfile"), check=False)   # -> PinReport (findings + what changed)
    froms = scan_froms(text)                              # every FROM with its exact position

Only the image word of each FROM line is replaced; everything else (flags, ``AS name``,
comments, blank lines, line endings, a BOM, the file mode) is kept byte for byte, and the file
is written atomically (a temporary file in the same directory, then rename). With ``check``
the file is never written and the registry is not asked. The digest is the one the registry
reports for the tag (``Docker-Content-Digest`` of a manifest HEAD with OCI and Docker index and
manifest Accept types), i.e. the multi-arch index digest when the tag points to an index.

Not rewritten, but reported: ``FROM $ARG`` forms (fix the ARG's default instead), ``scratch``
and references to earlier stages need nothing. ``$ARG`` forms are substituted as ``servelab
lint`` substitutes them (:func:`servelab.lint.words.process_word`: global ARG defaults and
every BuildKit word operator), so ``pin --check`` and lint judge the same line the same way.

The Dockerfile is read with :mod:`servelab.textio` (a regular file, at most 1 MiB by
default, UTF-8). A registry that cannot be reached is a :class:`CapabilityError` (exit 3),
not a finding; a tag the registry does not know is a finding (exit 1).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from servelab.errors import ExitCode, InputError, ServelabError
from servelab.findings import Finding, FindingsReport, Rule, Severity
from servelab.image.ref import pinned_digest
from servelab.lint.parse import check_nesting
from servelab.lint.words import PREDEFINED, process_word
from servelab.textio import TEXT_BYTES, decode, read_bytes, write_file

_HEREDOC = re.compile(r"<<-?\s*([\"']?)([A-Za-z_][\w.-]*)\1")
MAX_BYTES = TEXT_BYTES.default

FALLBACK_RULE = Rule(
    "base-unpinned",
    Severity.ERROR,
    "FROM image not pinned by digest",
    "A tag is a moving pointer: the same Dockerfile builds on a different base tomorrow, so "
    "the image cannot be rebuilt bit for bit.",
    "pin the base: FROM name:tag@sha256:<digest> (servelab pin DOCKERFILE does it)",
)
ARG_RULE = Rule(
    "base-arg",
    Severity.WARNING,
    "FROM names its image through an ARG",
    "servelab pin rewrites image words, not ARG defaults: the value comes from the ARG's "
    "default or a --build-arg.",
    "pin the ARG's default (ARG BASE=name:tag@sha256:...) or the value you pass at build time",
)


def base_unpinned_rule() -> Rule:
    """The lint rule ``base-unpinned`` (its text is shared), or a copy when lint is absent."""
    try:
        from servelab.lint.rules import RULES
    except ImportError:
        return FALLBACK_RULE
    return RULES.rules.get("base-unpinned", FALLBACK_RULE)


@dataclass
class FromLine:
    """One FROM: where its image word is (1-based line, 0-based columns) and what it is."""

    line: int
    start: int
    end: int
    image: str
    stage: str | None
    #: pinned | unpinned | arg | stage | scratch
    status: str
    #: the image after substituting global ARG defaults (for status "arg"), if any
    resolved: str | None = None


def _directives_end(lines: list[str]) -> tuple[int, str]:
    """(index of the first line after the parser directives, escape character), read as
    lint's frontend reads them (any order, only at the top)."""
    from servelab.lint.frontend import directives

    d = directives(lines)
    return len(d.found), d.escape


def _tokens(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", text)]


def _substitute(word: str, args: dict[str, str], escape: str = "\\") -> str | None:
    """*word* with ARG values and ``${NAME:-default}`` forms substituted as lint does; None
    when a name has no value."""
    exp = process_word(word, args.get, escape)
    return None if exp.unresolved or exp.error else exp.value


def _classify(image: str, stages: set[str], args: dict[str, str],
              escape: str = "\\") -> tuple[str, str | None]:
    low = image.lower()
    if low == "scratch":
        return "scratch", None
    if "$" in image:
        return "arg", _substitute(image, args, escape)
    if low in stages:
        return "stage", None
    return ("pinned" if pinned_digest(image) else "unpinned"), None


def _global_arg(text: str, args: dict[str, str], escape: str = "\\") -> None:
    """An ARG before the first FROM, valued as lint's parse.global_scope values it."""
    for _s, _e, tok in _tokens(text)[1:]:
        name, eq, value = tok.partition("=")
        if eq:
            args[name] = process_word(value, args.get, escape).value
        # declared again without a value: BuildKit keeps the value it has


def _logical(lines: list[str], i: int, escape: str) -> int:
    """Index of the last physical line of the instruction starting at line *i*."""
    j = i
    while j < len(lines) and lines[j].rstrip().endswith(escape):
        j += 1
        while j < len(lines) and lines[j].strip().startswith("#"):
            j += 1
    return min(j, len(lines) - 1)


def scan_froms(text: str, name: str = "Dockerfile") -> list[FromLine]:
    """Every FROM instruction of a Dockerfile, with the position of its image word;
    InputError when ``${...}`` nests deeper than lint allows (*name* names the file)."""
    lines = text.splitlines()
    check_nesting(lines, name)
    i, escape = _directives_end(lines)
    out: list[FromLine] = []
    stages: set[str] = set()
    args: dict[str, str] = dict(PREDEFINED)
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        end = _logical(lines, i, escape)
        keyword = stripped.split(None, 1)[0].upper()
        if keyword == "FROM":
            fl = _from_line(lines, i, end, escape=escape, stages=stages, args=args)
            if fl is not None:
                out.append(fl)
                if fl.stage:
                    stages.add(fl.stage)
        elif keyword == "ARG" and not out:
            _global_arg(stripped, args, escape)
        i = _skip_heredocs(lines, i, end)
    return out


def _skip_heredocs(lines: list[str], i: int, end: int) -> int:
    body = " ".join(lines[i : end + 1])
    names = [m.group(2) for m in _HEREDOC.finditer(body)]
    j = end + 1
    for name in names:
        while j < len(lines) and lines[j].strip() != name:
            j += 1
        j += 1
    return j


def _from_line(lines: list[str], i: int, end: int, *, escape: str, stages: set[str],
               args: dict[str, str]) -> FromLine | None:
    words: list[tuple[int, int, int, str]] = []  # (line index, start, end, word)
    for n in range(i, end + 1):
        raw = lines[n]
        if n > i and raw.strip().startswith("#"):
            continue
        body = raw.rstrip()
        if n < end and body.endswith(escape):
            body = body[:-1]
        words += [(n, s, e, w) for s, e, w in _tokens(body)]
    words = words[1:]  # the FROM keyword
    while words and words[0][3].startswith("--"):
        words = words[1:]
    if not words:
        return None
    n, s, e, image = words[0]
    stage = words[2][3].lower() if len(words) >= 3 and words[1][3].lower() == "as" else None
    status, resolved = _classify(image, stages, args, escape)
    return FromLine(n + 1, s, e, image, stage, status, resolved)


# ---------------------------------------------------------------------------- pinning


@dataclass
class PinReport:
    file: str
    findings: FindingsReport
    pinned: list[dict[str, object]] = field(default_factory=list)
    changed: bool = False

    @property
    def exit_code(self) -> int:
        return 1 if self.findings.fails("error") else 0

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "changed": self.changed, "pinned": list(self.pinned),
                "findings": [f.to_dict() for f in self.findings.sorted_findings()]}


def read_dockerfile(path: Path) -> tuple[bytes, str]:
    """(BOM bytes or b"", text) of a Dockerfile; InputError for a missing file, one that is not
    a regular file, over the size cap, binary, UTF-16/32 or otherwise not UTF-8."""
    raw = read_bytes(path, max_bytes=TEXT_BYTES, what="Dockerfile",
                     hint="check that this is a Dockerfile")
    bom = b"\xef\xbb\xbf" if raw.startswith(b"\xef\xbb\xbf") else b""
    return bom, decode(raw, str(path), hint="save the Dockerfile as UTF-8", what="Dockerfile")


def resolve_digest(image: str) -> str:
    """The digest the registry reports for *image* (name[:tag])."""
    from servelab.image.ref import ImageRef
    from servelab.image.registry import RegistryClient

    return RegistryClient().head_manifest(ImageRef.parse(image)).digest


def rewrite(text: str, replacements: dict[int, tuple[int, int, str]]) -> str:
    """*text* with, per 1-based line, columns [start, end) replaced; line endings kept."""
    parts = text.splitlines(keepends=True)
    for line, (start, end, new) in replacements.items():
        raw = parts[line - 1]
        body = raw.rstrip("\r\n")
        parts[line - 1] = body[:start] + new + body[end:] + raw[len(body):]
    return "".join(parts)


def _finding(rule: Rule, fl: FromLine, path: str, message: str) -> Finding:
    return Finding(rule.id, rule.severity, message, file=path, line=fl.line,
                   column=fl.start + 1, fix=rule.fix, source="servelab pin",
                   context={"image": fl.image})


def pin_file(path: Path, *, check: bool = False,
             resolve: Callable[[str], str] | None = None) -> PinReport:
    """Pin *path*'s tag-only FROMs in place (or, with *check*, only list them). *resolve*
    maps name[:tag] to a digest (default: ask the registry)."""
    resolver = resolve or resolve_digest
    bom, text = read_dockerfile(path)
    shown = str(path)
    rule = base_unpinned_rule()
    report = PinReport(shown, FindingsReport("servelab pin", [], {rule.id: rule,
                                                                   ARG_RULE.id: ARG_RULE},
                                             files=[shown]))
    froms = scan_froms(text, shown)
    if not froms:
        raise InputError("no FROM instruction", file=shown, hint="is this a Dockerfile?")
    replacements: dict[int, tuple[int, int, str]] = {}
    for fl in froms:
        _judge(fl, report, rule=rule, check=check, resolver=resolver,
               replacements=replacements)
    if replacements and not check:
        write_file(path, bom + rewrite(text, replacements).encode("utf-8"),
                   what="the pinned Dockerfile", onto_input=True)
        report.changed = True
    return report


def _judge(fl: FromLine, report: PinReport, *, rule: Rule, check: bool,
           resolver: Callable[[str], str], replacements: dict[int, tuple[int, int, str]]) -> None:
    shown = report.file
    f = report.findings.findings
    if fl.status == "unpinned":
        if check:
            f.append(_finding(rule, fl, shown, f"FROM {fl.image} is not pinned by digest"))
            return
        try:
            digest = resolver(fl.image)
        except ServelabError as e:
            if e.exit_code >= ExitCode.MISSING_TOOL:  # the registry is unreachable: exit 3
                raise
            f.append(_finding(rule, fl, shown, f"FROM {fl.image}: could not resolve the tag: "
                              f"{e.message}"))
            return
        new = f"{fl.image}@{digest}"
        replacements[fl.line] = (fl.start, fl.end, new)
        report.pinned.append({"line": fl.line, "from": fl.image, "to": new})
    elif fl.status == "arg":
        if fl.resolved is not None and not pinned_digest(fl.resolved):
            f.append(_finding(rule, fl, shown, f"FROM {fl.image} resolves to {fl.resolved}, "
                              "which is not pinned (pin the ARG default; not rewritten)"))
        elif fl.resolved is None:
            f.append(_finding(ARG_RULE, fl, shown, f"FROM {fl.image}: the ARG has no default; "
                              "its value must be pinned where it is passed (not rewritten)"))
