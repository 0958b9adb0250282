"""Does a Markdown page fit GitHub's PR conversation? Rendered as GitHub-flavoured Markdown
(markdown-it-py: CommonMark, tables, strikethrough, raw HTML such as ``<details>``), its
Mermaid blocks drawn by the pinned Mermaid, laid out in headless Chromium at 1012 px (the
width of a PR conversation's comment column) with the layout rules of GitHub's Markdown that
decide width: tables are blocks that scroll within themselves (``display: block; overflow:
auto; max-width: 100%``), code blocks scroll, inline code breaks at spaces only.

:func:`sideways` returns what scrolls sideways: the page itself, or any element whose content
is wider than its box (a table, a code block, a chart). Chromium and Mermaid are those of the
Mermaid check (``scripts/bootstrap.sh``; tests marked ``mermaid``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

STATE = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup"))
MERMAID_CLI = STATE / "mermaid-cli"
WIDTH = 1012

#: the layout rules of GitHub's Markdown that decide width (written for this check: sizes and
#: the scroll behaviour of github.com's .markdown-body, not its stylesheet)
CSS = """
body { margin: 0; }
.markdown-body { box-sizing: border-box; width: WIDTHpx; padding: 16px; font-size: 14px;
  line-height: 1.5; word-wrap: break-word;
  font-family: -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
.markdown-body table { display: block; width: max-content; max-width: 100%; overflow: auto;
  border-spacing: 0; border-collapse: collapse; }
.markdown-body td, .markdown-body th { padding: 6px 13px; border: 1px solid #d1d9e0; }
.markdown-body code { padding: .2em .4em; font-size: 85%; white-space: break-spaces;
  font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.markdown-body pre { padding: 16px; overflow: auto; font-size: 85%; }
.markdown-body pre code { white-space: pre; padding: 0; }
.markdown-body .mermaid { overflow: auto; }
.markdown-body img, .markdown-body svg { max-width: 100%; }
""".replace("WIDTH", str(WIDTH))

SCRIPT = r"""
const puppeteer = require(process.env.PUPPETEER_DIR);
(async () => {
  const [html, mermaid, chrome] = process.argv.slice(2);
  const browser = await puppeteer.launch({executablePath: chrome, headless: true,
    args: ["--no-sandbox", "--disable-gpu"]});
  const page = await browser.newPage();
  await page.setViewport({width: WIDTH, height: 900});
  await page.goto("file://" + html, {waitUntil: "load"});
  await page.addScriptTag({path: mermaid});
  const out = await page.evaluate(async () => {
    const blocks = [...document.querySelectorAll("pre > code.language-mermaid")];
    for (const code of blocks) {
      const div = document.createElement("div");
      div.className = "mermaid";
      div.textContent = code.textContent;
      code.parentElement.replaceWith(div);
    }
    window.mermaid.initialize({startOnLoad: false, securityLevel: "strict"});
    let error = null;
    try { await window.mermaid.run({querySelector: ".mermaid"}); }
    catch (e) { error = String(e); }
    const wide = [];
    const root = document.scrollingElement;
    if (root.scrollWidth > root.clientWidth)
      wide.push(`the page: ${root.scrollWidth} px in ${root.clientWidth} px`);
    for (const el of document.querySelectorAll(".markdown-body *")) {
      if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
        const style = getComputedStyle(el);
        if (["auto", "scroll"].includes(style.overflowX))
          wide.push(`<${el.tagName.toLowerCase()}> ${el.scrollWidth} px in ` +
                    `${el.clientWidth} px: ${el.textContent.slice(0, 80)}`);
      }
    }
    const columns = [...document.querySelectorAll("table")].map(
      t => Math.max(...[...t.rows].map(r => r.cells.length)));
    return {wide, error, charts: document.querySelectorAll(".mermaid svg").length,
            tables: columns.length, columns: Math.max(0, ...columns)};
  });
  await browser.close();
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(2); });
""".replace("WIDTH", str(WIDTH))


def available() -> str | None:
    """Why the check cannot run here, or None."""
    if not (MERMAID_CLI / "node_modules" / "puppeteer").is_dir():
        return f"no puppeteer under {MERMAID_CLI}: scripts/bootstrap.sh installs it"
    if not Path("/usr/bin/chromium").exists():
        return "no /usr/bin/chromium: scripts/bootstrap.sh installs it"
    try:
        import markdown_it  # noqa: F401
    except ImportError:
        return "markdown-it-py missing: pip install -e '.[dev]'"
    return None


def html(markdown: str) -> str:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return (f"<!doctype html><html><head><meta charset='utf-8'><style>{CSS}</style></head>"
            f"<body><article class='markdown-body'>{md.render(markdown)}</article></body>"
            "</html>")


def sideways(markdown: str, tmp: Path) -> dict[str, object]:
    """``{"wide": [what scrolls sideways], "error": a Mermaid error, "charts": n, "tables":
    n, "columns": the most columns of a table}`` of *markdown* rendered as GitHub shows it at
    1012 px."""
    page = tmp / "page.html"
    page.write_text(html(markdown), encoding="utf-8")
    script = tmp / "check.js"
    script.write_text(SCRIPT)
    env = {**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1",
           "PUPPETEER_DIR": str(MERMAID_CLI / "node_modules" / "puppeteer")}
    proc = subprocess.run(["node", str(script), str(page),
                           str(MERMAID_CLI / "node_modules" / "mermaid" / "dist" /
                               "mermaid.min.js"), "/usr/bin/chromium"],
                          capture_output=True, text=True, timeout=180, env=env, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"the page check failed to run: {proc.stderr[-2000:]}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def check(markdown: str, tmp: Path) -> dict[str, object]:
    """:func:`sideways`, asserted: nothing scrolls sideways, no table over 6 columns, every
    Mermaid chart drawn."""
    got = sideways(markdown, tmp)
    assert got["wide"] == [], got["wide"]
    assert got["error"] is None, got["error"]
    assert isinstance(got["columns"], int) and got["columns"] <= 6, got
    assert got["charts"] == markdown.count("```mermaid"), got
    return got
