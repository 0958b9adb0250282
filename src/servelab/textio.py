"""Files: reading user input with clear errors (missing, oversized, binary, non-UTF-8),
writing outputs atomically, and servelab's cache directory.

Kept free of heavy imports: ``servelab lint`` uses it and must start fast.
"""

from __future__ import annotations

import os
from pathlib import Path

from servelab.errors import InputError


def read_bytes(path: Path, *, max_bytes: int, what: str = "file",
               display: str | None = None, hint: str | None = None) -> bytes:
    """The bytes of *path*, or InputError (exit 2) naming the file and the fix."""
    name = display or str(path)
    try:
        if path.is_dir():
            raise InputError(f"is a directory, not a {what}", file=name)
        size = path.stat().st_size
        if size > max_bytes:
            raise InputError(
                f"{what} is {size} bytes, over the {max_bytes}-byte limit", file=name,
                hint=hint or "check that this is the right file",
            )
        return path.read_bytes()
    except FileNotFoundError as e:
        raise InputError("no such file", file=name, hint="check the path") from e
    except PermissionError as e:
        raise InputError("permission denied", file=name, hint="make it readable") from e
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", file=name) from e


def decode(raw: bytes, name: str, *, hint: str = "save the file as UTF-8") -> str:
    """UTF-8 text (a BOM is dropped), or InputError with the line and column of the bad byte."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})",
            file=name, line=line, column=col, hint=hint,
        ) from e


def write_text_atomic(path: Path, text: str) -> None:
    """Write *text* to *path* through a temp file beside it: never a partial file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def cache_dir() -> Path:
    """servelab's cache: SERVELAB_CACHE_DIR, else $XDG_CACHE_HOME/servelab or ~/.cache/servelab."""
    explicit = os.environ.get("SERVELAB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "servelab"
