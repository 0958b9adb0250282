"""Every output format, rendered from one corpus of hostile strings, checked with a real parser
of that format (issue 31, item 1): Markdown with a CommonMark parser (markdown-it-py), SVG with
an XML parser, Mermaid with the pinned mermaid-cli, JSON lines with json.loads per line, the
terminal and workflow commands by what a runner or a terminal would obey.

Each string goes through the one function of its format (servelab.escape) and through the
real renderers that show input text: summary.md (spec.change, metadata.name, reasons with a
build's log tail, evidence, notes), the PR comment, history's Markdown, SVG and Mermaid, and
compare's and report's Markdown. What must hold: no HTML node, image or link made from input
text, no <details> closed by it, no live mention or reference, the quoted log inside its code
block, the SVG well-formed, one JSON record a line, no line an input starts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from hostile_same.runs import D1, result, write_run
from servelab import escape
from servelab.github.prcomment import comment_body
from servelab.run.history import Change, Entry, History, Row, Series
from servelab.run.render import history_markdown, mermaid_chart, render_history
from servelab.run.svg import history_svg

#: one corpus for every format: line breaks of every kind, NUL, ESC sequences, bidi
#: controls, HTML, fences, mentions, XML and comment closers, table pipes, lone surrogates
CORPUS: list[str] = [
    "line\rreturn", "line\nfeed", "ls\u2028ps\u2029end", "nul\x00byte", "nel\x85x",
    "\x1b[31mred\x1b[0m \x1b]8;;https://evil.example\x07link\x1b]8;;\x07 \x1b[2J",
    "bidi \u202eevil\u202c \u2066iso\u2069 \u200fRLM",
    "</details><img src=x onerror=alert(1)>", "<img src=https://t.example/p.gif>",
    "<script>alert(1)</script>", "<!-- open comment", "-->", "]]>", "<![CDATA[x]]>",
    "```\n# Heading from a log\n```", "~~~\n@org/team\n~~~", "````", "`` ` ``",
    "@org/team please look", "cc @octocat and #12 and GH-7 and org/repo#3",
    "[link](https://evil.example) ![img](https://evil.example/x.png)",
    "<https://evil.example>", "| a | b |", "\\|", "&amp; &#124; &lt;",
    "# heading", "> quote", "- item", "1. item", "***", "*em* _em_ ~~del~~",
    "lone \udc80 surrogate \ud800", "\ufeffbom \ufffe\uffff", "tab\tand\x0bvt\x0cff",
    "::error title=x::injected", "%0A::warning::y", "ok ünïcödé 中文 🙂",
]

#: CommonMark with the two GFM extensions GitHub adds that matter here: tables, strikethrough
MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
#: the only HTML servelab's own Markdown may hold
OWN_HTML = re.compile(r"^\s*(?:<details>|</details>|<summary>|</summary>|<details><summary>.*"
                      r"</summary>|<!-- servelab:pr-comment:[\w.-]+ -->|\s)*\s*$", re.S)
LIVE_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9]|#[0-9]|\bGH-[0-9]", re.I)


def _tokens(md: str) -> list[Token]:
    out: list[Token] = []
    for t in MD.parse(md):
        out.append(t)
        out.extend(t.children or [])
    return out


def _check_markdown(md: str, *, fences: int | None = None) -> list[Token]:
    """The checks every Markdown output must pass; returns its tokens."""
    toks = _tokens(md)
    for t in toks:
        assert t.type not in ("image", "link_open", "autolink_open"), (t, md)
        if t.type in ("html_inline", "html_block"):
            assert OWN_HTML.match(t.content), (t.content, md)
        if t.type == "text":
            assert not LIVE_MENTION.search(t.content), (t.content, md)
    opened = sum(t.content.count("<details") for t in toks if t.type.startswith("html"))
    closed = sum(t.content.count("</details>") for t in toks if t.type.startswith("html"))
    assert opened == closed, md
    if fences is not None:
        assert len([t for t in toks if t.type == "fence"]) == fences, md
    assert "\x1b" not in md and "\r" not in md and "\u2028" not in md and "\x00" not in md
    assert "\u202e" not in md
    return toks


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_markdown_inline_and_cell(text: str) -> None:
    for shown in (escape.md_text(text), escape.md_prose(f"quoting `{text}` and {text}")):
        assert "\n" not in shown
        toks = _check_markdown(f"- {shown}\n", fences=0)
        assert [t.type for t in toks if t.type.startswith("heading")] == []
    table = (f"| a | b |\n|---|---|\n| {escape.md_cell(text)} | {escape.md_code(text)} |\n")
    toks = _check_markdown(table, fences=0)
    cells = [t for t in toks if t.type == "td_open"]
    assert len(cells) == 2, table  # no | of the input split a cell


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_quoted_log_stays_inside_its_fence(text: str) -> None:
    log = f"step 3/4: RUN make\n{text}\nerror: exit 1"
    for indent in (0, 2):
        body = "\n".join(escape.md_fence(log, indent=indent))
        md = f"- reason\n{body}\n\nafter @team\n" if indent else f"{body}\n\nafter\n"
        toks = _check_markdown(escape.no_mentions(md), fences=1)
        fence = next(t for t in toks if t.type == "fence")
        assert fence.content.rstrip("\n") == escape.terminal_text(log, one_line=False)


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_html_inside_details(text: str) -> None:
    md = (f"<details><summary>Findings of {escape.html_text(text)}</summary>\n\n"
          f"| id |\n|---|\n| {escape.md_cell(text)} |\n\n</details>\n\nafter\n")
    toks = _check_markdown(md)
    after = [t for t in toks if t.type == "text" and t.content == "after"]
    assert after, md  # the input closed nothing early: the text after </details> is there


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_svg_and_xml(text: str) -> None:
    s = Series("size", text, text, [(text, 1.0), (text + "2", 2.0)], 1)
    doc = history_svg(f"servelab history: {text}", [s])
    root = ET.fromstring(doc.split("\n", 1)[1])  # noqa: S314 (our own output)
    assert not root.findall(".//{http://www.w3.org/2000/svg}script")
    assert not root.findall(".//{http://www.w3.org/2000/svg}img")
    texts = [e.text or "" for e in root.iter()]
    assert any(escape.terminal_text(text) in t for t in texts)


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_json_lines_and_terminal(text: str) -> None:
    lines = [escape.json_line({"name": text, "n": i}) for i in range(3)]
    blob = "\n".join(lines) + "\n"
    assert blob.isascii()
    assert len(blob.splitlines()) == 3  # str.splitlines splits on U+2028, \x85, \x1c too
    assert [json.loads(x)["name"] for x in blob.splitlines()] == [text] * 3
    shown = escape.terminal_text(text)
    assert len((shown + "x").splitlines()) == 1 and "\x1b" not in shown
    assert not any(0xD800 <= ord(c) < 0xE000 for c in shown)
    assert "\n" not in escape.command_data(text) and "\r" not in escape.command_data(text)
    assert ":" not in escape.command_property(text)
    assert "\n" not in escape.progress_text(text) and "\x1b" not in escape.progress_text(text)


#: what a SARIF message or description never holds: C0 controls but tab and LF, DEL, C1,
#: bidi controls, line and paragraph separators, lone surrogates
SARIF_BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u061c\u202a-\u202e"
                       "\u2066-\u2069\u2028\u2029\ud800-\udfff]")


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_sarif_texts(text: str) -> None:
    """Every text of a SARIF log (a finding's message and fix, a coverage note, a note, a
    rule's descriptions: Trivy's) quotes input as the terminal shows it: no escape sequence,
    control or bidi character reaches GitHub code scanning (found by fuzzing lint and
    k8s-check ``-f sarif``)."""
    from servelab.findings import CoverageNote, Finding, FindingsReport, Rule, Severity
    from servelab.report import SarifResult, SarifRule, get_reporter, sarif_log

    rep = FindingsReport("lint", [Finding("r1", Severity.ERROR, f"bad {text}", "Dockerfile",
                                          3, fix=f"fix {text}")],
                         {"r1": Rule("r1", Severity.ERROR, text, rationale=text, fix=text)},
                         notes=[text])
    rep.add_coverage([CoverageNote(f"unread {text}", "why", "Dockerfile", 4)])
    logs = [json.loads(get_reporter("sarif").render(rep)),
            sarif_log([SarifRule("CVE-1", text, text, text, "error")],
                      [SarifResult("CVE-1", "error", text)], notifications=[(text, None)])]
    texts = [v for log in logs for v in _strings(log)]
    assert any(escape.terminal_text(text, one_line=False) in t for t in texts)
    for t in texts:
        assert not SARIF_BAD.search(t), (t, text)


def _strings(v: Any) -> list[str]:
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return [v] if isinstance(v, str) else []


def test_json_line_refuses_nan() -> None:
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match="JSON"):
            escape.json_line({"x": bad})


# ------------------------------------------------------------------ the real renderers


def _summary_md(text: str) -> str:
    from servelab.run import aggregate, summary

    r = result("treatment", 1, None)
    r["verdicts"] = [{"stage": "build", "check": "build", "passed": False,
                      "reason": f"the build failed: {text}\n#5 RUN make\n{text}\n</details>"}]
    t = aggregate.arm_stats("treatment", [r])
    doc = {"verdict": "failed", "repeats": 1,
           "reasons": [f"treatment: build failed ({text})\n{text}\n```\n@org/team\n"],
           "experiment": {"name": text, "change": text, "fixed": [text], "metrics": [text]},
           "skipped": [{"stage": "scan", "reason": text}], "not_tested": [text],
           "notes": [text]}
    return summary.render_markdown(doc, None, t, [], [r])


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_summary_and_pr_comment(text: str) -> None:
    md = _summary_md(text)
    _check_markdown(md)
    body = comment_body(md, "job-1", "https://github.com/o/r/actions/runs/1")
    toks = _check_markdown(body.replace("[The workflow run](https://github.com/o/r/actions/"
                                        "runs/1)", "The workflow run"))
    # spec.change stays on its line: no break of it starts a line of the summary
    change = next(line for line in md.splitlines() if line.startswith("**Change:**"))
    assert escape.md_text(text) in change
    # the log lines of the reason are quoted in code blocks, nowhere else
    assert any(t.type == "fence" for t in toks)


def _entry(text: str, run: str, digest: str | None) -> Entry:
    inputs = {"commit": [text], "base_digest": ["None"]}
    arm = {"digests": [digest] if digest else [], "reproducible": None, "repeats": 1,
           "inputs": inputs, "size_bytes": 1.0 if digest else None}
    return Entry({"schemaVersion": 1, "kind": "servelab-history-entry",
                  "run": {"id": run, "started_at": f"2026-11-2{run}T00:00:00Z", "name": text},
                  "experiment": {"name": text}, "commit": text, "verdict": text,
                  "arms": {"treatment": arm}}, text)


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_history_markdown_and_text(text: str) -> None:
    a, b = _entry(text, "1", "sha256:" + "a" * 64), _entry(text, "2", None)
    h = History(text, [Row(b, [Change("treatment", ["sha256:" + "a" * 64], [], [], [])]),
                       Row(a, [])])
    _check_markdown(history_markdown(h))
    out = render_history(h, "text")
    assert not any(line.lstrip().startswith("::") for line in out.splitlines())
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert json.loads(render_history(h, "json").encode("utf-8", "backslashreplace"))


def test_compare_and_report_markdown(tmp_path: Path) -> None:
    from servelab.run.merge import compare_runs, merge_runs

    for i, text in enumerate(CORPUS):
        safe = re.sub(r"[^A-Za-z0-9]", "_", text)[:20] or "x"
        a = write_run(tmp_path / f"{i}-a-{safe}", [result("treatment", 1, D1, machine=text)])
        b = write_run(tmp_path / f"{i}-b-{safe}", [result("treatment", 1, None, machine=text)])
        _check_markdown(compare_runs(a, b).markdown)
        _check_markdown(merge_runs([a, b]).markdown)


# ------------------------------------------------------------------ Mermaid, for real

STATE = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup"))
MMDC = STATE / "mermaid-cli" / "node_modules" / ".bin" / "mmdc"
PUPPETEER = STATE / "mermaid-cli" / "puppeteer.json"


@pytest.mark.mermaid
def test_every_hostile_label_renders_with_the_pinned_mermaid(tmp_path: Path) -> None:
    if not MMDC.exists():
        if os.environ.get("CI"):
            pytest.fail(f"no Mermaid CLI at {MMDC}: scripts/bootstrap.sh installs it")
        pytest.skip(f"no Mermaid CLI at {MMDC}: scripts/bootstrap.sh installs it")
    points = [(text, float(i + 1)) for i, text in enumerate(CORPUS)]
    md = "\n".join(mermaid_chart(Series("size", "\n".join(CORPUS[:8]), "MiB", points, 0)))
    src = tmp_path / "chart.md"
    src.write_text(md, encoding="utf-8", errors="backslashreplace")
    env: dict[str, Any] = {**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"}
    proc = subprocess.run([str(MMDC), "-q", "-p", str(PUPPETEER), "-i", str(src), "-o",
                           str(tmp_path / "out.md")], capture_output=True, text=True,
                          timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    svgs = list(tmp_path.glob("out-*.svg"))
    assert len(svgs) == 1
    root = ET.fromstring(svgs[0].read_text(encoding="utf-8"))  # noqa: S314 (mmdc's output)
    assert not root.findall(".//{http://www.w3.org/2000/svg}script")
    # the words of <img onerror=...> may be in a label; no element or handler came of them
    assert not [e.tag for e in root.iter() if e.tag.endswith(("}img", "}script", "}a"))]
    assert not [k for e in root.iter() for k in e.attrib if k.lower().startswith("on")]
