"""servelab.image.render: the output of `servelab diff` and `servelab pin` (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path

from ocitest import E, tar_bytes, write_layout
from servelab.findings import Finding, FindingsReport, Severity
from servelab.image import diff as image_diff
from servelab.image.pin import PinReport
from servelab.image.render import DIFF_FORMATS, render_diff, render_pin

BASE = [E("etc/"), E("etc/os-release", b"ID=debian\n")]


def _diff(tmp_path: Path, a: list[E], b: list[E], **kw: object) -> image_diff.DiffResult:
    pa, pb = tmp_path / "a", tmp_path / "b"
    write_layout(pa, [tar_bytes(BASE), tar_bytes(a)])
    write_layout(pb, [tar_bytes(BASE), tar_bytes(b)])
    return image_diff.diff_images(str(pa), str(pb), **kw)  # type: ignore[arg-type]


def test_every_diff_format(tmp_path: Path) -> None:
    r = _diff(tmp_path, [E("build-date", b"1")], [E("build-date", b"2")])
    text = render_diff(r, "text")
    assert "verdict: differs (content differs)" in text
    assert "differences:" in text
    md = render_diff(r, "markdown")
    assert md.startswith("### servelab diff\n") and "| content | `/build-date` |" in md
    doc = json.loads(render_diff(r, "json"))
    assert doc["verdict"] == "differs" and doc["changes"][0]["subject"] == "/build-date"
    assert set(DIFF_FORMATS) == {"text", "markdown", "json"}


def test_diff_lists_what_max_entries_left_out(tmp_path: Path) -> None:
    r = _diff(tmp_path, [E(f"f{i}", b"a") for i in range(5)],
              [E(f"f{i}", b"b") for i in range(5)], max_entries=2)
    assert "3 more file changes not listed" in render_diff(r, "text")
    assert "3 more file changes not listed" in render_diff(r, "markdown")


def test_pin_notes_each_pinned_line_or_that_all_were(tmp_path: Path) -> None:
    empty = FindingsReport("servelab pin", [], {}, ["Dockerfile"])
    done = PinReport("Dockerfile", empty, pinned=[
        {"line": 1, "from": "python:3.12", "to": "python:3.12@sha256:" + "a" * 64}], changed=True)
    text = render_pin(done, "text")
    assert f"note: pinned line 1: python:3.12 -> python:3.12@sha256:{'a' * 64}\n" in text
    assert empty.notes == []  # the report handed in is not changed
    assert "note: every base is pinned by digest" in render_pin(PinReport("D", empty), "text")
    unpinned = FindingsReport("servelab pin", [Finding("base-unpinned", Severity.ERROR, "x",
                                                       file="D", line=1)], {}, ["D"])
    out = render_pin(PinReport("D", unpinned), "json")
    assert json.loads(out)["notes"] == []
    assert json.loads(render_pin(PinReport("D", unpinned), "sarif"))["version"] == "2.1.0"
