"""Reading user files as text: clear errors for missing, oversized, binary and non-UTF-8 input.

Kept free of heavy imports: ``servelab lint`` uses it and must start fast.
"""

from __future__ import annotations

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
