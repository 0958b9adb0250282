"""Job-summary Markdown stays under GitHub's 1 MiB step-summary limit, however many findings
a result holds, and says what it left out: ``-f markdown`` of the findings commands (a job
summary or PR comment), the run's summary.md (and what ``write_summary`` appends)."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.findings import CoverageNote, Finding, FindingsReport, Severity
from servelab.github.outputs import SUMMARY_LIMIT, write_summary
from servelab.report import MARKDOWN_LIMIT, get_reporter
from servelab.run import summary

ROW = re.compile(r"^\| (error|warning|info) \|", re.MULTILINE)


def _report(n: int, message: str = "m" * 300) -> FindingsReport:
    return FindingsReport("lint", [Finding("r1", Severity.ERROR, message, file=f"f{i}",
                                           line=i + 1, fix="x" * 100) for i in range(n)], {},
                          coverage=[CoverageNote(f"part {i}", "why") for i in range(3)])


def test_a_huge_findings_report_is_cut_with_a_count() -> None:
    text = get_reporter("markdown").render(_report(5000))
    assert len(text.encode()) <= MARKDOWN_LIMIT < SUMMARY_LIMIT
    shown = len(ROW.findall(text))
    m = re.search(r"\*\*truncated: (\d+) more finding\(s\)\*\*", text)
    assert m and shown + int(m.group(1)) == 5000 and shown > 1000
    assert "part 2" in text or "more part not fully read(s)" in text


def test_one_huge_message_is_counted_not_shown() -> None:
    text = get_reporter("markdown").render(_report(1, message="y" * (2 * 1024 * 1024)))
    assert len(text.encode()) <= MARKDOWN_LIMIT
    assert "**truncated: 1 more finding(s)**" in text and "yyyy" not in text


def test_a_small_findings_report_is_whole() -> None:
    """The other way: what fits is all there, with no truncation line."""
    text = get_reporter("markdown").render(_report(20))
    assert len(ROW.findall(text)) == 20 and "truncated" not in text
    assert all(f"part {i}" in text for i in range(3))


def _table(rows: int) -> str:
    return ("# run\n\n| a | b |\n|---|---|\n"
            + "".join(f"| {i} | {'x' * 100} |\n" for i in range(rows)) + "\nend\n")


def test_the_run_summary_counts_the_rows_it_cut() -> None:
    md = _table(20_000)
    capped = summary.cap(md)
    assert len(capped.encode()) <= summary.SUMMARY_LIMIT
    kept = sum(1 for ln in capped.splitlines() if re.match(r"^\| \d+ \|", ln))
    m = re.search(r"truncated: (\d+) more table row\(s\) not shown", capped)
    assert m and kept + int(m.group(1)) == 20_000
    assert "Summary truncated" in capped
    # the count is in the truncation note, which still ends with where the rest is
    assert capped.rstrip().endswith("see summary.json")
    body = capped.split("\n\n> **Summary truncated**")[0]
    assert body.endswith(f"| {kept - 1} | {'x' * 100} |\n")
    assert summary.cap(_table(10)) == _table(10)


def test_the_findings_listed_per_image_say_how_many_more() -> None:
    listed = [{"severity": "HIGH", "id": f"CVE-{i}", "package": "p", "installed": "1"}
              for i in range(summary.FINDINGS_LISTED + 37)]
    results = [{"arm": "treatment", "metrics": {"digest": "sha256:" + "a" * 64},
                "stages": {"scan": {"record": {"findings": listed}}}}]
    lines = summary._findings_details(results)
    assert sum(1 for ln in lines if ln.startswith("| HIGH |")) == summary.FINDINGS_LISTED
    assert any("**truncated: 37 more finding(s)**" in ln for ln in lines)
    short = summary._findings_details([{**results[0], "stages": {"scan": {"record": {
        "findings": listed[:3]}}}}])
    assert not any("truncated" in ln for ln in short)


def test_the_step_summary_file_stays_under_the_limit(tmp_path: Path) -> None:
    target = tmp_path / "step_summary.md"
    target.write_text("earlier step text\n" * 1000)
    cut = write_summary(_table(20_000), path=target)
    assert cut and target.stat().st_size <= SUMMARY_LIMIT
    assert "more table row(s)" in target.read_text()
