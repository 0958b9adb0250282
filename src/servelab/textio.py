"""Files: the one safe reader of user input, writing outputs atomically, servelab's cache dir.

Every file and standard input a user hands servelab is read through :func:`read_bytes` /
:func:`read_text` / :func:`read_json`:

* the file is opened with ``O_NONBLOCK`` (opening a named pipe would otherwise block before
  any check could run) and checked with ``fstat`` *after* opening: only regular files are
  read; a FIFO, a device (``/dev/zero``, also through a symlink), a socket or a directory is
  refused by name. Standard input is read only where the user wrote ``-``;
* the size cap counts the bytes actually read, never ``st_size`` (``/proc`` files report 0),
  and reading stops one byte past the cap;
* text is UTF-8 (a BOM is dropped); UTF-16/UTF-32 (with a byte-order mark, or ASCII text in
  UTF-16 without one) and binary content (NUL bytes) are named as such, with the fix;
* every failure is an :class:`~servelab.errors.InputError` (exit 2) naming the file.

The caps are :class:`Limit` objects: a default, raised with an environment variable
(docs/limits.md lists them all). Kept free of heavy imports: ``servelab lint`` uses it and
must start fast.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, NamedTuple

from servelab.errors import CapabilityError, InputError, ServelabError, UsageError

#: The argument that means "read standard input", where a command accepts it.
STDIN = "-"
_CHUNK = 1024 * 1024
_SIZE = re.compile(r"^([0-9]{1,15})\s*(k|m|g|ki|mi|gi|kib|mib|gib|kb|mb|gb)?$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


# ------------------------------------------------------- where a PR-named path may lead

#: The kinds of path that a file a pull request can change names (docs/limits.md): each is
#: confined to the repository unless ``--allow-path KIND=DIR`` (the action's ``allow-paths``
#: input) names a directory for that kind. Nothing in the repository can widen it.
PATH_KINDS = ("context", "dockerfile", "buildArgsFile", "model", "bodyFile", "ignoreFile",
              "vex", "cacheDir", "settings")


def repository_root(start: Path) -> Path:
    """The realpath of the repository holding *start* (a file or directory): the nearest
    directory at or above it with a ``.git`` entry (the git top level; a worktree's or a
    submodule's ``.git`` file counts), else *start*'s own directory. No subprocess."""
    here = Path(os.path.realpath(start))
    if not here.is_dir():
        here = here.parent
    for d in (here, *here.parents):
        if os.path.lexists(d / ".git"):
            return d
    return here


class AllowedPath(NamedTuple):
    """``--allow-path KIND=DIR``: paths of *kind* may lead under *directory* (a realpath)."""

    kind: str
    directory: Path


def parse_allow_path(text: str) -> AllowedPath:
    """``KIND=DIR`` (``model=/models``) as an :class:`AllowedPath`; UsageError otherwise."""
    kind, sep, where = text.partition("=")
    canon = {k.lower(): k for k in PATH_KINDS}.get(kind.strip().lower())
    if not sep or canon is None or not where.strip():
        raise UsageError(
            f"--allow-path {text!r} is not KIND=DIR",
            hint=f"give KIND=DIR with KIND one of {', '.join(PATH_KINDS)}, e.g. model=/models",
        )
    if any(c in where for c in "\n\r\0"):
        raise UsageError(f"--allow-path {text!r}: a directory with a line break or NUL",
                         hint="give the directory's path on one line")
    return AllowedPath(canon, Path(os.path.realpath(where.strip())))


class PathPolicy(NamedTuple):
    """Where the paths named in an experiment (or found beside it) may lead: inside *root*
    (a realpath), or under a directory the command line allowed for their kind."""

    root: Path
    allowed: tuple[AllowedPath, ...] = ()

    @classmethod
    def for_file(cls, file: Path, allowed: tuple[AllowedPath, ...] = ()) -> PathPolicy:
        return cls(repository_root(file), tuple(allowed))

    def permits(self, resolved: Path, kind: str) -> bool:
        """Whether the realpath *resolved* lies in the repository or an allowed directory."""
        dirs = [self.root, *(a.directory for a in self.allowed if a.kind == kind)]
        return any(resolved == d or resolved.is_relative_to(d) for d in dirs)

    def confine(self, value: str, base: Path, *, kind: str, field: str, file: str,
                line: int | None = None) -> Path:
        """The realpath of *value* (relative to *base*) when :meth:`permits` allows it; an
        InputError naming *file*, *line* and the fix otherwise. Open or mount what this
        returns, never *value* itself (a symbolic link could be swapped in between)."""
        if "\0" in value or "\0" in str(base):  # a YAML "\0" escape: no file is named so
            what = f"{value!r}" if "\0" in value else f"{value!r} is relative to {str(base)!r}: it"
            raise InputError(f"{field} {what} holds a NUL character, which no file name can",
                             file=file, line=line,
                             hint="remove the \\0 (a YAML escape) from the path")
        resolved = Path(os.path.realpath(base / value))
        if self.permits(resolved, kind):
            note_input_path(resolved)  # a file the experiment names: never an output
            return resolved
        lexical = Path(os.path.normpath(Path(os.path.realpath(base)) / value))
        how = "" if lexical == resolved else f" (through a symbolic link, to {resolved})"
        raise InputError(
            f"{field} {value!r} leads outside the repository {self.root}{how}",
            file=file, line=line,
            hint=f"name a path inside {self.root}; to use one outside it on purpose, pass "
            f"--allow-path {kind}=DIR on the command line (the action's allow-paths input): "
            "no file in the repository can allow it",
        )


class Limit(NamedTuple):
    """A documented cap: *default*, or the value of the environment variable *env*."""

    env: str
    default: int
    what: str

    def value(self) -> int:
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        m = _SIZE.match(raw)
        if m is None or int(m.group(1)) == 0:
            raise UsageError(
                f"{self.env}={raw!r} is not a positive whole number",
                hint=f"set {self.env} to a number (suffixes K, M, G allowed), or unset it for "
                f"the default {self.default}",
            )
        return int(m.group(1)) * _UNITS[(m.group(2) or "")[:1].lower()]

    def raise_hint(self) -> str:
        return f"to raise the limit, set {self.env} (default {self.default}; docs/limits.md)"


#: Text inputs: experiments, manifests, Dockerfiles, build-args, lint settings, image env.
TEXT_BYTES = Limit("SERVELAB_MAX_TEXT_BYTES", 1024 * 1024, "bytes of a text input file")
#: JSON written by servelab and read back: result.json, summary.json.
JSON_BYTES = Limit("SERVELAB_MAX_JSON_BYTES", 32 * 1024 * 1024, "bytes of a JSON input file")
#: Other user files taken as they are (a request body file).
BLOB_BYTES = Limit("SERVELAB_MAX_BODY_BYTES", 64 * 1024 * 1024, "bytes of a request body file")
#: Digits in an integer read from user text (Python refuses more than 4300 anyway).
MAX_INT_DIGITS = 18

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _cap(max_bytes: int | Limit) -> tuple[int, str | None]:
    if isinstance(max_bytes, Limit):
        return max_bytes.value(), max_bytes.raise_hint()
    return max_bytes, None


def _open_regular(path: Path, name: str, what: str, stdin_ok: bool) -> int:
    """A descriptor of the regular file *path*; InputError for anything else."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as e:
        why = "no such file (a symbolic link to nothing)" if path.is_symlink() else "no such file"
        raise InputError(why, file=name, hint="check the path") from e
    except PermissionError as e:
        raise InputError("permission denied", file=name, hint="make it readable") from e
    except OSError as e:  # a socket cannot be opened (ENXIO): name what it is
        mode = _mode_or_none(path)
        if mode is not None and not stat.S_ISREG(mode):
            raise _not_regular(mode, name, what, stdin_ok) from e
        raise InputError(f"cannot open: {e.strerror or e}", file=name,
                         hint="pass a regular file") from e
    st = os.fstat(fd)
    mode = st.st_mode
    if stat.S_ISREG(mode):
        note_input(st)
        return fd
    os.close(fd)
    raise _not_regular(mode, name, what, stdin_ok)


def _mode_or_none(path: Path) -> int | None:
    try:
        return path.stat().st_mode
    except OSError:
        return None


def _not_regular(mode: int, name: str, what: str, stdin_ok: bool) -> InputError:
    if stat.S_ISDIR(mode):
        return InputError(f"is a directory, not a {what}", file=name,
                          hint=f"pass the {what} itself")
    more = ", or pass - to read it from standard input" if stdin_ok else ""
    return InputError(
        f"is {_kind(mode)}, not a regular file: servelab reads only regular files",
        file=name,
        hint=f"a pipe or device may block or never end; save the content to a file first{more}",
    )


def _read_capped(fd: int, cap: int, name: str, what: str, hint: str | None) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = os.read(fd, min(_CHUNK, cap + 1 - total))
        except BlockingIOError:  # stdin set non-blocking by someone else: wait a little
            import select

            select.select([fd], [], [], 0.1)
            continue
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror or e}", file=name) from e
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            fix = "check that this is the right file"
            raise InputError(
                f"{what} is over the {cap}-byte limit (stopped reading there)", file=name,
                hint=f"{fix}; {hint}" if hint else fix,
            )


def read_bytes(path: Path, *, max_bytes: int | Limit = TEXT_BYTES, what: str = "file",
               display: str | None = None, hint: str | None = None,
               stdin_ok: bool = False) -> bytes:
    """The bytes of the regular file *path* (or of standard input, when *stdin_ok* and the
    path is ``-``), at most *max_bytes*; InputError (exit 2) naming the file and the fix."""
    if stdin_ok and str(path) == STDIN:
        return read_stdin(max_bytes=max_bytes, what=what)
    name = display or str(path)
    cap, raise_hint = _cap(max_bytes)
    fd = _open_regular(path, name, what, stdin_ok)
    try:
        return _read_capped(fd, cap, name, what, _join(hint, raise_hint))
    finally:
        os.close(fd)


def head_of(path: Path, n: int) -> tuple[int, bytes] | None:
    """(size, first *n* bytes) of *path* when it is a regular file that can be read, else
    None: never blocks on a pipe, never reads a device. For scans of a build context."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size, os.read(fd, n)
    except OSError:
        return None
    finally:
        os.close(fd)


def _join(*hints: str | None) -> str | None:
    parts = [h for h in hints if h]
    return "; ".join(parts) if parts else None


def read_stdin(*, max_bytes: int | Limit = TEXT_BYTES, what: str = "input") -> bytes:
    """Standard input, at most *max_bytes* (the user passed ``-`` explicitly)."""
    name = "<stdin>"
    cap, raise_hint = _cap(max_bytes)
    stream = sys.stdin
    if stream is None:
        raise InputError("standard input is closed", file=name,
                         hint="pipe the content in, or pass a file")
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # an in-memory stream (embedding, tests): read it capped
        return _read_stream_capped(stream, cap, name, what, raise_hint)
    try:
        mode = os.fstat(fd).st_mode
    except OSError as e:
        raise InputError("standard input is closed", file=name,
                         hint="pipe the content in, or pass a file") from e
    if stat.S_ISDIR(mode):
        raise InputError("standard input is a directory", file=name, hint="pipe a file in")
    if stat.S_ISREG(mode):
        note_input(os.fstat(fd))
    return _read_capped(fd, cap, name, what, raise_hint)


def _read_stream_capped(stream: Any, cap: int, name: str, what: str,
                        hint: str | None) -> bytes:
    # a text stream's bytes where it has them: bytes that are not UTF-8 (UTF-16, binary) are
    # decode()'s to name, not a UnicodeDecodeError from the stream's own decoder
    chunk = getattr(stream, "buffer", stream).read(cap + 1)
    data = chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
    if len(data) > cap:
        fix = "check that this is the right input"
        raise InputError(f"{what} is over the {cap}-byte limit (stopped reading there)",
                         file=name, hint=f"{fix}; {hint}" if hint else fix)
    return data


_BOMS = (
    (b"\x00\x00\xfe\xff", "UTF-32 (big-endian)", "UTF-32"),
    (b"\xff\xfe\x00\x00", "UTF-32 (little-endian)", "UTF-32"),
    (b"\xfe\xff", "UTF-16 (big-endian)", "UTF-16"),
    (b"\xff\xfe", "UTF-16 (little-endian)", "UTF-16"),
)


def _utf16_without_bom(raw: bytes) -> str | None:
    """"UTF-16 (little-endian)"/"(big-endian)" when *raw* looks like ASCII text in UTF-16."""
    head = raw[:512]
    pairs = len(head) // 2
    if pairs < 4:
        return None
    even_nul = sum(1 for i in range(0, pairs * 2, 2) if head[i] == 0)
    odd_nul = sum(1 for i in range(1, pairs * 2, 2) if head[i] == 0)
    if odd_nul >= 0.9 * pairs and even_nul <= 0.05 * pairs:
        return "UTF-16 (little-endian)"
    if even_nul >= 0.9 * pairs and odd_nul <= 0.05 * pairs:
        return "UTF-16 (big-endian)"
    return None


def _encoding_error(raw: bytes, name: str, what: str, hint: str) -> InputError | None:
    for bom, label, family in _BOMS:
        if raw.startswith(bom):
            return InputError(
                f"{label} text (it starts with a {family} byte-order mark), not UTF-8",
                file=name, line=1,
                hint=f"save the {what} as UTF-8 (e.g. iconv -f {family} -t UTF-8 FILE > NEW)",
            )
    guess = _utf16_without_bom(raw)
    if guess:
        return InputError(
            f"{guess} text without a byte-order mark, not UTF-8", file=name, line=1,
            hint=f"save the {what} as UTF-8 (e.g. iconv -f UTF-16 -t UTF-8 FILE > NEW)",
        )
    nul = raw.find(b"\x00")
    if nul >= 0:
        return InputError(
            f"binary file, not a {what} (contains NUL bytes)", file=name,
            line=raw.count(b"\n", 0, nul) + 1, column=nul - raw.rfind(b"\n", 0, nul),
            hint=f"pass the {what} itself, as UTF-8 text",
        )
    return None


def decode(raw: bytes, name: str, *, hint: str = "save the file as UTF-8",
           what: str = "text file") -> str:
    """UTF-8 text (a BOM is dropped), or InputError naming UTF-16/32 and binary content, or
    the line and column of the first byte that is not UTF-8."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    bad = _encoding_error(raw, name, what, hint)
    if bad is not None:
        raise bad
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})",
            file=name, line=line, column=col, hint=hint,
        ) from e


def read_text(path: Path, *, max_bytes: int | Limit = TEXT_BYTES, what: str = "file",
              display: str | None = None, hint: str | None = None,
              stdin_ok: bool = False) -> str:
    """:func:`read_bytes` then :func:`decode`: UTF-8 text of a regular file (or ``-``)."""
    raw = read_bytes(path, max_bytes=max_bytes, what=what, display=display, hint=hint,
                     stdin_ok=stdin_ok)
    name = "<stdin>" if stdin_ok and str(path) == STDIN else (display or str(path))
    return decode(raw, name, hint=hint or f"save the {what} as UTF-8", what=what)


#: Digits of an integer in JSON input (an unsigned 64-bit number has 20).
MAX_JSON_INT_DIGITS = 40


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a JSON number")


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits (at most {MAX_JSON_INT_DIGITS})")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 is read as infinity
        raise ValueError(f"{text[:40]} is out of the range of a number")
    return value


def loads_json(text: str, name: str, *, hint: str | None = None,
               problem: str = "invalid JSON") -> Any:
    """Strict JSON: no NaN/Infinity, finite numbers, integers of at most
    :data:`MAX_JSON_INT_DIGITS` digits, nesting Python can handle; InputError with line and
    column otherwise."""
    import json  # here, not at the top: `servelab lint` reads no JSON (3 ms of its start)

    try:
        return json.loads(text, parse_constant=_no_constant, parse_int=_json_int,
                          parse_float=_json_float)
    except json.JSONDecodeError as e:
        raise InputError(f"{problem}: {e.msg}", file=name, line=e.lineno, column=e.colno,
                         hint=hint) from e
    except ValueError as e:  # NaN/Infinity, out-of-range numbers, over-long integers
        raise InputError(f"{problem}: {e}", file=name, hint=hint) from e
    except RecursionError as e:
        raise InputError(f"{problem}: nested too deeply", file=name, hint=hint) from e


def read_json(path: Path, *, max_bytes: int | Limit = JSON_BYTES, what: str = "JSON file",
              hint: str | None = None, stdin_ok: bool = False) -> Any:
    """The parsed JSON of a regular file (or ``-``): :func:`read_text` then :func:`loads_json`."""
    text = read_text(path, max_bytes=max_bytes, what=what, hint=hint, stdin_ok=stdin_ok)
    name = "<stdin>" if stdin_ok and str(path) == STDIN else str(path)
    return loads_json(text, name, hint=hint)


def ascii_int(text: str, *, max_digits: int = MAX_INT_DIGITS) -> int | None:
    """The integer written in ASCII digits in *text* (spaces around allowed), else None.

    ``str.isdigit()`` accepts ``"²"`` (which ``int()`` refuses) and ``int()`` takes ``"٣"``
    as 3: user numbers (k8s quantities, GPU indexes, repeats) are ASCII digits only.
    """
    s = text.strip()
    if not s or len(s) > max_digits or not (s.isascii() and s.isdigit()):
        return None
    return int(s)


def finite_float(text: str) -> float:
    """A finite float from an option value; ValueError for NaN, infinity or non-numbers."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


def cache_dir() -> Path:
    """servelab's cache: SERVELAB_CACHE_DIR, else $XDG_CACHE_HOME/servelab or ~/.cache/servelab."""
    explicit = os.environ.get("SERVELAB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "servelab"


# ---------------------------------------------------------------------------- the one writer
#
# Every file servelab writes goes through here (docs/limits.md, "How files are written"):
#
# * never onto an input: each file the safe reader opened is remembered by (st_dev, st_ino),
#   so `lint -o F F`, a hard link or a symbolic link (also to a directory) to an input is
#   refused (exit 2) and the input is left as it was;
# * a regular file is written atomically: a temp file beside it, fsync, rename; a named pipe
#   or character device the user named (`-o /dev/stdout`) is written in place; GitHub's step
#   files are appended to (:func:`append_file`);
# * an output directory is claimed (:func:`claim_dir`): flock(LOCK_EX|LOCK_NB) on a lock file
#   in it, held while the command runs, and under the lock no name the command writes may
#   already be there: servelab never overwrites a user's file;
# * a failure names the path: exit 2 for what the user can fix (a directory, a missing parent,
#   no permission, a pipe nobody reads), exit 3 for the disk (ENOSPC, EDQUOT, EROFS, EIO).

#: (st_dev, st_ino) of every file read as input by this process.
_INPUTS: set[tuple[int, int]] = set()
#: The lock file :func:`claim_dir` holds in an output directory.
LOCK_FILE = ".servelab.lock"
#: errno values that are the disk's fault, not the user's path: exit 3.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO})
_DISK_HINTS = {
    errno.ENOSPC: "free disk space, or write to another filesystem",
    errno.EDQUOT: "free space in your disk quota, or write to another filesystem",
    errno.EROFS: "the filesystem is read-only: write to a writable directory",
    errno.EIO: "the disk reported an I/O error: check it, or write elsewhere",
}
_PATH_HINTS = {
    errno.ENOENT: "the directory does not exist: create it first, or give another path",
    errno.ENOTDIR: "a part of the path is not a directory: give another path",
    errno.EACCES: "permission denied: make the directory writable, or give another path",
    errno.EPERM: "permission denied: make the directory writable, or give another path",
    errno.EISDIR: "give a file path, e.g. DIR/report.txt",
    errno.ENXIO: "a named pipe that nobody reads: start its reader first, or give a file",
    errno.ELOOP: "the path is a loop of symbolic links: give another path",
    errno.ENAMETOOLONG: "give a shorter path",
}


def note_input(st: os.stat_result) -> None:
    """Remember a file read as input, so that no output replaces it."""
    _INPUTS.add((st.st_dev, st.st_ino))


def note_input_path(path: Path | str) -> None:
    """Remember the file at *path* as an input of this command although servelab itself may
    not read it (a VEX document handed to Trivy, a Dockerfile the experiment names that
    ``validate`` only checks): no output of the command may replace it. Every path option of
    the command line that names an input goes through this (``commands._common.input_path``),
    and so does every path an experiment names (:meth:`PathPolicy.confine`). Nothing happens
    for a path that is not a regular file yet."""
    with contextlib.suppress(OSError, ValueError):
        st = Path(path).stat()
        if stat.S_ISREG(st.st_mode):
            note_input(st)


def is_disk_fault(e: OSError) -> bool:
    """The disk's fault (full, over quota, read-only, I/O error): exit 3, not the user's."""
    return e.errno in _DISK_ERRNOS


def write_error(e: OSError, path: Path | str, what: str = "the output") -> ServelabError:
    """The error for a failed write of *path*: exit 3 for the disk, else exit 2; it names the
    path and the fix, never a traceback."""
    why = e.strerror or str(e)
    if e.errno in _DISK_ERRNOS:
        return CapabilityError(f"{path}: cannot write {what}: {why}",
                               hint=_DISK_HINTS[e.errno or errno.EIO])
    return InputError(f"cannot write {what}: {why}", file=str(path),
                      hint=_PATH_HINTS.get(e.errno or 0, "give a writable file path"))


def _stat_or_none(path: Path, what: str) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise write_error(e, path, what) from e


def _check_target(path: Path, st: os.stat_result | None, what: str, onto_input: bool) -> None:
    if st is None:
        return
    if not onto_input and (st.st_dev, st.st_ino) in _INPUTS:
        raise InputError(f"is an input of this command: writing {what} there would replace "
                         "it; nothing was written", file=str(path),
                         hint="give another output path")
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"is a directory: cannot write {what} there", file=str(path),
                         hint=_PATH_HINTS[errno.EISDIR])
    if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        raise InputError(f"is {_kind(st.st_mode)}: servelab writes {what} only to a file, a "
                         "named pipe or a character device", file=str(path),
                         hint="give a file path, or - for standard output")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_in_place(path: Path, data: bytes, what: str) -> None:
    """A named pipe or character device the user named on purpose: written in place."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise write_error(e, path, what) from e
    try:
        os.set_blocking(fd, True)
        _write_all(fd, data)
    except OSError as e:
        raise write_error(e, path, what) from e
    finally:
        os.close(fd)


def _temp_beside(path: Path, what: str) -> tuple[int, Path]:
    parent = os.path.realpath(path.parent)
    if parent in {"/dev", "/proc"} or parent.startswith(("/dev/", "/proc/")):
        raise InputError(f"is in {parent}: servelab writes there only to an existing device "
                         "or standard stream, never a new file", file=str(path),
                         hint="give a file path, or /dev/stdout")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return os.open(tmp, flags, 0o666), tmp
    except OSError as e:
        raise write_error(e, path, what) from e


def _sync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _atomic(path: Path, what: str, mode: int | None = None) -> Any:
    """A descriptor of a temp file beside *path*; on success fsync'd and renamed onto it."""
    fd, tmp = _temp_beside(path, what)
    try:
        try:
            yield fd
            os.fsync(fd)
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        tmp.replace(path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise write_error(e, path, what) from e
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _sync_dir(path.parent)


_FD_PATH = re.compile(r"^/(?:dev|proc/self)/fd/([0-9]{1,4})$")
_STD_PATHS = {"/dev/stdout": 1, "/dev/stderr": 2}


def _fd_of(path: Path) -> int | None:
    """The descriptor ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N``
    names: written as it is (its offset and append mode kept, as a shell's ``>`` would)."""
    text = str(path)
    if text in _STD_PATHS:
        return _STD_PATHS[text]
    m = _FD_PATH.match(text)
    return int(m.group(1)) if m else None


def _write_fd(fd: int, path: Path, raw: bytes, what: str) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    try:
        st = os.fstat(fd)
        _check_target(path, st, what, False)
        _write_all(fd, raw)
    except OSError as e:
        raise write_error(e, path, what) from e


def _real(path: Path) -> Path:
    """A symbolic link the user named is followed (as a shell's ``>`` follows it): the
    rename lands on its target, and the link stays."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def drop_stdout() -> None:
    """Point standard output's descriptor at /dev/null, after a write to it failed (a full
    disk, a pipe whose reader is gone): what is still buffered goes nowhere, so Python's own
    flush at exit does not fail a second time with a traceback."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def check_output(path: Path, *, what: str = "the output") -> None:
    """Refuse now (exit 2) an output path that :func:`write_file` would refuse later: an input
    of this command, a directory, a block device or a socket. The CLI calls it for every
    output option once the command line is parsed (every input option noted by then), so a
    long scan or build never ends in "would replace an input"."""
    if _fd_of(path) is not None or str(path) == STDIN:
        return
    real = _real(path)
    _check_target(real, _stat_or_none(real, what), what, False)


def write_file(path: Path, data: str | bytes, *, what: str = "the output",
               onto_input: bool = False) -> None:
    """Write *data* (text is UTF-8) to *path*: atomically for a regular or new file, in
    place for a named pipe, a character device or a standard stream (``-o /dev/stdout``);
    never onto an input (unless *onto_input*: ``pin --write`` rewrites its Dockerfile). A
    replaced file keeps its mode."""
    # a lone surrogate left in a JSON report is written as its escape (valid JSON)
    raw = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    fd = _fd_of(path)
    if fd is not None:
        _write_fd(fd, path, raw, what)
        return
    path = _real(path)
    st = _stat_or_none(path, what)
    _check_target(path, st, what, onto_input)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_in_place(path, raw, what)
        return
    with _atomic(path, what, stat.S_IMODE(st.st_mode) if st else None) as fd:
        _write_all(fd, raw)


def copy_file(path: Path, source: Path, *, what: str = "the output") -> None:
    """Copy the regular file *source* to *path* through :func:`write_file`'s rules, streamed
    (an SBOM may be large)."""
    if _fd_of(path) is not None:
        write_file(path, read_bytes(source, max_bytes=BLOB_BYTES), what=what)
        return
    path = _real(path)
    st = _stat_or_none(path, what)
    _check_target(path, st, what, False)
    src = _open_regular(source, str(source), "file", False)
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            _write_in_place(path, _read_capped(src, BLOB_BYTES.value(), str(source), "file",
                                               None), what)
            return
        with _atomic(path, what) as fd:
            while chunk := os.read(src, _CHUNK):
                _write_all(fd, chunk)
    finally:
        os.close(src)


@contextlib.contextmanager
def open_output(path: Path, *, what: str = "the output") -> Any:
    """A binary file object to stream a large output (an OCI archive) into; renamed onto
    *path* when the block ends without an error, removed otherwise."""
    path = _real(path)
    st = _stat_or_none(path, what)
    _check_target(path, st, what, False)
    with _atomic(path, what) as fd:
        f = os.fdopen(os.dup(fd), "wb")
        try:
            yield f
            f.flush()
        finally:
            f.close()


def append_file(path: Path, text: str, *, what: str = "the output") -> int:
    """Append *text* to *path* (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY: append-only, never
    replaced); the size the file had before. Errors as :func:`write_file`'s."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        raise write_error(e, path, what) from e
    try:
        st = os.fstat(fd)
        _check_target(path, st, what, False)
        os.set_blocking(fd, True)
        _write_all(fd, text.encode("utf-8"))
    except OSError as e:
        raise write_error(e, path, what) from e
    finally:
        os.close(fd)
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def append_locked(path: Path, more: Any, *, max_bytes: int | Limit, what: str = "the output"
                  ) -> int:
    """Append to the regular file *path* (created when missing) what ``more(old_text)``
    returns, *old_text* being the file as it is: read and appended under an exclusive
    ``flock`` on the file, in one ``write`` at its end, then fsync'd. Two servelabs appending
    to one file (``history --append-to`` from parallel jobs) both land, none reads the file
    half-written by the other. The file's lines are kept as they are (a missing last newline
    is added first). Returns how many bytes were appended. Errors as :func:`write_file`'s;
    InputError when the file is over *max_bytes* or not UTF-8."""
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOCTTY | os.O_NOFOLLOW
    try:
        fd = os.open(_real(path), flags, 0o666)
    except OSError as e:
        raise write_error(e, path, what) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"is {_kind(st.st_mode)}: servelab appends only to a regular file",
                             file=str(path), hint="give a file path")
        fcntl.flock(fd, fcntl.LOCK_EX)
        cap, hint = _cap(max_bytes)
        old = decode(_read_capped(fd, cap, str(path), what, hint), str(path), what=what)
        note_input(os.fstat(fd))
        text = more(old)
        if not text:
            return 0
        if old and not old.endswith("\n"):
            text = "\n" + text
        raw = text.encode("utf-8", "backslashreplace")
        os.lseek(fd, 0, os.SEEK_END)
        _write_all(fd, raw)
        os.fsync(fd)
        return len(raw)
    except OSError as e:
        raise write_error(e, path, what) from e
    finally:
        os.close(fd)  # the lock goes with the descriptor


def write_text_atomic(path: Path, text: str) -> None:
    """:func:`write_file` of *text* (the name servelab's callers have used)."""
    write_file(path, text)


def _collisions(path: Path, names: tuple[str, ...]) -> list[str]:
    import fnmatch

    try:
        there = [p.name for p in path.iterdir()]
    except OSError as e:
        raise write_error(e, path, "the output directory") from e
    return sorted(n for n in there if any(fnmatch.fnmatchcase(n, p) for p in names))


def _make_dir(path: Path, option: str) -> bool:
    """Make the output directory *path*; True when this call made it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise write_error(e, path, f"the {option} directory") from e
    if st is not None and not stat.S_ISDIR(st.st_mode):
        kind = "an existing file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise InputError(f"{option} names {kind}, not a directory; nothing was written",
                         file=str(path),
                         hint=f"give {option} a new or empty directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(e, path, f"the {option} directory") from e
    return st is None


@contextlib.contextmanager
def claim_dir(path: Path, *, names: tuple[str, ...], option: str = "--out") -> Any:
    """Claim the output directory *path* (made if missing) for this command's lifetime: an
    exclusive, non-blocking flock on its lock file, then, under the lock, none of *names*
    (fnmatch patterns: what the command writes at the top) may already be there. A second
    servelab on the same directory, or one that would overwrite a file, is exit 2 at once."""
    import fcntl

    made = _make_dir(path, option)
    lock = path / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        raise write_error(e, lock, f"the lock file of {option}") from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            raise InputError(f"another servelab command is writing to this {option} directory "
                             "now; nothing was written", file=str(path),
                             hint=f"give each run its own {option} directory") from e
        try:
            _check_free(path, names, option)
            yield path
        finally:  # still locked: a later command checks the names under its own lock
            with contextlib.suppress(OSError):
                lock.unlink()
            if made:  # a directory made for a command that wrote nothing goes again
                with contextlib.suppress(OSError):
                    path.rmdir()
    finally:
        os.close(fd)


def _check_free(path: Path, names: tuple[str, ...], option: str) -> None:
    found = _collisions(path, names)
    if found:
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        raise InputError(f"{option} already holds {', '.join(found[:5])}{more}: servelab never "
                         "overwrites files; nothing was written", file=str(path),
                         hint=f"give {option} a new or empty directory")


def read_tail(path: Path, max_bytes: int, *, what: str = "file") -> bytes:
    """The last *max_bytes* of the regular file *path* (a log), by the safe reader's rules:
    a pipe or device is refused (InputError), never waited on or read without end."""
    fd = _open_regular(path, str(path), what, False)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            os.lseek(fd, size - max_bytes, os.SEEK_SET)
        return _read_capped(fd, max_bytes, str(path), what, None)[-max_bytes:]
    except InputError:  # grown past the cap while read: keep its end
        os.lseek(fd, -max_bytes, os.SEEK_END)
        return os.read(fd, max_bytes)
    finally:
        os.close(fd)
