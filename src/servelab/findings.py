"""The finding model shared by every checker (validate, lint, k8s-check, scan gate), and the
one ``--fail-on`` grammar of every command (:func:`parse_fail_on`, docs/output.md); and
:class:`Record`, the base of the mutable records on ``servelab lint``'s path."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from functools import lru_cache
from typing import Any, Generic, NamedTuple, TypeVar

from servelab.errors import InputError

# ------------------------------------------------------------------- Record
# Mutable records for the classes ``servelab lint`` loads, without :mod:`dataclasses`.
#
# On Python 3.11, importing :mod:`dataclasses` (it imports :mod:`inspect`, :mod:`ast`,
# :mod:`dis`) and generating the methods of the eighteen classes a lint run loads took about
# 40 ms of its 200 ms start (bench/lint_speed.py). So the classes on that path are written out:
# value types as :class:`typing.NamedTuple`, mutable ones as ``__slots__`` classes with an
# explicit ``__init__`` that derive from :class:`Record`, which gives them what the dataclass
# decorator gave: a field-by-field ``__repr__`` and ``__eq__`` (no hash: they are mutable), and
# :meth:`Record.copy` in place of :func:`dataclasses.replace`.
#
# Everywhere else (the build, scan, smoke and run stages) dataclasses stay.

R = TypeVar("R", bound="Record")


#: field names per class, worked out once: copy() runs for every RUN a lint reads
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in klass.__dict__.get("__slots__", ()):
            if name not in names:
                names.append(name)
    _FIELDS[cls] = tuple(names)
    return _FIELDS[cls]


class Record:
    """Base of a mutable ``__slots__`` record: fields are the slots, in declaration order."""

    __slots__ = ()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return _fields(cls)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.field_names())
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.field_names())

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq=True

    def copy(self: R, **changes: Any) -> R:
        """A shallow copy with *changes* applied (``dataclasses.replace``); TypeError names
        a field this record does not have."""
        names = self.field_names()
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field(s) {', '.join(unknown)}")
        out = object.__new__(type(self))
        for n in names:
            object.__setattr__(out, n, changes[n] if n in changes else getattr(self, n))
        return out


# ------------------------------------------------------------------- findings

CheckT = TypeVar("CheckT", bound=Callable[..., Any])


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or info)") from None


FAIL_ON_CHOICES = ("error", "warning", "info", "none")
#: Trivy's severities, most severe first.
TRIVY_SEVERITIES = ("CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN")
#: The one mapping between the two vocabularies: a Trivy severity's finding severity. It is
#: also the SARIF level of a vulnerability (error, warning, note).
TRIVY_LEVEL: dict[str, Severity] = {
    "CRITICAL": Severity.ERROR,
    "HIGH": Severity.ERROR,
    "MEDIUM": Severity.WARNING,
    "LOW": Severity.INFO,
    "UNKNOWN": Severity.INFO,
}
#: Every word ``--fail-on`` accepts (any case); ``none`` stands alone.
FAIL_ON_WORDS = ("error", "warning", "info", *TRIVY_SEVERITIES, "none")
FAIL_ON_GRAMMAR = (
    "none, or a comma-separated list (any case) of error, warning, info, CRITICAL, HIGH, "
    "MEDIUM, LOW, UNKNOWN (see docs/output.md)"
)
#: What ``--help`` says about ``--fail-on`` (every command that has the flag).
FAIL_ON_HELP = (
    "none, or a comma-separated list (any case) of finding levels error|warning|info (that "
    "level and above) and Trivy severities CRITICAL|HIGH|MEDIUM|LOW|UNKNOWN (each itself). "
    "One mapping joins them: CRITICAL,HIGH = error, MEDIUM = warning, LOW,UNKNOWN = info; on "
    "findings a Trivy severity means its level and above, on a scan a level means every "
    "Trivy severity at that level and above"
)


class FailOn(NamedTuple):
    """A parsed ``--fail-on`` value: what fails, in both vocabularies (:func:`parse_fail_on`)."""

    #: the value, canonical: levels lower case, Trivy severities upper case, "none" alone
    text: str
    #: finding severities that fail (a threshold: a level and every level above it)
    levels: frozenset[Severity]
    #: Trivy severities that fail, most severe first (a set: each one named or implied)
    trivy: tuple[str, ...]

    def fails(self, severity: Severity) -> bool:
        """Whether a finding of *severity* fails."""
        return severity in self.levels

    def fails_trivy(self, severity: str) -> bool:
        """Whether a vulnerability or secret of Trivy *severity* fails."""
        return severity.upper() in self.trivy


def _word(raw: str) -> str:
    word = raw.strip()
    if word.upper() in TRIVY_LEVEL:
        return word.upper()
    if word.lower() in FAIL_ON_CHOICES:
        return word.lower()
    raise InputError(f"unknown severity {word!r} in --fail-on", hint=f"use {FAIL_ON_GRAMMAR}")


def _lowest(levels: Iterable[Severity]) -> Severity | None:
    return min(levels, key=lambda s: s.rank, default=None)


def parse_fail_on(value: str | Iterable[str]) -> FailOn:
    """The one ``--fail-on`` grammar, for finding checks and Trivy gates alike.

    *value* is the flag's text (``"warning"``, ``"CRITICAL,HIGH"``, ``"none"``) or a list of
    words (an experiment's ``scan.failOn``; an empty list fails on nothing). A level
    (error, warning, info) fails findings at that level and above, and the Trivy severities
    whose :data:`TRIVY_LEVEL` is that level or above. A Trivy severity fails itself, and on
    findings, its level and above. InputError (exit 2) for an empty text, an unknown word, or
    ``none`` with others.
    """
    raw = value.split(",") if isinstance(value, str) else list(value)
    words = list(dict.fromkeys(_word(w) for w in raw if w.strip()))
    if isinstance(value, str) and not words:
        raise InputError("--fail-on is empty", hint=f"use {FAIL_ON_GRAMMAR}")
    if "none" in words and len(words) > 1:
        raise InputError("--fail-on none cannot be combined with severities",
                         hint="give none alone, or only severities")
    named = [Severity(w) for w in words if w in ("error", "warning", "info")]
    named_trivy = [w for w in words if w in TRIVY_LEVEL]
    floor = _lowest([*named, *(TRIVY_LEVEL[w] for w in named_trivy)])
    levels = frozenset(s for s in Severity if floor is not None and s.rank >= floor.rank)
    trivy_floor = _lowest(named)
    trivy = tuple(t for t in TRIVY_SEVERITIES if t in named_trivy or (
        trivy_floor is not None and TRIVY_LEVEL[t].rank >= trivy_floor.rank))
    return FailOn(",".join(words) or "none", levels, trivy)


@lru_cache(maxsize=64)
def _parsed(text: str) -> FailOn:
    return parse_fail_on(text)


def reaches(severity: Severity, fail_on: str) -> bool:
    """Whether a finding of *severity* fails a check run with ``--fail-on fail_on``."""
    return _parsed(fail_on).fails(severity)


class Rule(NamedTuple):
    """A rule's public description: its id is part of servelab's interface."""

    id: str
    severity: Severity
    summary: str
    rationale: str = ""
    fix: str = ""
    help_uri: str = ""


class CoverageNote(NamedTuple):
    """A part of an input a checker did not fully read: a bound (size, count, depth, time)
    reached, a file it could not parse, a link loop. Its :meth:`text` is what every output
    shows: ``not fully checked: <what>, <why>``; a report that holds one is never a plain
    pass but "partly checked" (docs/limits.md)."""

    #: what was not fully read (``app/main.py``, ``the imports of uvicorn app.main:app``)
    what: str
    #: why, with the bound's value and how to raise it when it can be raised
    why: str
    #: the checked file it belongs to (a Dockerfile, a manifest), "" when none
    file: str = ""
    #: its line in *file*, 0 when none
    line: int = 0

    def text(self) -> str:
        return f"not fully checked: {self.what}, {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "why": self.why, "file": self.file or None,
                "line": self.line or None, "text": self.text()}


#: the verdict of a report: findings, none and everything read, none but something unread
VERDICT_FINDINGS = "findings"
VERDICT_PASSED = "passed"
VERDICT_PARTLY = "partly checked"


class Finding(Record):
    """One problem found: a rule, its severity, a message, and where (file, line, column)."""

    __slots__ = (
        "column",
        "context",
        "file",
        "fix",
        "line",
        "message",
        "rule_id",
        "severity",
        "source",
    )

    def __init__(self, rule_id: str, severity: Severity, message: str, file: str | None = None,  # noqa: PLR0917
                 line: int | None = None, column: int | None = None, fix: str | None = None,
                 source: str = "servelab", context: dict[str, str] | None = None) -> None:
        self.rule_id = rule_id
        self.severity = severity
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.fix = fix
        self.source = source
        #: Extra location context (JSON path, object, container, stage, ...).
        self.context: dict[str, str] = {} if context is None else context

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.file or "", self.line or 0, self.column or 0, self.rule_id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule_id,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "fix": self.fix,
            "source": self.source,
        }
        if self.context:
            out["context"] = dict(self.context)
        return out


class FindingsReport(Record):
    """What a checker returns: findings, the rules they refer to, and what was checked."""

    __slots__ = ("coverage", "files", "findings", "notes", "rules", "settings", "tool")

    def __init__(self, tool: str, findings: list[Finding], rules: dict[str, Rule],
                 files: list[str] | None = None, notes: list[str] | None = None, *,
                 settings: dict[str, Any] | None = None,
                 coverage: list[CoverageNote] | None = None) -> None:
        self.tool = tool
        self.findings = findings
        self.rules = rules
        self.files: list[str] = [] if files is None else files
        self.notes: list[str] = [] if notes is None else notes
        #: the settings file used (``file``) and what it changed (``disabled`` rule ids,
        #: ``severity``, ``hadolint``); None when no settings file was used
        self.settings = settings
        #: what was not fully read (bounds reached, files not parsed), each said once
        self.coverage: list[CoverageNote] = [] if coverage is None else coverage

    def add_coverage(self, notes: Iterable[CoverageNote]) -> None:
        """Add *notes*, each (what, why, file) once."""
        seen = {(n.what, n.why, n.file) for n in self.coverage}
        for n in notes:
            if (n.what, n.why, n.file) not in seen:
                seen.add((n.what, n.why, n.file))
                self.coverage.append(n)

    def verdict(self) -> str:
        """:data:`VERDICT_FINDINGS`, else :data:`VERDICT_PARTLY` when something was not
        fully read, else :data:`VERDICT_PASSED`. The exit code follows the findings only
        (``--fail-on``): a partly checked report with no findings exits 0, and says so."""
        if self.findings:
            return VERDICT_FINDINGS
        return VERDICT_PARTLY if self.coverage else VERDICT_PASSED

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=Finding.sort_key)

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def fails(self, fail_on: str) -> bool:
        return any(reaches(f.severity, fail_on) for f in self.findings)


class RuleRegistry(Generic[CheckT]):
    """One registry of rules and their checks: lint, k8s-check and the GPU rules each hold one.

    ::

        RULES = RuleRegistry[Check](docs_uri="https://.../docs/rules.md#")
        @RULES.rule("base-unpinned", Severity.ERROR, "summary", rationale="...", fix="...")
        def check_base_unpinned(ctx): ...
        RULES.add(Rule(...))              # a rule with no check function (reported elsewhere)
        RULES.rules["base-unpinned"]      # the public Rule, help_uri filled in
        for rule, check in RULES.checks: ...

    A rule id is registered once: a second registration is a programming error (ValueError).
    """

    def __init__(self, docs_uri: str = "") -> None:
        self.docs_uri = docs_uri
        #: Every rule id, in registration (documentation) order.
        self.rules: dict[str, Rule] = {}
        #: (rule, check) pairs, in registration order.
        self.checks: list[tuple[Rule, CheckT]] = []

    def add(self, rule: Rule) -> Rule:
        """Register *rule* (no check function); its help_uri defaults to the docs anchor."""
        if rule.id in self.rules:
            raise ValueError(f"rule {rule.id!r} is registered twice")
        if not rule.help_uri and self.docs_uri:
            rule = rule._replace(help_uri=f"{self.docs_uri}{rule.id}")
        self.rules[rule.id] = rule
        return rule

    def rule(self, rule_id: str, severity: Severity, summary: str, *, rationale: str,
             fix: str) -> Callable[[CheckT], CheckT]:
        """Register the decorated function as the check of a new rule."""
        meta = self.add(Rule(rule_id, severity, summary, rationale, fix))

        def decorate(check: CheckT) -> CheckT:
            self.checks.append((meta, check))
            return check

        return decorate

    def __getitem__(self, rule_id: str) -> Rule:
        return self.rules[rule_id]

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self.rules

    def __iter__(self) -> Iterator[str]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)
