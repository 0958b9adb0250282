"""Shared helpers for the lint tests: fixture discovery and expectation headers."""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "lint"
REPO = Path(__file__).resolve().parents[2]
PINNED = (
    "127.0.0.1:5000/servelab/python-base:bookworm@sha256:"
    "adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1"
)
CLEAN_TAIL = (
    "USER 10001\n"
    "HEALTHCHECK CMD curl -fsS http://127.0.0.1:8000/health || exit 1\n"
    'CMD ["python", "-m", "server"]\n'
)

#: A working directory with no servelab settings above it (the .git stops the search), so
#: subprocess runs do not pick up the repository's own [tool.servelab.lint].
NEUTRAL_CWD = Path(tempfile.mkdtemp(prefix="servelab-lint-cwd-"))
(NEUTRAL_CWD / ".git").mkdir(exist_ok=True)
atexit.register(shutil.rmtree, NEUTRAL_CWD, True)

_EXPECT = re.compile(r"^#\s*expect:\s*([a-z0-9-]+)(?:@(\d+))?(?:\s+(error|warning|info))?\s*$")
_NEGATIVE = re.compile(r"^#\s*negative:\s*(.+)$")
_BUILD_ARG = re.compile(r"^#\s*build-arg:\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass
class Case:
    kind: str
    path: Path
    expected: list[tuple[str, int]] = field(default_factory=list)
    #: (rule, line) -> the severity the finding must have, where the fixture says so
    severities: dict[tuple[str, int], str] = field(default_factory=dict)
    negative_for: list[str] = field(default_factory=list)
    build_args: dict[str, str] = field(default_factory=dict)
    health_declared: bool = False

    @property
    def dockerfile(self) -> Path:
        return self.path / "Dockerfile" if self.path.is_dir() else self.path


def _next_instruction_line(lines: list[str], index: int) -> int:
    for j in range(index + 1, len(lines)):
        s = lines[j].strip()
        if s and not s.startswith("#"):
            return j + 1
    raise AssertionError("an expect: comment with no instruction after it")


def load_case(kind: str, path: Path) -> Case:
    case = Case(kind, path)
    lines = case.dockerfile.read_text(encoding="utf-8").splitlines()
    for i, raw in enumerate(lines):
        s = raw.strip()
        if m := _EXPECT.match(s):
            line = int(m.group(2)) if m.group(2) else _next_instruction_line(lines, i)
            case.expected.append((m.group(1), line))
            if m.group(3):
                case.severities[(m.group(1), line)] = m.group(3)
        elif m := _NEGATIVE.match(s):
            case.negative_for += [r.strip() for r in m.group(1).split(",")]
        elif m := _BUILD_ARG.match(s):
            case.build_args[m.group(1)] = m.group(2)
        elif s == "# health-declared":
            case.health_declared = True
    return case


def materialise(case: Case, tmp: Path) -> Path:
    """The Dockerfile to lint: the fixture itself, or for a folder that holds ``dot-git``
    (git cannot store a folder named .git) a copy where it is renamed ``.git``."""
    if not (case.path.is_dir() and (case.path / "dot-git").exists()):
        return case.dockerfile
    dest = tmp / case.path.name
    shutil.copytree(case.path, dest)
    (dest / "dot-git").rename(dest / ".git")
    return dest / "Dockerfile"


def collect(kind: str) -> list[Case]:
    folder = DATA / kind
    paths = sorted(folder.glob("*.Dockerfile")) + sorted(
        p for p in folder.iterdir() if p.is_dir() and (p / "Dockerfile").is_file()
    )
    return [load_case(kind, p) for p in paths]


@pytest.fixture
def write_dockerfile(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a Dockerfile (and context files) into a fresh directory; return its path."""

    def _write(text: str, files: dict[str, str] | None = None, name: str = "Dockerfile") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        for rel, content in (files or {}).items():
            q = tmp_path / rel
            q.parent.mkdir(parents=True, exist_ok=True)
            q.write_text(content, encoding="utf-8")
        return path

    return _write
