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

from servelab.errors import InputError, UsageError

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
        resolved = Path(os.path.realpath(base / value))
        if self.permits(resolved, kind):
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
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
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
    return _read_capped(fd, cap, name, what, raise_hint)


def _read_stream_capped(stream: Any, cap: int, name: str, what: str,
                        hint: str | None) -> bytes:
    chunk = stream.read(cap + 1)
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
            line=raw.count(b"\n", 0, nul) + 1, hint=f"pass the {what} itself, as UTF-8 text",
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


# ---------------------------------------------------------------------------- writing


def _write_special(path: Path, data: bytes) -> None:
    """Write to an existing FIFO or device (``-o /dev/stdout``) in place, never replacing it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        why = "a named pipe that nobody reads" if e.errno == errno.ENXIO else e.strerror
        raise InputError(f"cannot write the output: {why}", file=str(path),
                         hint="pass a regular file path, or - for standard output") from e
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        raise InputError(f"cannot write the output: {e.strerror}", file=str(path)) from e
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """Write *text* to *path* through a temp file beside it: never a partial file, never a
    temp file left behind. A directory as *path* is an InputError (exit 2); an existing
    device or named pipe is written in place."""
    data = text.encode("utf-8")
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputError(f"cannot write the output: {e.strerror}", file=str(path)) from e
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory: cannot write the output there", file=str(path),
                         hint="give a file path, e.g. DIR/report.txt")
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_special(path, data)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise InputError(f"cannot write the output: {e.strerror or e}", file=str(path),
                         hint="check that the directory exists and is writable") from e
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def cache_dir() -> Path:
    """servelab's cache: SERVELAB_CACHE_DIR, else $XDG_CACHE_HOME/servelab or ~/.cache/servelab."""
    explicit = os.environ.get("SERVELAB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "servelab"
