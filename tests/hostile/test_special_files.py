"""Pipes, devices, sockets, directories and oversized files, made at test time, given to every
option that takes a file; standard input where ``-`` is allowed; outputs that cannot be written.

Each case runs in its own process and must keep servelab's promise (tests/hostile/harness.py);
a file that is not a regular file is exit 2 naming what it is. Before the safe reader a named
pipe hung validate, lint, k8s-check, pin, gpu-probe, report and compare for ever, and
/dev/zero was read until memory ran out.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .harness import run_servelab

GOOD = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good"

#: every option of every engine-free command that reads a user file; {f} is the special file
READERS: dict[str, list[str]] = {
    "validate": ["validate", "{f}"],
    "lint": ["lint", "--no-hadolint", "{f}"],
    "lint-build-args": ["lint", "--no-hadolint", "--build-args-file", "{f}", "{good}/Dockerfile"],
    "lint-spec": ["lint", "--no-hadolint", "--spec", "{f}"],
    "lint-config": ["lint", "--no-hadolint", "--config", "{f}", "{good}/Dockerfile"],
    "k8s-check": ["k8s-check", "{f}"],
    "k8s-result": ["k8s-check", "{good}/deploy.yaml", "--result", "{f}"],
    "pin": ["pin", "--check", "{f}"],
    "gpu-image-env": ["gpu-probe", "--no-python-probe", "--image-env", "{f}"],
    "report": ["report", "{f}"],
    "compare": ["compare", "{f}", "{good}/result.json"],
    # these need an engine later, but read their file first and stop there
    "build": ["build", "{f}"],
    "run": ["run", "{f}"],
    "smoke-body": ["smoke", "alpine", "--request-path", "/x", "--request-body-file", "{f}"],
}
SOME = ["validate", "lint", "k8s-result", "report"]


def _fifo(d: Path) -> Path:
    os.mkfifo(d / "fifo")
    return d / "fifo"


def _zero_link(d: Path) -> Path:
    (d / "zero.yaml").symlink_to("/dev/zero")
    return d / "zero.yaml"


def _socket(d: Path) -> Path:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "sock"))
    s.close()
    return d / "sock"


def _dangling(d: Path) -> Path:
    (d / "gone.yaml").symlink_to(d / "nothing-here")
    return d / "gone.yaml"


def _loop(d: Path) -> Path:
    (d / "loop.yaml").symlink_to("loop.yaml")  # a link to itself: ELOOP on every open
    return d / "loop.yaml"


def _directory(d: Path) -> Path:
    (d / "empty-dir").mkdir()
    return d / "empty-dir"


def _oversized(d: Path) -> Path:
    with (d / "big.yaml").open("wb") as f:  # sparse: 40 MiB of NULs, over every cap
        f.truncate(40 * 1024 * 1024)
    return d / "big.yaml"


def _long_line(d: Path) -> Path:
    (d / "long").write_text("FROM alpine\nRUN echo " + "x" * 900_000 + "\n")
    return d / "long"


#: name -> (make it, readers to try, exit code, text the output must hold)
SPECIAL: dict[str, tuple[Callable[[Path], Path], list[str], int | None, str]] = {
    "fifo": (_fifo, list(READERS), 2, "named pipe (FIFO), not a regular file"),
    "symlink-to-dev-zero": (_zero_link, list(READERS), 2, "character device"),
    "dev-zero": (lambda d: Path("/dev/zero"), SOME, 2, "character device"),
    "socket": (_socket, SOME, 2, "socket"),
    "dangling-symlink": (_dangling, SOME, 2, "no such file"),
    "symlink-loop": (_loop, SOME, 2, "Too many levels of symbolic links"),
    "directory": (_directory, SOME, 2, ""),
    "proc-file": (lambda d: Path("/proc/self/status"), SOME, 2, ""),
    "oversized": (_oversized, SOME, 2, "limit"),
    "long-line": (_long_line, ["lint", "pin", "validate"], None, ""),
}
CASES = [(name, reader) for name, (_, readers, _, _) in SPECIAL.items() for reader in readers]


@pytest.mark.parametrize(("special", "reader"), CASES, ids=[f"{s}-{r}" for s, r in CASES])
def test_special_file(special: str, reader: str, tmp_path: Path) -> None:
    make, _, code, text = SPECIAL[special]
    inputs = tmp_path / "in"
    inputs.mkdir()
    path = make(inputs)
    work = tmp_path / "work"
    work.mkdir()
    argv = [a.format(f=path, good=GOOD) for a in READERS[reader]]
    outcome = run_servelab(argv, cwd=work, watch=[inputs, GOOD])
    assert outcome.problems() == [], outcome.explain()
    if code is not None:
        assert outcome.code == code, outcome.explain()
        assert text in outcome.stdout + outcome.stderr, outcome.explain()


@pytest.mark.parametrize("fmt", ["sarif", "github", "markdown", "json"])
@pytest.mark.parametrize("reader", ["validate", "lint", "k8s-check", "pin"])
def test_symlink_loop_in_every_findings_format(reader: str, fmt: str, tmp_path: Path) -> None:
    """validate reports an unreadable file as a finding at that file: its SARIF location was
    made with Path.resolve, which raises RuntimeError on a link loop (an internal error,
    exit 3; found by fuzzing). Every findings format names the file and exits 2."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    path = _loop(inputs)
    argv = [a.format(f=path, good=GOOD) for a in READERS[reader]] + ["-f", fmt]
    outcome = run_servelab(argv, cwd=inputs, watch=[GOOD])
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2, outcome.explain()
    assert "loop.yaml" in outcome.stdout + outcome.stderr, outcome.explain()


# ------------------------------------------------------------------------ standard input


@pytest.fixture
def stdin_of(tmp_path: Path) -> Iterator[Callable[[str], int]]:
    fds: list[int] = []

    def opener(path: str) -> int:
        fds.append(os.open(path, os.O_RDONLY))
        return fds[-1]

    yield opener
    for fd in fds:
        os.close(fd)


STDIN_CASES = {
    "k8s-zero": (["k8s-check", "-"], "/dev/zero", 2, "over the 1048576-byte limit"),
    "gpu-zero": (["gpu-probe", "--no-python-probe", "--image-env", "-"], "/dev/zero", 2,
                 "limit"),
    "k8s-empty": (["k8s-check", "-"], "/dev/null", 2, "no YAML document"),
    "k8s-good": (["k8s-check", "-", "-f", "json"], "{good}/deploy.yaml", None, '"<stdin>"'),
}


@pytest.mark.parametrize("case", list(STDIN_CASES))
def test_standard_input(case: str, tmp_path: Path, stdin_of: Callable[[str], int]) -> None:
    """``-`` reads standard input with the same cap as a file (it used to have none)."""
    argv, source, code, text = STDIN_CASES[case]
    fd = stdin_of(source.format(good=GOOD))
    outcome = run_servelab(argv, cwd=tmp_path, stdin=fd)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code in ((0, 1) if code is None else (code,)), outcome.explain()
    assert text in outcome.stdout + outcome.stderr, outcome.explain()


def test_standard_input_is_read_only_when_asked(tmp_path: Path) -> None:
    """A file named "-" in a directory is a file; stdin is read only for the bare ``-``."""
    outcome = run_servelab(["validate", "./-"], cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert outcome.code == 2 and "no such file" in outcome.stdout + outcome.stderr


# ------------------------------------------------------------------------ outputs


@pytest.mark.parametrize("argv", [
    ["lint", "--no-hadolint", "{good}/Dockerfile", "-o", "{out}"],
    ["k8s-check", "{good}/deploy.yaml", "-o", "{out}"],
    ["validate", "{good}/experiment.yaml", "-o", "{out}"],
], ids=["lint", "k8s-check", "validate"])
def test_output_to_a_directory_is_refused_and_leaves_no_temp_file(
        argv: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    outcome = run_servelab([a.format(good=GOOD, out=out) for a in argv], cwd=tmp_path,
                           watch=[GOOD])
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and "is a directory" in outcome.stderr, outcome.explain()
    assert list(out.iterdir()) == [] and not list(tmp_path.glob(".*.tmp"))


def test_output_to_a_pipe_nobody_reads_fails_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    outcome = run_servelab(["lint", "--no-hadolint", str(GOOD / "Dockerfile"), "-o",
                            str(tmp_path / "pipe")], cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and "nobody reads" in outcome.stderr, outcome.explain()


def test_output_to_a_device_is_written_in_place(tmp_path: Path) -> None:
    outcome = run_servelab(["lint", "--no-hadolint", str(GOOD / "Dockerfile"), "-o",
                            "/dev/null"], cwd=tmp_path)
    assert outcome.problems() == [] and outcome.code in (0, 1), outcome.explain()
    assert Path("/dev/null").is_char_device()


def test_report_out_on_an_existing_file_is_refused_untouched(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    target.write_text("keep me\n")
    outcome = run_servelab(["report", str(GOOD / "result.json"), "--out", str(target)],
                           cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and "existing file" in outcome.stderr, outcome.explain()
    assert target.read_text() == "keep me\n"


def test_report_out_writes_a_new_directory(tmp_path: Path) -> None:
    outcome = run_servelab(["report", str(GOOD / "result.json"), "--out", "merged"],
                           cwd=tmp_path)
    assert outcome.code == 0, outcome.explain()
    assert sorted(p.name for p in (tmp_path / "merged").iterdir()) == ["summary.json",
                                                                       "summary.md"]
    again = run_servelab(["report", str(tmp_path / "merged" / "summary.json")], cwd=tmp_path)
    assert again.code == 0 and "same digest on every runner" in again.stdout, again.explain()


# ------------------------------------------------------------------------ files inside inputs


def test_run_directory_holding_a_pipe(tmp_path: Path) -> None:
    run = tmp_path / "run" / "treatment" / "repeat-1"
    run.mkdir(parents=True)
    os.mkfifo(run / "result.json")
    outcome = run_servelab(["report", str(tmp_path / "run")], cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and "named pipe" in outcome.stderr, outcome.explain()


def test_run_directory_with_a_result_linked_to_dev_zero(tmp_path: Path) -> None:
    run = tmp_path / "run" / "treatment" / "repeat-1"
    run.mkdir(parents=True)
    (run / "result.json").symlink_to("/dev/zero")
    outcome = run_servelab(["compare", str(tmp_path / "run"), str(GOOD / "result.json")],
                           cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and "character device" in outcome.stderr, outcome.explain()


def test_start_script_and_weights_that_are_pipes_in_the_context(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        (GOOD / "Dockerfile").read_text().replace('CMD ["python", "/app/app.py"]',
                                                  'COPY . /app\nCMD ["/app/start.sh"]'))
    os.mkfifo(ctx / "start.sh")
    os.mkfifo(ctx / "model.safetensors")
    (ctx / "weights.bin").symlink_to("/dev/zero")
    outcome = run_servelab(["lint", "--no-hadolint", str(ctx)], cwd=tmp_path, watch=[ctx])
    assert outcome.problems() == [] and outcome.code in (0, 1), outcome.explain()


def test_settings_files_found_by_discovery_that_are_pipes(tmp_path: Path) -> None:
    """.servelab.yaml and pyproject.toml are looked for above the working directory: a pipe
    or a link to a device there is skipped, never read."""
    os.mkfifo(tmp_path / ".servelab.yaml")
    (tmp_path / "pyproject.toml").symlink_to("/dev/zero")
    (tmp_path / ".git").mkdir()
    outcome = run_servelab(["lint", "--no-hadolint", str(GOOD / "Dockerfile")], cwd=tmp_path)
    assert outcome.problems() == [] and outcome.code in (0, 1), outcome.explain()


@pytest.mark.parametrize(("key", "make", "text"), [
    ("buildArgsFile", _fifo, "named pipe"),
    # a link to /dev/zero leads out of the repository: refused before anything is opened
    ("buildArgsFile", _zero_link, "(through a symbolic link, to /dev/zero)"),
], ids=["build-args-fifo", "build-args-zero"])
def test_files_named_by_an_experiment(key: str, make: Callable[[Path], Path], text: str,
                                      tmp_path: Path) -> None:
    special = make(tmp_path)
    (tmp_path / "Dockerfile").write_text((GOOD / "Dockerfile").read_text())
    (tmp_path / "exp.yaml").write_text(
        "apiVersion: servelab/v1\nkind: Experiment\nmetadata: {name: x}\nspec:\n"
        f"  change: c\n  treatment: {{dockerfile: Dockerfile, {key}: {special.name}}}\n")
    outcome = run_servelab(["lint", "--no-hadolint", "--spec", "exp.yaml"], cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and text in outcome.stderr, outcome.explain()
