"""The smoke verdict, decided from what a start observed: the likely cause of a failure
(:mod:`servelab.smoke.diagnose`), the first failure in the order of ``VERDICTS`` or a pass, the
hardening properties that were tested and how (``properties`` of smoke.json), and notes on what
was not tested. Pure: no engine, no clock.
"""

from __future__ import annotations

from servelab.smoke.diagnose import diagnose
from servelab.smoke.result import (
    Problem,
    SmokeResult,
    SmokeSettings,
    UserCheck,
    percentile,
    set_verdict,
)


def decide(res: SmokeResult, s: SmokeSettings) -> None:
    """The verdict of a finished start from what was observed: the likely cause of a failure,
    the first failure in the order of VERDICTS (else pass), root as a problem, the checked
    properties and the notes on what was not tested."""
    st, tl, u = res.container, res.timeline, res.user
    ready = tl is not None and "first_health_2xx" in tl.marks
    if st is not None and not ready:
        lines = [x.partition(" ")[2] for x in res.files.get("_log_text", "").splitlines()[-200:]]
        extra = [x for x in (st.error, res.probe.get("last_health_answer")) if x]
        res.cause = diagnose(lines, exit_code=st.exit_code, oom_killed=st.oom_killed,
                             non_root=not (u and u.root), extra=extra,
                             mount_path=s.model.mount_path if s.model else None)
    _main_verdict(res, s, ready)
    if u is not None and u.root and res.verdict != "runs-as-root":
        res.problems.append(_root_problem(u))
    res.properties = _properties(res, s, ready)
    if s.serve.network != "none":
        res.notes.append(f"network is {s.serve.network!r}: that the server needs no download "
                         "to become ready was NOT tested")
    if u is not None and not u.checked:
        res.notes.append("the effective uid could not be checked (no /proc access, docker top "
                         "failed) and the image's USER is a name")


def _root_problem(u: UserCheck) -> Problem:
    return Problem("runs-as-root",
                   f"the server runs as uid 0 (image USER {u.image_user or '(none)'!r}, "
                   f"effective uid {u.euid})",
                   "add a non-root USER (numeric, e.g. USER 10001:10001) to the Dockerfile")


def _main_verdict(res: SmokeResult, s: SmokeSettings, ready: bool) -> None:
    found = _failure(res, s, ready)
    if found is None:
        res.verdict = "pass"
        res.message = _pass_message(res)
    else:
        set_verdict(res, *found)


def _failure(res: SmokeResult, s: SmokeSettings, ready: bool
             ) -> tuple[str, str, str | None] | None:
    """(verdict, message, fix) of the first failure, in the order of VERDICTS; None: pass."""
    st = res.container
    cause = f" (likely cause: {res.cause.title})" if res.cause else ""
    fix = res.cause.fix if res.cause else None
    if st is None:
        return "start-failed", "the container was not created", None
    never_ran = (res.timeline is not None and "first_tcp_accept" not in res.timeline.marks
                 and not st.running and st.exit_code in (None, 0, 125, 126, 127, 128))
    if st.error and never_ran:
        return "start-failed", f"the engine could not start it: {st.error}{cause}", fix
    if not ready and not st.running:
        oom = ", OOMKilled" if st.oom_killed else ""
        return ("crashed", f"the container exited with code {st.exit_code}{oom} before it "
                f"was ready{cause}{_log_tail(st.log_tail)}", fix)
    if not ready:
        last = res.probe.get("last_health_answer") or "no answer"
        return ("not-ready", f"no 2xx from {s.serve.health_path} on port {s.serve.port} "
                f"within {s.serve.readiness_timeout_s:g}s (last answer: {last}){cause}",
                fix or "make the health endpoint answer 2xx once the model is loaded, or "
                "raise serve.readinessTimeoutSeconds")
    if res.requests is not None and res.requests.failed:
        ff = res.requests.first_failure()
        return ("request-failed", f"{res.requests.failed}/{res.requests.count} representative "
                f"requests failed: {ff.reason if ff else 'not sent'}",
                "check request.* in the spec against what the server answers")
    gpu = next((p for p in res.problems if p.id == "gpu-failed"), None)
    if gpu is not None:
        res.problems.remove(gpu)
        return "gpu-failed", gpu.message, gpu.fix
    if res.user is not None and res.user.root:
        p = _root_problem(res.user)
        return "runs-as-root", p.message, p.fix
    return None


#: the server's last log lines a crash's reason quotes, and the characters kept of each
TAIL_LINES, TAIL_CHARS = 3, 160


def _log_tail(lines: list[str]) -> str:
    """``; log tail: "a" / "b"``: the last lines the server wrote (one line, each cut)."""
    kept = [x.strip() for x in lines if x.strip()][-TAIL_LINES:]
    if not kept:
        return "; it wrote nothing to its log"
    shown = " / ".join(repr(x[:TAIL_CHARS] + ("…" if len(x) > TAIL_CHARS else ""))
                       for x in kept)
    return f"; log tail: {shown}"


def _pass_message(res: SmokeResult) -> str:
    msg = f"ready {res.startup_s:.3f}s after start" if res.startup_s is not None else "ready"
    r = res.requests
    if r is not None:
        p50 = percentile([x.latency_ms for x in r.samples if x.latency_ms is not None], 50)
        msg += f"; {r.ok}/{r.count} representative requests OK"
        if p50 is not None:
            msg += f" (p50 {p50:.1f} ms)"
    else:
        msg += "; no representative request configured"
    return msg


def _properties(res: SmokeResult, s: SmokeSettings, ready: bool) -> dict[str, str]:
    cause = res.cause.cause if res.cause else None
    u = res.user

    def when_ready(bad: bool) -> str:
        return "fail" if bad else ("pass" if ready else "not-tested")

    return {
        "non_root": "fail" if u and u.root else ("pass" if u and u.checked else "not-tested"),
        "read_only_rootfs": when_ready(cause == "read-only-write"),
        "no_network_needed": ("not-tested" if s.serve.network != "none"
                              else when_ready(cause == "download-attempt")),
        "model_read_only": "pass" if res.model and ready else "not-tested",
        "model_sha256": ("fail" if res.model and res.model.match is False else
                         "pass" if res.model and res.model.match else "not-tested"),
        "cap_drop_all": "pass" if ready else "not-tested",
        "no_new_privileges": "pass" if ready else "not-tested",
    }
