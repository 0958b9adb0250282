"""The one safe writer (servelab.textio, "the one writer"): outputs that would overwrite an
input or a user's file, collide with another run, or meet a full, read-only or missing place.

Each CLI case runs in its own process and must keep servelab's promise
(tests/hostile/harness.py): exit 0, 1 or 2 (3 only where the disk is at fault), no traceback,
no "internal error", nothing left behind. Before the writer, `validate -o F F` and
`lint -o F F` replaced their input with the report, report/run/build --out overwrote the
user's files, two runs on one --out mixed their files, and a full disk or an unusable
GITHUB_OUTPUT was "internal error" (exit 3), after the image was already pushed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab import textio
from servelab.errors import CapabilityError, InputError

from .harness import run_servelab

GOOD = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good"
EXPERIMENT = (GOOD / "experiment.yaml").read_text()
#: a folder of past runs' artifacts (the history tests' own fixture)
HISTORY_RUNS = GOOD.parents[1] / "history" / "positive" / "nightly-artifacts"


def _inputs(tmp_path: Path) -> Path:
    """A working copy of the good inputs (the tests write next to them)."""
    work = tmp_path / "w"
    shutil.copytree(GOOD, work)
    return work


# ------------------------------------------------------------------------ onto an input


#: command -> argv, with {in} the inputs' directory and {out} the output path
ONTO_INPUT = {
    "validate": ["validate", "{in}/experiment.yaml", "-o", "{out}"],
    "lint": ["lint", "--no-hadolint", "{in}/Dockerfile", "-o", "{out}"],
    "k8s-check": ["k8s-check", "{in}/deploy.yaml", "-o", "{out}"],
    "lint-build-args": ["lint", "--no-hadolint", "--build-args-file", "{in}/build-args.env",
                        "{in}/Dockerfile", "-o", "{out}"],
}
#: the input each command's output is aimed at
VICTIM = {"validate": "experiment.yaml", "lint": "Dockerfile", "k8s-check": "deploy.yaml",
          "lint-build-args": "build-args.env"}


def _hard_link(d: Path, f: Path) -> Path:
    os.link(f, d / f"hard-{f.name}")
    return d / f"hard-{f.name}"


def _dir_link(d: Path) -> Path:
    (d.parent / "via").symlink_to(d, target_is_directory=True)
    return d.parent / "via"


#: how the output names the input: the same path, a hard link, a symlinked directory
ALIASES = {
    "same-path": lambda d, f: f,
    "hard-link": _hard_link,
    "symlinked-dir": lambda d, f: _dir_link(d) / f.name,
    "dot-dot": lambda d, f: d / "sub" / ".." / f.name,
}


@pytest.mark.parametrize("alias", list(ALIASES))
@pytest.mark.parametrize("command", list(ONTO_INPUT))
def test_output_onto_an_input_is_refused_and_the_input_kept(
        command: str, alias: str, tmp_path: Path) -> None:
    """writer-onto-input: recognised by (st_dev, st_ino), not by the path's spelling."""
    work = _inputs(tmp_path)
    (work / "sub").mkdir()
    victim = work / VICTIM[command]
    out = ALIASES[alias](work, victim)
    before = victim.read_bytes()
    argv = [a.format(**{"in": work, "out": out}) for a in ONTO_INPUT[command]]
    outcome = run_servelab(argv, cwd=tmp_path, watch=[work])
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2, outcome.explain()
    assert "is an input of this command" in outcome.stderr and str(out) in outcome.stderr
    assert victim.read_bytes() == before


def test_output_onto_standard_input_file_is_refused(tmp_path: Path) -> None:
    work = _inputs(tmp_path)
    before = (work / "deploy.yaml").read_bytes()
    with (work / "deploy.yaml").open("rb") as stdin:
        outcome = run_servelab(["k8s-check", "-", "-o", str(work / "deploy.yaml")],
                               cwd=tmp_path, stdin=stdin.fileno(), watch=[work])
    assert outcome.code == 2 and "is an input" in outcome.stderr, outcome.explain()
    assert (work / "deploy.yaml").read_bytes() == before


# ------------------------------------------------------------------------ exit codes


#: kind -> (the -o path, exit code, words the message must hold)
TARGETS = {
    "dev-full": (lambda d: Path("/dev/full"), 3, "No space left on device"),
    "directory": (lambda d: _mkdir(d / "a-dir"), 2, "is a directory"),
    "missing-parent": (lambda d: d / "no" / "such" / "out.txt", 2, "does not exist"),
    "parent-is-a-file": (lambda d: _touch(d / "file") / "out.txt", 2, "not a directory"),
    "fifo-nobody-reads": (lambda d: _fifo(d / "pipe"), 2, "nobody reads"),
    "socket": (lambda d: _socket(d / "sock"), 2, "socket"),
}


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


def _touch(p: Path) -> Path:
    p.write_text("keep\n")
    return p


def _fifo(p: Path) -> Path:
    os.mkfifo(p)
    return p


def _socket(p: Path) -> Path:
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(p))
    s.close()
    return p


@pytest.mark.parametrize("command", ["lint", "validate", "k8s-check"])
@pytest.mark.parametrize("kind", list(TARGETS))
def test_an_output_that_cannot_be_written(kind: str, command: str, tmp_path: Path) -> None:
    """writer-exit-codes: the path's fault is 2, the disk's is 3; both name the path."""
    make, code, words = TARGETS[kind]
    out = make(tmp_path)
    argv = [a.format(**{"in": GOOD, "out": out}) for a in ONTO_INPUT[command]]
    outcome = run_servelab(argv, cwd=tmp_path, watch=[GOOD])
    assert outcome.code == code, outcome.explain()
    assert words in outcome.stderr and str(out) in outcome.stderr, outcome.explain()
    assert "internal error" not in outcome.stderr and "Traceback" not in outcome.stderr
    assert outcome.left_behind == [] and not list(tmp_path.rglob(".*.tmp"))


def test_a_read_only_filesystem_is_exit_3(tmp_path: Path) -> None:
    """A read-only tmpfs, mounted in a private mount namespace (root only)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a read-only filesystem")
    ro = _mkdir(tmp_path / "ro")
    script = 'mount -t tmpfs -o ro tmpfs "$0" && exec "$@"'
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(ro),
         sys.executable, "-m", "servelab", "lint", "--no-hadolint", str(GOOD / "Dockerfile"),
         "-o", str(ro / "report.txt")],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 3, proc.stderr
    assert "Read-only file system" in proc.stderr and str(ro / "report.txt") in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_no_permission_is_exit_2(tmp_path: Path) -> None:
    """An immutable directory refuses even root (EPERM); skipped where chattr cannot set it."""
    locked = _mkdir(tmp_path / "locked")
    made = subprocess.run(["chattr", "+i", str(locked)], capture_output=True, check=False) \
        if shutil.which("chattr") else None
    if made is None or made.returncode != 0:
        pytest.skip("chattr +i is not available on this filesystem")
    try:
        outcome = run_servelab(["lint", "--no-hadolint", str(GOOD / "Dockerfile"), "-o",
                                str(locked / "report.txt")], cwd=tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    assert outcome.problems() == [] and outcome.code == 2, outcome.explain()
    assert "permission denied" in outcome.stderr or "not permitted" in outcome.stderr
    assert str(locked / "report.txt") in outcome.stderr


def test_run_out_on_a_full_disk_is_exit_3(tmp_path: Path) -> None:
    """A tmpfs of 8 KiB (private mount namespace, root only): the run's files do not fit."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a small filesystem")
    exp = _experiment(_mkdir(tmp_path / "src"))
    small = _mkdir(tmp_path / "small")
    script = 'mount -t tmpfs -o size=8k tmpfs "$0" && exec "$@"'
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(small),
         sys.executable, "-m", "servelab", "run", str(exp), "--stages", "lint", "--out",
         str(small / "out")],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 3, proc.stderr
    assert "No space left on device" in proc.stderr and str(small / "out") in proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_pipe_with_a_reader_gets_the_report_in_place(tmp_path: Path) -> None:
    pipe = _fifo(tmp_path / "pipe")
    reader = os.open(pipe, os.O_RDWR | os.O_NONBLOCK)  # open before servelab: it has a reader
    try:
        outcome = run_servelab(["lint", "--no-hadolint", "-f", "json", str(GOOD / "Dockerfile"),
                                "-o", str(pipe)], cwd=tmp_path)
        got = os.read(reader, 1 << 16)  # the report is far below the pipe's buffer
    finally:
        os.close(reader)
    assert outcome.code in (0, 1), outcome.explain()
    assert pipe.is_fifo() and b'"findings"' in got


@pytest.fixture
def system_links() -> Iterator[None]:
    """Put /dev/stdout back if a broken writer replaced it (as root, renaming a temp file
    onto /dev/stdout replaces the system's link: what this test guards against)."""
    before = Path("/dev/stdout").readlink() if Path("/dev/stdout").is_symlink() else None
    yield
    if before is not None and not Path("/dev/stdout").is_symlink():
        Path("/dev/stdout").unlink()
        Path("/dev/stdout").symlink_to(before)
        pytest.fail("the writer replaced /dev/stdout (put back)")


@pytest.mark.usefixtures("system_links")
@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_dev_stdout_is_written_in_place(name: str, tmp_path: Path) -> None:
    """Standard output redirected to a file: written through the descriptor, never by
    renaming a file onto /dev/stdout (which would replace the system's link)."""
    outcome = run_servelab(["validate", str(GOOD / "experiment.yaml"), "-f", "json", "-o",
                            name], cwd=tmp_path)
    assert outcome.code == 0 and '"findings"' in outcome.stdout, outcome.explain()
    assert Path("/dev/stdout").is_symlink() and Path("/dev/fd").is_symlink()


# ------------------------------------------------------------------------ atomic, unit


def test_a_regular_file_is_replaced_by_rename_never_rewritten(tmp_path: Path) -> None:
    """A reader holding the old file sees it whole; a link the user named is followed, as a
    shell's ``>`` follows it: its target is replaced, the link stays."""
    target = tmp_path / "report.txt"
    target.write_text("old report\n")
    target.chmod(0o600)
    old_inode = target.stat().st_ino
    with target.open() as held:
        textio.write_file(target, "new report\n")
        assert held.read() == "old report\n"
    assert target.read_text() == "new report\n" and target.stat().st_ino != old_inode
    assert target.stat().st_mode & 0o777 == 0o600  # the replaced file's mode is kept
    elsewhere = _touch(tmp_path / "elsewhere")
    (tmp_path / "link").symlink_to(elsewhere)
    textio.write_file(tmp_path / "link", "report\n")
    assert elsewhere.read_text() == "report\n" and (tmp_path / "link").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "link", "report.txt"]


def test_errors_are_classified_by_errno(tmp_path: Path) -> None:
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO):
        err = textio.write_error(OSError(code, os.strerror(code)), tmp_path / "x")
        assert isinstance(err, CapabilityError) and err.exit_code == 3
        assert str(tmp_path / "x") in str(err) and "internal error" not in str(err)
    for code in (errno.EACCES, errno.EPERM, errno.ENOENT, errno.EISDIR, errno.ENXIO):
        err = textio.write_error(OSError(code, os.strerror(code)), tmp_path / "x")
        assert isinstance(err, InputError) and err.exit_code == 2
        assert str(tmp_path / "x") in str(err) and "fix:" in str(err)


def test_a_copy_streams_and_keeps_the_rules(tmp_path: Path) -> None:
    source = tmp_path / "sbom.json"
    source.write_bytes(b"{}" * 600_000)
    textio.copy_file(tmp_path / "copy.json", source)
    assert (tmp_path / "copy.json").read_bytes() == source.read_bytes()
    with pytest.raises(CapabilityError, match="No space left"):
        textio.copy_file(Path("/dev/full"), source)
    with pytest.raises(InputError, match="is a directory"):
        textio.copy_file(tmp_path, source)


NAMES = st.sampled_from(["a", "b", "c", "d"])


@given(files=st.dictionaries(NAMES, st.binary(max_size=64), min_size=1),
       read=st.sets(NAMES), links=st.dictionaries(NAMES, NAMES), target=NAMES,
       data=st.binary(max_size=256))
def test_property_never_onto_an_input_else_exactly_the_data(  # noqa: PLR0917 (given)
        files: dict[str, bytes], read: set[str], links: dict[str, str], target: str,
        data: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    """writer-property: for any files, any of them read as input, hard links between them,
    a write either refuses (the target is an input, by inode) leaving every file as it was,
    or leaves exactly *data* there and every other file as it was; no temp file remains."""
    d = tmp_path_factory.mktemp("w")
    textio._INPUTS.clear()
    for name, body in files.items():
        (d / name).write_bytes(body)
    for alias, name in links.items():
        if name in files and alias not in files:
            os.link(d / name, d / alias)
    for name in read & {p.name for p in d.iterdir()}:
        textio.read_bytes(d / name)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    inputs = {(p.stat().st_dev, p.stat().st_ino) for p in d.iterdir() if p.name in read}
    path = d / target
    is_input = path.exists() and (path.stat().st_dev, path.stat().st_ino) in inputs
    try:
        textio.write_file(path, data)
    except InputError as e:
        assert is_input and "is an input" in str(e)
        assert {p.name: p.read_bytes() for p in d.iterdir()} == before
    else:
        assert not is_input
        after = {p.name: p.read_bytes() for p in d.iterdir()}
        assert after.pop(target) == data
        assert after == {k: v for k, v in before.items() if k != target}
    finally:
        textio._INPUTS.clear()


# ------------------------------------------------------------------------ output directories


def _experiment(d: Path) -> Path:
    for name in ("Dockerfile", "app.py", "build-args.env"):
        shutil.copy(GOOD / name, d / name)
    (d / "experiment.yaml").write_text(EXPERIMENT)
    return d / "experiment.yaml"


#: command -> argv with {exp} the experiment and {out} the directory
OUT_DIRS = {
    "run": ["run", "{exp}", "--stages", "lint", "--out", "{out}"],
    "build": ["build", "{exp}", "--out", "{out}"],
    "report": ["report", f"{GOOD}/result.json", "--out", "{out}"],
    # the claim comes before the engine is asked anything: no image or Docker is needed
    "smoke": ["smoke", "servelab-test/no-such-image:1", "--out", "{out}"],
    "history": ["history", str(HISTORY_RUNS), "--out", "{out}"],
}
#: a user's file in --out that the command would write
THEIRS = {"run": "summary.md", "build": "build-summary.json", "report": "summary.json",
          "smoke": "start-1", "history": "history.md"}


@pytest.mark.parametrize("via_link", [False, True], ids=["dir", "symlinked-dir"])
@pytest.mark.parametrize("command", list(OUT_DIRS))
def test_out_never_overwrites_a_users_file(command: str, via_link: bool,
                                           tmp_path: Path) -> None:
    """writer-out-dir: refused (exit 2) before anything runs, the file untouched, the way
    forward named."""
    exp = _experiment(_mkdir(tmp_path / "src"))
    out = _mkdir(tmp_path / "mine")
    theirs = out / THEIRS[command]
    theirs.write_text("my notes\n")
    given_out = out
    if via_link:
        given_out = tmp_path / "link"
        given_out.symlink_to(out, target_is_directory=True)
    argv = [a.format(exp=exp, out=given_out) for a in OUT_DIRS[command]]
    outcome = run_servelab(argv, cwd=tmp_path, watch=[out])
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2, outcome.explain()
    assert THEIRS[command] in outcome.stderr and "new or empty directory" in outcome.stderr
    assert theirs.read_text() == "my notes\n"
    assert [p.name for p in out.iterdir()] == [THEIRS[command]]


def test_run_out_keeps_other_files_and_its_lock_is_gone_after(tmp_path: Path) -> None:
    """A file servelab does not write (the action's servelab-run.log) may be there."""
    exp = _experiment(_mkdir(tmp_path / "src"))
    out = _mkdir(tmp_path / "out")
    (out / "servelab-run.log").write_text("the action's log\n")
    outcome = run_servelab(["run", str(exp), "--stages", "lint", "--out", str(out)],
                           cwd=tmp_path)
    assert outcome.code in (0, 1), outcome.explain()
    assert (out / "servelab-run.log").read_text() == "the action's log\n"
    assert (out / "summary.json").is_file() and not (out / textio.LOCK_FILE).exists()
    again = run_servelab(["run", str(exp), "--stages", "lint", "--out", str(out)],
                         cwd=tmp_path)
    assert again.code == 2 and "summary.json" in again.stderr, again.explain()


@pytest.fixture
def held_lock(tmp_path: Path) -> Iterator[Path]:
    """An --out directory another servelab holds right now (its flock, in this process)."""
    out = _mkdir(tmp_path / "busy")
    fd = os.open(out / textio.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    yield out
    os.close(fd)


@pytest.mark.parametrize("command", list(OUT_DIRS))
def test_a_second_command_on_a_claimed_out_is_refused_at_once(
        command: str, held_lock: Path, tmp_path: Path) -> None:
    """writer-lock: the flock is taken before the "already holds a run" check, and without
    waiting: the second of two runs started together gets exit 2 at once."""
    exp = _experiment(_mkdir(tmp_path / "src"))
    argv = [a.format(exp=exp, out=held_lock) for a in OUT_DIRS[command]]
    outcome = run_servelab(argv, cwd=tmp_path)
    assert outcome.code == 2 and outcome.seconds < 8, outcome.explain()
    assert "another servelab command is writing to this --out directory" in outcome.stderr
    assert [p.name for p in held_lock.iterdir()] == [textio.LOCK_FILE]


def test_two_runs_started_together_one_wins(tmp_path: Path) -> None:
    exp = _experiment(_mkdir(tmp_path / "src"))
    out = tmp_path / "shared"
    env = dict(os.environ)
    argv = [sys.executable, "-m", "servelab", "run", str(exp), "--stages", "lint", "--out",
            str(out)]
    procs = [subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes[0] in (0, 1) and codes[1] == 2, results
    loser = next(err for code, err in results if code == 2)
    assert "another servelab command" in loser or "already holds" in loser, loser
    run_ids = {r["run"]["id"] for r in json.loads((out / "summary.json").read_text())["results"]}
    on_disk = {json.loads(p.read_text())["run"]["id"] for p in out.rglob("result.json")}
    assert len(run_ids) == 1 and on_disk == run_ids, "two runs' files mixed in one --out"


def test_scan_out_dir_that_is_a_file_is_exit_2_before_scanning(tmp_path: Path) -> None:
    target = _touch(tmp_path / "not-a-dir")
    outcome = run_servelab(["scan", "alpine:3", "--offline", "--out-dir", str(target)],
                           cwd=tmp_path)
    assert outcome.code == 2, outcome.explain()
    assert "--out-dir names an existing file" in outcome.stderr
    assert target.read_text() == "keep\n"


def test_a_new_out_dir_of_a_command_that_failed_is_not_left(tmp_path: Path) -> None:
    """report --out NEW with bad input: exit 2, and neither NEW nor its lock stays."""
    bad = _touch(tmp_path / "summary.json")
    outcome = run_servelab(["report", str(bad), "--out", str(tmp_path / "new")], cwd=tmp_path)
    assert outcome.problems() == [], outcome.explain()
    assert outcome.code == 2 and not (tmp_path / "new").exists(), outcome.explain()
