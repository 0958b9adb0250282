"""servelab pin on the fixture Dockerfiles (expectations written in them as comments).

``# expect: RULE@LINE`` lists every finding of ``--check``; in rewrite mode each expected
``base-unpinned`` line whose image is a plain word is rewritten to image@digest and nothing
else in the file changes. The registry is replaced by a resolver function here; the real
local registry is used in test_build_docker.py.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import stat
from pathlib import Path

import pytest

from servelab.errors import InputError, ServelabError
from servelab.image.pin import pin_file, scan_froms

DATA = Path(__file__).resolve().parent.parent / "data" / "build" / "pin"
FIXTURES = sorted(DATA.glob("*/*.Dockerfile"))


def fake_digest(image: str) -> str:
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def expectations(path: Path) -> set[tuple[str, int]]:
    text = path.read_bytes().decode("utf-8-sig")
    return {(m.group(1), int(m.group(2)))
            for m in re.finditer(r"# expect: ([\w-]+)@(\d+)", text)}


def test_fixture_folders_are_consistent() -> None:
    assert FIXTURES, "no fixtures found"
    for f in FIXTURES:
        has = bool(expectations(f))
        assert has == (f.parent.name == "positive"), f


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_check_lists_exactly_the_expected_lines(fixture: Path, tmp_path: Path) -> None:
    target = tmp_path / fixture.name
    shutil.copy2(fixture, target)
    before = target.read_bytes()
    mtime = target.stat().st_mtime_ns
    report = pin_file(target, check=True, resolve=lambda _i: pytest.fail("check must not ask"))
    got = {(f.rule_id, f.line) for f in report.findings.findings}
    assert got == expectations(fixture)
    assert report.exit_code == (1 if any(r == "base-unpinned" for r, _ in got) else 0)
    assert target.read_bytes() == before and target.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rewrite_changes_only_the_image_words(fixture: Path, tmp_path: Path) -> None:
    target = tmp_path / fixture.name
    shutil.copy2(fixture, target)
    target.chmod(0o640)
    before = target.read_bytes()
    report = pin_file(target, resolve=fake_digest)
    after = target.read_bytes()
    froms = {f.line: f for f in scan_froms(before.decode("utf-8-sig"))}
    rewritten = {line for rule, line in expectations(fixture)
                 if rule == "base-unpinned" and froms[line].status == "unpinned"}
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    assert len(old_lines) == len(new_lines)
    for n, (old, new) in enumerate(zip(old_lines, new_lines, strict=True), 1):
        if n in rewritten:
            image = froms[n].image
            assert new == old.replace(image.encode(), f"{image}@{fake_digest(image)}".encode())
        else:
            assert new == old, f"line {n} changed"
    assert report.changed == bool(rewritten)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [fixture.name]  # no temp files left
    # pinned now: a second check finds no unpinned tag-only FROM that pin could fix
    again = pin_file(target, check=True)
    assert not {f.line for f in again.findings.findings} & rewritten


def test_crlf_and_bom_survive(tmp_path: Path) -> None:
    target = tmp_path / "Dockerfile"
    target.write_bytes(b"\xef\xbb\xbf# c\r\nFROM reg.example/app:1 AS a\r\n")
    pin_file(target, resolve=fake_digest)
    d = fake_digest("reg.example/app:1")
    assert target.read_bytes() == f"\ufeff# c\r\nFROM reg.example/app:1@{d} AS a\r\n".encode()


def test_resolution_failure_is_reported_and_file_untouched(tmp_path: Path) -> None:
    target = tmp_path / "Dockerfile"
    target.write_text("FROM reg.example/app:1\n")

    def refuse(image: str) -> str:
        raise InputError(f"{image} was not found in the registry")

    report = pin_file(target, resolve=refuse)
    assert report.exit_code == 1 and not report.changed
    assert "not found" in report.findings.findings[0].message
    assert target.read_text() == "FROM reg.example/app:1\n"


def test_symlinked_dockerfile_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.Dockerfile"
    real.write_text("FROM reg.example/app:1\n")
    link = tmp_path / "Dockerfile"
    link.symlink_to(real)
    pin_file(link, resolve=fake_digest)
    assert link.is_symlink()
    assert "@sha256:" in real.read_text()


@pytest.mark.parametrize(("content", "match"), [
    (None, "no such file"),
    (b"\x00\x01binary", "not a Dockerfile"),
    (b"\xff\xfe bad", "not UTF-8"),
    (b"# only a comment\n", "no FROM"),
])
def test_bad_input(tmp_path: Path, content: bytes | None, match: str) -> None:
    target = tmp_path / "Dockerfile"
    if content is not None:
        target.write_bytes(content)
    with pytest.raises(ServelabError, match=match) as e:
        pin_file(target, check=True)
    assert e.value.exit_code == 2
