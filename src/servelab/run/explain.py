"""Why a verdict: each arm's failed checks, with their rule ids and the evidence measured.

Works on result.json dicts, as :mod:`servelab.run.aggregate` does, so a fresh run and artifacts
merged from several machines are explained alike. :func:`explain` hands back one
:class:`ArmExplanation` per arm; :mod:`servelab.run.summary` renders them in summary.md and
:mod:`servelab.github` turns the treatment's into annotations.

The evidence is what the stages measured, not the rule restated: the bytes of baked weights
and the layer (with the instruction that made it) that holds them, the uid the server ran as
at start, the digest a moving base tag resolved to, the container's telling log line, the
download it attempted, the findings that failed the vulnerability gate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

#: lint findings at these severities make the lint check fail (at the default fail-on) or are
#: named in its reason; infos are left to the SARIF file
_LINT_SEVERITIES = ("error", "warning")
#: smoke verdicts about a start that did not get to a good answer: their log tells why
_START_FAILURES = frozenset({"crashed", "not-ready", "start-failed", "request-failed"})
_TELLING = re.compile(r"error|exception|traceback|fatal|denied|refused|failed|cannot|unable",
                      re.IGNORECASE)
_SHOWN_FILES = 3
_SHOWN_FINDINGS = 5
_MAX_LINE = 240


@dataclass(frozen=True)
class FailedCheck:
    """One failed check of one arm, merged over the repeats where it failed alike."""

    arm: str
    stage: str
    #: the check as result.json's verdicts name it (lint, base-pinned, runs-as-root, crashed,
    #: vulnerability gate, ...)
    check: str
    message: str
    #: the rule or cause id: weights-baked, base-unpinned, root-user, download-attempt, ...
    rule: str | None = None
    evidence: tuple[str, ...] = ()
    fix: str | None = None
    file: str | None = None
    line: int | None = None
    #: "error" fails; "warning" is a lint warning named in the failed lint check
    severity: str = "error"
    repeats: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        """``lint weights-baked``, ``smoke crashed (download-attempt)``, ``vulnerability gate``."""
        if self.stage == "lint":
            return f"lint {self.rule}"
        if self.rule and self.rule != self.check:
            return f"{self.check} ({self.rule})"
        return self.check

    @property
    def key(self) -> tuple[str, str, str | None, str | None, int | None]:
        return (self.stage, self.check, self.rule, self.file, self.line)


@dataclass(frozen=True)
class ArmExplanation:
    """An arm's failed checks in run order (lint, build, scan, smoke)."""

    arm: str
    repeats: int
    failed: tuple[FailedCheck, ...]

    @property
    def ids(self) -> list[str]:
        """The rule or cause id of each failed check (else the check's name), once, in order."""
        return list(dict.fromkeys(f.rule or f.check for f in self.failed))


# ------------------------------------------------------------------------------- formatting


def human_bytes(n: float) -> str:
    for size, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _clip(text: str, limit: int = _MAX_LINE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def code(text: str, limit: int = _MAX_LINE) -> str:
    """*text* (a log line, an instruction) clipped to one line as a Markdown code span."""
    return "`" + _clip(text, limit).replace("`", "'") + "`"


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ------------------------------------------------------------------------------- evidence


def weights_evidence(result: Mapping[str, Any]) -> list[str]:
    """The baked weights the smoke stage found in the image's layers: bytes, files, layer."""
    report = _map(_get(result, "stages", "smoke", "record", "baked_weights"))
    files = [f for f in _list(report.get("files")) if isinstance(f, Mapping)]
    if not files:
        return []
    total = sum(_int(f.get("size")) or 0 for f in files)
    out = [f"the image holds {human_bytes(total)} of model weights in {len(files)} "
           f"file{'s' if len(files) != 1 else ''} (measured in its layers by the smoke stage)"]
    for f in files[:_SHOWN_FILES]:
        made = f" by {code(f['created_by'], 80)}" if f.get("created_by") else ""
        gone = ", deleted by a later layer but still pulled" if f.get("deleted_later") else ""
        size = human_bytes(_int(f.get("size")) or 0)
        out.append(f"{code(str(f.get('path')))}: {size} in layer {f.get('layer')}{made}{gone}")
    if len(files) > _SHOWN_FILES:
        out.append(f"and {len(files) - _SHOWN_FILES} more files")
    return out


def uid_evidence(result: Mapping[str, Any]) -> list[str]:
    """Who the server ran as: the uid at start and the image's USER."""
    user = _map(_get(result, "stages", "smoke", "record", "user"))
    uid = _int(user.get("euid_at_start"))
    if uid is None:
        uid = _int(user.get("euid_when_ready"))
    if uid is None:
        return []
    image_user = user.get("image_user") or "(none)"
    return [f"the server ran as uid {uid} at start (image USER {image_user})"]


def base_evidence(result: Mapping[str, Any]) -> list[str]:
    """The bases a tag (not a digest) named, and the digest each resolved to for this build."""
    out = []
    for b in _list(_get(result, "image", "base")):
        if isinstance(b, Mapping) and b.get("pinned") is False and b.get("ref"):
            digest = f" to {b['digest']}" if b.get("digest") else ""
            out.append(f"{code(str(b['ref']))} resolved{digest} for this build; the tag can "
                       "move to other bytes at any time")
    return out


def telling_line(lines: Sequence[str]) -> str | None:
    """The last log line that reads like an error, else the last non-empty line."""
    kept = [str(x).strip() for x in lines if str(x).strip()]
    for line in reversed(kept):
        if _TELLING.search(line):
            return line
    return kept[-1] if kept else None


_URL = re.compile(r"\b(?:https?|s3|gs|hf)://[^\s'\"<>)]+")


def last_url(lines: Sequence[str]) -> str | None:
    """The last address (http, https, s3, gs, hf) a log names: what a download reached for."""
    for line in reversed([str(x) for x in lines]):
        found = _URL.findall(line)
        if found:
            return str(found[-1])
    return None


def start_evidence(result: Mapping[str, Any]) -> list[str]:
    """Why a start failed: the diagnosed cause and its log line, the exit, the first failure."""
    smoke = _map(_get(result, "stages", "smoke", "record"))
    cause = _map(smoke.get("cause"))
    container = _map(smoke.get("container"))
    out = []
    lines = _list(container.get("log_tail"))
    if cause:
        download = cause.get("cause") == "download-attempt"
        out.append(f"cause `{cause.get('cause')}`: {cause.get('title')}")
        if cause.get("evidence"):
            what = "the download attempt" if download else "the telling log line"
            out.append(f"{what}: {code(cause['evidence'])}")
        url = last_url(lines) if download else None
        if url:
            out.append(f"the address it tried to reach: {code(url)}")
    else:
        line = telling_line(lines)
        if line:
            out.append(f"the telling log line: {code(line)}")
    if container.get("oom_killed"):
        out.append("the kernel killed it for memory (OOMKilled)")
    elif _int(container.get("exit_code")) is not None and not container.get("running"):
        out.append(f"the container exited with code {container['exit_code']}")
    failure = _get(smoke, "requests", "first_failure")
    if isinstance(failure, Mapping):
        out.append(f"request {failure.get('i')}: {failure.get('reason')}"
                   + (f" (body {code(failure['body'], 120)})" if failure.get("body") else ""))
    return out


def findings_evidence(result: Mapping[str, Any]) -> list[str]:
    """The findings that failed the vulnerability gate (the most severe first)."""
    gate = _map(_get(result, "stages", "scan", "record", "gate"))
    failing = [f for f in _list(gate.get("failing")) if isinstance(f, Mapping)]
    out = []
    for f in failing[:_SHOWN_FINDINGS]:
        fixed = f"fixed in {f['fixed']}" if f.get("fixed") else "no fix yet"
        out.append(f"{f.get('id')} ({f.get('severity')}) in {f.get('package')} "
                   f"{f.get('installed')}: {fixed}")
    if len(failing) > _SHOWN_FINDINGS:
        out.append(f"and {len(failing) - _SHOWN_FINDINGS} more (scan.md of the repeat lists all)")
    return out


_RULE_EVIDENCE = {
    "weights-baked": weights_evidence,
    "root-user": uid_evidence,
    "runs-as-root": uid_evidence,
    "base-unpinned": base_evidence,
    "base-pinned": base_evidence,
}


def _evidence(rule: str | None, result: Mapping[str, Any]) -> tuple[str, ...]:
    find = _RULE_EVIDENCE.get(rule or "")
    return tuple(find(result)) if find else ()


# ------------------------------------------------------------------------------- per stage


def _failing(result: Mapping[str, Any], stage: str) -> list[Mapping[str, Any]]:
    return [v for v in _list(result.get("verdicts"))
            if isinstance(v, Mapping) and v.get("stage") == stage and v.get("passed") is False]


def _lint_checks(arm: str, n: int, result: Mapping[str, Any]) -> Iterator[FailedCheck]:
    if not _failing(result, "lint"):
        return
    for f in _list(_get(result, "stages", "lint", "record", "findings")):
        if not isinstance(f, Mapping) or f.get("severity") not in _LINT_SEVERITIES:
            continue
        rule = str(f.get("rule") or "lint")
        evidence = _evidence(rule, result)
        if rule == "startup-download":
            evidence += tuple(e for e in start_evidence(result) if "download" in e)
        yield FailedCheck(arm, "lint", "lint", str(f.get("message") or ""), rule=rule,
                          evidence=evidence, fix=f.get("fix"), file=f.get("file"),
                          line=_int(f.get("line")), severity=str(f.get("severity")),
                          repeats=(n,))


def _build_checks(arm: str, n: int, result: Mapping[str, Any]) -> Iterator[FailedCheck]:
    for v in _failing(result, "build"):
        lines = [x for x in str(v.get("reason") or "").splitlines() if x.strip()]
        check = str(v.get("check"))
        rule = "base-unpinned" if check == "base-pinned" else None
        yield FailedCheck(arm, "build", check, lines[0] if lines else check, rule=rule,
                          evidence=tuple(_clip(x) for x in lines[1:6]) + _evidence(check, result),
                          repeats=(n,))


def _scan_checks(arm: str, n: int, result: Mapping[str, Any]) -> Iterator[FailedCheck]:
    for v in _failing(result, "scan"):
        yield FailedCheck(arm, "scan", str(v.get("check")), str(v.get("reason") or ""),
                          evidence=tuple(findings_evidence(result)),
                          fix="update the packages named (a newer base digest often does), or "
                          "record why a finding does not apply in scan.ignoreFile or scan.vex",
                          repeats=(n,))


def _smoke_checks(arm: str, n: int, result: Mapping[str, Any]) -> Iterator[FailedCheck]:
    failing = _failing(result, "smoke")
    problems = [v for v in failing if v.get("check") != "smoke"] or failing
    record = _map(_get(result, "stages", "smoke", "record"))
    fixes = {p.get("id"): p.get("fix") for p in _list(record.get("problems"))
             if isinstance(p, Mapping)}
    cause = _map(record.get("cause"))
    for v in problems:
        check = str(v.get("check"))
        message = str(v.get("reason") or "")
        if check == "smoke":  # the overall verdict: "<verdict>: <message>"
            check, _, message = message.partition(": ")
        rule = str(cause["cause"]) if check in _START_FAILURES and cause.get("cause") else None
        evidence = start_evidence(result) if check in _START_FAILURES else \
            list(_evidence(check, result))
        fix = fixes.get(check) or (cause.get("fix") if rule else None)
        yield FailedCheck(arm, "smoke", check, message, rule=rule, evidence=tuple(evidence),
                          fix=fix, repeats=(n,))


def _measured_weights(arm: str, n: int, result: Mapping[str, Any],
                      named: set[str]) -> Iterator[FailedCheck]:
    """Weights the smoke stage found when no check named them (lint did not see them)."""
    if "weights-baked" in named:
        return
    evidence = weights_evidence(result)
    if evidence:
        yield FailedCheck(arm, "smoke", "baked weights", evidence[0], rule="weights-baked",
                          evidence=tuple(evidence[1:]), severity="warning",
                          fix="mount the model at start (spec.model) instead of copying it "
                          "into the image", repeats=(n,))


def repeat_checks(result: Mapping[str, Any]) -> list[FailedCheck]:
    """The failed checks of one repeat of one arm (one result.json), in run order."""
    arm = str(result.get("arm") or "?")
    n = _int(result.get("repeat")) or 0
    out = [*_lint_checks(arm, n, result), *_build_checks(arm, n, result),
           *_scan_checks(arm, n, result), *_smoke_checks(arm, n, result)]
    out += _measured_weights(arm, n, result, {c.rule for c in out if c.rule})
    return out


def _merge(checks: Iterable[FailedCheck]) -> list[FailedCheck]:
    """One entry per (stage, check, rule, place), with the repeats where it failed."""
    merged: dict[tuple[str, str, str | None, str | None, int | None], FailedCheck] = {}
    for c in checks:
        seen = merged.get(c.key)
        if seen is None:
            merged[c.key] = c
        else:
            merged[c.key] = replace(seen, repeats=tuple(sorted({*seen.repeats, *c.repeats})),
                                    evidence=seen.evidence or c.evidence)
    return list(merged.values())


def explain(results: Iterable[Mapping[str, Any]]) -> list[ArmExplanation]:
    """Each arm's failed checks over its repeats: control first, then treatment, then others."""
    by_arm: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        by_arm.setdefault(str(r.get("arm") or "?"), []).append(r)
    order = sorted(by_arm, key=lambda a: ({"control": 0, "treatment": 1}.get(a, 2), a))
    out = []
    for arm in order:
        rows = sorted(by_arm[arm], key=lambda r: _int(r.get("repeat")) or 0)
        checks = _merge(c for r in rows for c in repeat_checks(r))
        out.append(ArmExplanation(arm, len(rows), tuple(checks)))
    return out
