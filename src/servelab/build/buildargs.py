"""Build arguments: ``KEY=VALUE`` as ``--build-arg`` takes them, and files of such lines.

One parser for every reader of a build-args file (the experiment's ``buildArgsFile``,
``servelab lint --build-args-file``), so lint and build see the same values. Light imports:
``servelab lint`` uses it.
"""

from __future__ import annotations

import re
from pathlib import Path

from servelab.errors import InputError
from servelab.textio import TEXT_BYTES, read_text

_BUILD_ARG = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
MAX_BYTES = TEXT_BYTES.default


def parse_build_arg(text: str, where: str = "--build-arg") -> tuple[str, str]:
    """``NAME=value`` -> (name, value); a value in matching quotes loses them."""
    m = _BUILD_ARG.match(text.strip())
    if not m:
        raise InputError(
            f"{where}: expected KEY=VALUE, got {text!r}",
            hint="write NAME=value, e.g. BASE_IMAGE=registry/name:tag@sha256:...",
        )
    value = m.group(2)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return m.group(1), value


def parse_build_args_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines; blank lines and ``#`` comments are skipped."""
    text = read_text(path, max_bytes=TEXT_BYTES, what="build-args file")
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not _BUILD_ARG.match(line):
            raise InputError(
                f"expected KEY=VALUE, got {line!r}",
                file=str(path),
                line=n,
                hint="one NAME=value per line; # starts a comment",
            )
        key, value = parse_build_arg(line)
        out[key] = value
    return out
