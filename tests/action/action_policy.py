"""The project's own rules for workflows, on top of GitHub's schema and zizmor.

Each problem is named ``policy:<id>``; negative fixtures in tests/data/action/negative name the
ones they must trigger with ``# expect: policy:<id>`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

PINNED_RE = re.compile(
    r"^\s*-?\s*uses:\s*([\w.-]+/[\w./-]+)@([0-9a-f]{40})\s+#\s*v\d+\.\d+\.\d+\s*$"
)
USES_RE = re.compile(r"^\s*-?\s*uses:\s*(\S+)")
FORK_TRIGGERS = {"pull_request", "pull_request_target", "workflow_run", "issue_comment"}
READ_ONLY = {"read", "none"}
#: write scopes that signing an attestation needs, allowed only where one is made
ATTEST_SCOPES = {"id-token", "attestations"}


def triggers(doc: Mapping[Any, Any]) -> set[str]:
    on = doc.get("on", doc.get(True))  # PyYAML reads the key `on` as True
    if isinstance(on, str):
        return {on}
    if isinstance(on, list):
        return {str(t) for t in on}
    if isinstance(on, Mapping):
        return {str(t) for t in on}
    return set()


def _steps(job: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for step in job.get("steps") or []:
        if isinstance(step, Mapping):
            yield step


def _uses(step: Mapping[str, Any]) -> str:
    return str(step.get("uses") or "")


def _is_self_hosted(job: Mapping[str, Any]) -> bool:
    runs_on = job.get("runs-on")
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    return "self-hosted" in [str(x) for x in labels]


def _is_servelab(step: Mapping[str, Any]) -> bool:
    uses = _uses(step)
    return uses in ("./", "$/") or uses.split("@", 1)[0].endswith("/servelab")


def _comments(job: Mapping[str, Any]) -> bool:
    """Whether a step of the job uses servelab's action with pr-comment on."""
    return any(_is_servelab(s) and str((s.get("with") or {}).get("pr-comment", "")).lower()
               == "true" for s in _steps(job))


def _permission_problems(job: Mapping[str, Any]) -> set[str]:
    perms = job.get("permissions")
    if not isinstance(perms, Mapping):
        return {"policy:permissions"}
    uploads_sarif = any("codeql-action/upload-sarif" in _uses(s) for s in _steps(job))
    attests = any("actions/attest-build-provenance" in _uses(s) for s in _steps(job))
    pushes = attests or any(_uses(s) in ("./", "$/") and (s.get("with") or {}).get("push")
                            for s in _steps(job))
    found: set[str] = set()
    for scope, level in perms.items():
        if scope == "security-events" and level == "write":
            if not uploads_sarif:
                found.add("policy:security-events")
        elif scope in ATTEST_SCOPES and level == "write":
            if not attests:
                found.add("policy:attest")
        elif scope == "packages" and level == "write":
            if not pushes:
                found.add("policy:packages")
        elif scope == "pull-requests" and level == "write":
            if not _comments(job):
                found.add("policy:pull-requests")
        elif level not in READ_ONLY:
            found.add("policy:permissions")
    return found


def _self_hosted_problems(job: Mapping[str, Any], events: set[str]) -> set[str]:
    found: set[str] = set()
    if events & FORK_TRIGGERS or "fork" not in str(job.get("if", "")):
        found.add("policy:self-hosted-forks")
    if not job.get("environment"):
        found.add("policy:self-hosted-environment")
    return found


def _job_problems(job: Mapping[str, Any], events: set[str]) -> set[str]:
    found = _permission_problems(job)
    if "timeout-minutes" not in job:
        found.add("policy:timeout-minutes")
    for step in _steps(job):
        if _uses(step).startswith("actions/checkout@"):
            with_ = step.get("with") or {}
            if with_.get("persist-credentials") is not False:
                found.add("policy:persist-credentials")
    if _is_self_hosted(job):
        found |= _self_hosted_problems(job, events)
    return found


def pin_problems(text: str) -> set[str]:
    """Every remote `uses:` pinned to a full commit SHA with a `# vX.Y.Z` comment."""
    found: set[str] = set()
    for line in text.splitlines():
        m = USES_RE.match(line)
        if not m or m.group(1).startswith(("./", "$/", "docker://")):
            continue
        if not PINNED_RE.match(line):
            found.add("policy:pinned")
    return found


def workflow_problems(text: str) -> set[str]:
    """The policy problems of one workflow file."""
    doc = yaml.safe_load(text)
    found = pin_problems(text)
    if not isinstance(doc, Mapping):
        return found | {"policy:not-a-workflow"}
    if "concurrency" not in doc:
        found.add("policy:concurrency")
    top = doc.get("permissions")
    if top != {} and not (
        isinstance(top, Mapping) and all(v in READ_ONLY for v in top.values())
    ):
        found.add("policy:permissions")
    events = triggers(doc)
    for job in (doc.get("jobs") or {}).values():
        if isinstance(job, Mapping):
            found |= _job_problems(job, events)
    return found
