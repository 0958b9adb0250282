"""servelab.logs.progress: what a step looks like on a terminal and in a log, the line bound of
a log, neutralised text, and --quiet. Real threads and real time, short heartbeats."""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys
import time

import pytest

from servelab import logs

HOSTILE = [
    "[2/4] RUN echo \"::error::boom\"",
    "::set-output name=x::y",
    "RUN <<EOT (echo one\necho two\n::warning::three)",
    "Downloading 50%\rDownloading 100%",
    "\x1b[31mred\x1b[0m text\x1b]0;title\x07",
    "line\u2028separator\x85next",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_neutral_keeps_one_line_that_starts_no_workflow_command(text: str) -> None:
    out = logs.neutral(text)
    assert "\n" not in out and "\r" not in out and "\x1b" not in out
    assert not any(c < " " or "\x7f" <= c <= "\x9f" for c in out)
    assert "\u2028" not in out
    assert out  # something of the text is left to read
    assert len(logs.neutral(text * 100)) <= logs.FIELD_MAX


def test_neutral_drops_colour_codes_but_keeps_the_words() -> None:
    assert logs.neutral("\x1b[31mERROR\x1b[0m  failed\n") == "ERROR failed"


def _lines(mode: str, steps: list[str], seconds: float, monkeypatch: pytest.MonkeyPatch,
           heartbeat: float) -> tuple[str, float]:
    monkeypatch.setattr(logs, "HEARTBEAT_S", heartbeat)
    out = io.StringIO()
    t0 = time.monotonic()
    with logs.Progress("build treatment #1", mode=mode, stream=out) as p:
        for name in steps:
            p.step(name)
            p.note("Collecting torch\r\n::error::x")
            time.sleep(seconds / len(steps))
    return out.getvalue(), time.monotonic() - t0


def test_a_log_gets_heartbeats_naming_the_step_not_a_line_per_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    heartbeat = 0.3
    text, took = _lines(logs.LINES, HOSTILE, 2.4, monkeypatch, heartbeat)
    lines = text.splitlines()
    assert text.endswith("\n") and "\r" not in text and "\x1b" not in text
    assert all(x.startswith("servelab: ") for x in lines), lines
    assert not any(x.startswith("::") for x in lines)
    assert all(len(x) <= logs.LINE_MAX for x in lines)
    beats = [x for x in lines if " | " in x]
    assert beats, "a step longer than the heartbeat gets heartbeat lines"
    assert all("Collecting torch" in x for x in beats)  # the latest detail, neutralised
    assert len(lines) <= math.ceil(took / heartbeat) + 1  # no line a sub-step; + the end line
    assert lines[-1].startswith("servelab: build treatment #1: done in ")


def test_a_quick_step_is_its_end_line_in_a_log_and_a_failed_one_says_where(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text, _ = _lines(logs.LINES, ["[1/1] FROM scratch"], 0.1, monkeypatch, 10.0)
    assert re.fullmatch(r"servelab: build treatment #1: done in 0\.\ds\n", text)
    out = io.StringIO()
    with pytest.raises(RuntimeError), logs.Progress("build x", mode=logs.LINES,
                                                    stream=out) as p:
        p.step("[2/3] RUN make")
        raise RuntimeError
    assert re.fullmatch(r"servelab: build x: failed in 0\.\ds at \[2/3\] RUN make\n",
                        out.getvalue())


def test_a_log_line_has_short_digests_and_a_width() -> None:
    d = "0123456789ab" + "c" * 52
    line = logs.log_line(f"servelab: pull of r/x@sha256:{d} and /out/images/{d}.oci.tar "
                         + "x" * 200)
    assert "sha256:0123456789ab " in line and "/images/0123456789ab.oci.tar" in line
    assert len(line) == logs.LINE_MAX and "\u2026" in line and line.endswith("x" * 40)


def test_a_terminal_gets_one_line_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "REDRAW_S", 0.05)
    text, _ = _lines(logs.LIVE, HOSTILE[:3], 0.6, monkeypatch, 10.0)
    frames = text.split("\r\x1b[K")
    assert len(frames) >= 6, frames  # redrawn, also while nothing new was said (the clock)
    assert all("\n" not in f for f in frames[1:-1]), frames  # in place: no new line
    assert frames[-1].startswith("servelab: build treatment #1: done in ")
    assert frames[-1].endswith("\n")
    assert all(not f.startswith("::") for f in frames)


def test_bytes_show_as_a_bar_with_a_share() -> None:
    out = io.StringIO()
    with logs.Progress("docker load", total=2_000_000, mode=logs.LIVE, stream=out) as p:
        p.advance(500_000)
        time.sleep(0.25)
    assert "[#####..............." in out.getvalue()
    assert "25% of 2.00 MB" in out.getvalue()


def test_off_writes_nothing_and_starts_no_thread() -> None:
    import threading

    out = io.StringIO()
    before = threading.active_count()
    with logs.Progress("x", mode=logs.OFF, stream=out) as p:
        p.step("y")
        p.advance(5)
        p.note("z")
        assert threading.active_count() == before
    assert out.getvalue() == ""


def test_library_use_and_quiet_show_nothing_and_ci_gets_lines() -> None:
    code = ("import sys; from servelab import logs\n"
            "if len(sys.argv) > 1: logs.configure(0, quiet=sys.argv[1] == 'quiet')\n"
            "with logs.progress('step') as p: p.step('a'); raise SystemExit(p.steps)\n")
    runs = {arg: subprocess.run([sys.executable, "-c", code, *([arg] if arg else [])],
                                capture_output=True, text=True, timeout=60, check=False)
            for arg in ("", "quiet", "loud")}
    assert runs[""].stderr == "" and runs["quiet"].stderr == ""
    assert re.fullmatch(r"servelab: step: failed in 0\.\ds at a\n", runs["loud"].stderr)
    assert all(r.stdout == "" for r in runs.values())  # never on stdout


def test_github_actions_means_lines_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert logs.progress_mode(Tty()) == logs.LIVE
    assert logs.progress_mode(io.StringIO()) == logs.LINES
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert logs.progress_mode(Tty()) == logs.LINES


def test_the_stop_report_reads_the_same_run_with_progress_lines_in_its_log() -> None:
    from servelab.github.stop import parse_run_log

    out = io.StringIO()
    with logs.Progress("build treatment #1", mode=logs.LINES, stream=out) as p:
        p.step("[1/2] FROM base")
        p.step("[2/2] RUN echo ::error::x")
    with logs.Progress("Trivy scan of servelab/x:1", mode=logs.LINES, stream=out):
        pass
    runner = ["servelab: [treatment 1/2] start", "servelab:   build ...",
              "servelab:   build: ok (sha256:abc)", "servelab:   scan ..."]
    plain = parse_run_log("\n".join(runner) + "\nservelab run: interrupted\n")
    mixed = parse_run_log("\n".join([*runner[:2], *out.getvalue().splitlines()[:4],
                                     runner[2], runner[3], *out.getvalue().splitlines()[4:]])
                          + "\nservelab run: interrupted\n")
    assert mixed.ran() == plain.ran() == ["treatment repeat 1 of 2: build ok (sha256:abc)"]
    assert mixed.stopped_in == plain.stopped_in == "the scan stage of treatment repeat 1"
    assert mixed.errors_annotated == 0


def test_proc_shows_each_stderr_line_as_it_comes_and_keeps_the_whole_text() -> None:
    from servelab import proc

    seen: list[tuple[float, str]] = []
    t0 = time.monotonic()
    res = proc.run(["sh", "-c", "echo one >&2; sleep 0.6; echo two >&2; echo out"],
                   on_stderr=lambda line: seen.append((time.monotonic() - t0, line)))
    assert [x for _, x in seen] == ["one\n", "two\n"]
    assert seen[0][0] < 0.5 <= seen[1][0]  # the first line before the program ended
    assert (res.stderr, res.stdout, res.returncode) == ("one\ntwo\n", "out\n", 0)


def test_proc_streaming_keeps_timeouts_errors_and_survives_a_failing_reader() -> None:
    from servelab import proc
    from servelab.errors import CommandError

    t0 = time.monotonic()
    with pytest.raises(CommandError) as err:
        proc.run(["sh", "-c", "echo started >&2; sleep 30"], timeout=0.5,
                 on_stderr=lambda line: None)
    assert err.value.timed_out and "started" in err.value.stderr
    assert time.monotonic() - t0 < 5

    def broken(line: str) -> None:
        raise ValueError("a reader bug")

    with pytest.raises(CommandError) as err:
        proc.run(["sh", "-c", "for i in 1 2 3; do echo $i >&2; done; exit 4"], on_stderr=broken)
    assert err.value.returncode == 4 and err.value.stderr == "1\n2\n3\n"
