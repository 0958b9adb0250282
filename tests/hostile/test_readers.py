"""One reader for every user file: no module outside the allowed ones reads a path directly.

A direct ``Path.read_text()``, ``open()``, ``json.load()`` or ``sys.stdin`` read of a user
file is what let a named pipe hang servelab and ``/dev/zero`` eat its memory. User files go
through :mod:`servelab.textio` (``read_bytes``, ``read_text``, ``read_json``, ``head_of``).
The modules below read only what servelab itself wrote or runs (its cache, /proc, package
resources, a tool's output) or are the verified OCI blob reader; a direct read anywhere else
fails this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "servelab"

#: module (path under src/servelab, a folder name ends with /) -> why it may read directly
ALLOWED: dict[str, str] = {
    "textio.py": "the safe reader itself",
    "image/": "the verified OCI blob reader and image layouts (servelab.image.blob)",
    "cleanup.py": "/proc/<pid>/stat of servelab's own processes",
    "spec.py": "the JSON Schemas shipped in the package (importlib.resources)",
    "run/doctor.py": "the archive its own probe build wrote",
    "hashing.py": "hashes of build inputs for result.json (streamed in chunks, not parsed)",
    "build/": "builder and cache files servelab wrote; the exported OCI archive",
    "scan/": "Trivy's reports, cache metadata and the OCI layout servelab exported",
    "smoke/": "/proc, the prober's own messages, servelab's weights cache, the image archive",
    "node/": "blobs it fetched from the registry itself (sha256 checked as they are written)",
    "gpu/host.py": "the torch probe script shipped in the package and its JSON output",
    "github/": "summary.json/summary.md the run just wrote, GitHub's step files, the event",
    "k8s/imagefiles.py": "image layers through servelab.image's verified blob reader",
    "lint/hadolint.py": "hadolint's JSON output",
    "lint/basecfg.py": "docker's and the registry's answers about a base image",
    "lint/parse.py": "its parser child reads, from a pipe, text the parent read with textio",
    "proc.py": "subprocess.Popen, not a file read",
    "commands/action_outputs.py": "the log of the servelab step the composite action captured",
}

_METHODS = {"read_text", "read_bytes", "open", "fdopen"}
_RECEIVERS_OK = {"textio", "yamlsafe"}  # servelab's safe readers, called as module.function


def _direct_reads(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "stdin" and \
                isinstance(node.value, ast.Name) and node.value.id == "sys":
            found.append((node.lineno, "sys.stdin"))
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id == "open":
            found.append((node.lineno, "open()"))
        elif isinstance(fn, ast.Attribute):
            receiver = fn.value.id if isinstance(fn.value, ast.Name) else ""
            if fn.attr in _METHODS and receiver not in _RECEIVERS_OK:
                found.append((node.lineno, f".{fn.attr}()"))
            elif fn.attr == "load" and receiver in {"json", "tomllib", "yaml"}:
                found.append((node.lineno, f"{receiver}.load()"))
    return found


def _allowed(rel: str) -> bool:
    return any(rel == k or (k.endswith("/") and rel.startswith(k)) for k in ALLOWED)


def test_user_files_are_read_only_through_the_safe_reader() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if _allowed(rel):
            continue
        for line, what in _direct_reads(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"src/servelab/{rel}:{line}: {what}")
    assert not offenders, (
        "read user files with servelab.textio (read_bytes/read_text/read_json/head_of), "
        "or add the module to ALLOWED with the reason it reads only servelab's own files:\n"
        + "\n".join(offenders)
    )


def test_the_scan_finds_a_direct_read() -> None:
    tree = ast.parse("import sys, json\nfrom pathlib import Path\n"
                     "a = Path(x).read_text()\nb = open(x)\nc = sys.stdin.read()\n"
                     "d = json.load(f)\ne = textio.read_text(p)\n")
    assert sorted(w for _, w in _direct_reads(tree)) == [".read_text()", "json.load()",
                                                         "open()", "sys.stdin"]


def test_every_allowed_module_exists() -> None:
    for rel in ALLOWED:
        assert (SRC / rel.rstrip("/")).exists(), f"ALLOWED names {rel}, which is gone"
