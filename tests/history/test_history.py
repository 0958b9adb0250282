"""`servelab history` on fixture runs (tests/data/history): positive/ holds a folder of
downloaded nightly artifacts (six runs: a base bump on the 26th, a non-reproducible build on
the 28th, no start-up measured on the 27th), a carried history file (two older runs) and a
run of another experiment; negative/ holds what must be set aside, each with its reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from servelab.cli import main
from servelab.run import history as hist
from servelab.run.render import mermaid_chart
from servelab.run.svg import history_svg
from servelab.spec import validator

DATA = Path(__file__).resolve().parent.parent / "data" / "history"
POS, NEG = DATA / "positive", DATA / "negative"
NIGHTLY = POS / "nightly-artifacts"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["history", *map(str, args)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err
    return code, out, err


def _nights() -> list[str]:
    """The run ids of the nightly fixture folder, from the files themselves."""
    ids = [json.loads(p.read_text())["run"]["id"] for p in sorted(NIGHTLY.rglob("summary.json"))]
    assert len(ids) >= 5
    return ids


def test_trend_newest_first_with_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--format", "json", POS)
    assert code == 0
    doc = json.loads(out)
    assert doc["experiment"] == "nightly-rebuild"
    starts = [r["run"]["started_at"] for r in doc["runs"]]
    assert starts == sorted(starts, reverse=True)
    carried = [json.loads(line)["run"]["id"]
               for line in (POS / "carried" / "history.jsonl").read_text().splitlines()]
    assert {r["run"]["id"] for r in doc["runs"]} == set(_nights()) | set(carried)
    for r in doc["runs"]:  # every run is a valid history entry once its extras are removed
        entry = {k: v for k, v in r.items() if k not in ("source", "digest_changes")}
        assert not list(validator("history").iter_errors(entry))


def test_digest_changes_name_the_inputs_or_say_not_reproducible(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(run(capsys, "--format", "json", POS)[1])
    marked = {r["run"]["started_at"][:10]: r["digest_changes"] for r in doc["runs"]
              if r["digest_changes"]}
    assert sorted(marked) == ["2026-11-26", "2026-11-28"]
    bump = marked["2026-11-26"][0]
    assert bump["arm"] == "treatment"
    assert "base_digest" in bump["build_inputs_that_differ"]
    assert "source_date_epoch" not in bump["inputs_that_differ"]
    assert bump["reading"].startswith("inputs changed: ")
    same = marked["2026-11-28"][0]
    assert same["build_inputs_that_differ"] == []
    assert same["reading"].startswith("not reproducible")
    # the run before the bump and the bump itself really do differ in their base digest
    before = next(r for r in doc["runs"] if r["run"]["started_at"].startswith("2026-11-25"))
    after = next(r for r in doc["runs"] if r["run"]["started_at"].startswith("2026-11-26"))
    assert (before["arms"]["treatment"]["inputs"]["base_digest"]
            != after["arms"]["treatment"]["inputs"]["base_digest"])


def test_text_and_markdown_mark_the_changed_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = run(capsys, POS)
    assert code == 0
    marked = [ln for ln in text.splitlines() if ln.startswith("◆ ")]
    assert [ln[2:12] for ln in marked] == ["2026-11-28", "2026-11-26"]
    assert "not reproducible: same build inputs" in text
    md = run(capsys, "--format", "markdown", POS)[1]
    rows = [ln for ln in md.splitlines() if ln.startswith("| 2026") or ln.startswith("| ◆")]
    assert len(rows) == len(_nights()) + 2
    assert md.count("```mermaid") == 3


def _charts(md: str) -> dict[str, str]:
    blocks = re.findall(r"```mermaid\n(.*?)```", md, re.S)
    return {re.search(r'title "([^"]*)"', b).group(1): b for b in blocks}  # type: ignore[union-attr]


def test_a_missing_value_is_left_off_the_axis(capsys: pytest.CaptureFixture[str]) -> None:
    md = run(capsys, "--format", "markdown", POS)[1]
    charts = _charts(md)
    start = next(b for t, b in charts.items() if "start to ready" in t)
    size = next(b for t, b in charts.items() if "size" in t)
    axis = re.search(r"x-axis \[(.*)\]", start).group(1)  # type: ignore[union-attr]
    values = re.search(r"line \[(.*)\]", start).group(1).split(", ")  # type: ignore[union-attr]
    assert "11-27" not in axis and "11-26" in axis and "11-28" in axis
    assert len(axis.split(", ")) == len(values)
    assert "0" not in values
    assert "11-27" in re.search(r"x-axis \[(.*)\]", size).group(1)  # type: ignore[union-attr]
    assert "1 run(s) without a value are left off the x-axis" in md


def test_bad_input_is_set_aside_and_said(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--format", "json", POS, NEG, NIGHTLY / "servelab-20261129-9c0d1e2f")
    assert code == 0
    doc = json.loads(out)
    reasons = {s["source"]: s["reason"] for s in doc["skipped"]}
    bad = NEG / "bad-lines.history.jsonl"
    assert "schemaVersion 2" in reasons[str(NEG / "other-schema-version" / "summary.json")]
    assert "missing fields: run.started_at, verdict" in reasons[
        str(NEG / "missing-fields" / "summary.json")]
    assert "merged report" in reasons[str(NEG / "merged-report" / "summary.json")]
    assert "invalid JSON" in reasons[str(NEG / "truncated" / "summary.json")]
    assert "image/digest" in reasons[str(NEG / "bad-result" / "summary.json")]
    assert "schemaVersion 2" in reasons[f"{bad}:1"]
    assert "invalid JSON" in reasons[f"{bad}:2"]
    assert "'arms' is a required property" in reasons[f"{bad}:3"]
    assert f"{bad}:4" not in reasons  # the good line of that file is used
    assert list(NIGHTLY.rglob("probe-events.jsonl"))  # a run's own JSON Lines: not history
    assert not any("probe-events" in s for s in reasons)
    assert len(doc["duplicates"]) == 1 and "counted once" in doc["duplicates"][0]["reason"]
    ids = [r["run"]["id"] for r in doc["runs"]]
    assert len(ids) == len(set(ids))
    assert [e["experiment"]["name"] for e in doc["other_experiments"]] == ["vllm-gpu-serve"]
    text = run(capsys, POS, NEG)[1]
    assert "other experiment 'vllm-gpu-serve' (not in this trend): 1 run(s)" in text
    assert text.count("skipped: ") == len(reasons)


def test_choose_the_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(run(capsys, "--format", "json", "--experiment", "vllm-gpu-serve", POS)[1])
    assert [r["experiment"]["name"] for r in doc["runs"]] == ["vllm-gpu-serve"]
    assert len(doc["other_experiments"]) == len(_nights()) + 2
    code, _, err = run(capsys, "--experiment", "nope", POS)
    assert code == 2 and "no run of experiment 'nope'" in err


@pytest.mark.parametrize("args", [["/nonexistent/servelab-runs"], [NEG / "merged-report"],
                                  ["--format", "xml", POS]])
def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str], args: list[object]) -> None:
    code, out, err = run(capsys, *map(str, args))
    assert code == 2
    assert out == ""
    assert err.strip()


def test_append_carries_the_history_forward(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    carried = tmp_path / "history.jsonl"
    shutil.copy(POS / "carried" / "history.jsonl", carried)
    before = carried.read_bytes()
    code, _, err = run(capsys, carried, NIGHTLY, "--append-to", carried)
    assert code == 0 and f"{len(_nights())} run(s) appended" in err
    after = carried.read_bytes()
    assert after.startswith(before)  # the old lines are kept byte for byte
    assert len(after.splitlines()) == len(before.splitlines()) + len(_nights())
    # read alone, the carried file gives the same trend as the folders did
    alone = json.loads(run(capsys, "--format", "json", carried)[1])
    both = json.loads(run(capsys, "--format", "json", POS / "carried", NIGHTLY)[1])
    assert ([r["run"]["id"] for r in alone["runs"]] == [r["run"]["id"] for r in both["runs"]])
    assert ([r["digest_changes"] for r in alone["runs"]]
            == [r["digest_changes"] for r in both["runs"]])
    code, _, err = run(capsys, carried, NIGHTLY, "--append-to", carried)
    assert code == 0 and "0 run(s) appended" in err
    assert carried.read_bytes() == after


def test_append_never_replaces_an_input_summary(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(NIGHTLY / "servelab-20261124-3f9a0c11", run_dir)
    link = tmp_path / "other-name.json"
    os.link(run_dir / "summary.json", link)  # the same file under another name
    before = (run_dir / "summary.json").read_bytes()
    code, _, err = run(capsys, run_dir, "--append-to", link)
    assert code == 2 and "would be replaced" in err
    assert (run_dir / "summary.json").read_bytes() == before


def test_out_writes_markdown_json_and_a_self_contained_svg(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "trend"
    code, _, _ = run(capsys, POS, "--out", out)
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["history.json", "history.md", "history.svg"]
    assert json.loads((out / "history.json").read_text())["experiment"] == "nightly-rebuild"
    svg = ET.parse(out / "history.svg").getroot()  # noqa: S314 (our own output)
    ns = "{http://www.w3.org/2000/svg}"
    assert svg.tag == f"{ns}svg"
    assert not svg.findall(f".//{ns}script") and not svg.findall(f".//{ns}image")
    assert "href" not in (out / "history.svg").read_text()
    assert len(svg.findall(f".//{ns}polyline")) == 3
    # start-up: one point fewer than size (the 27th has none)
    circles = [len(g) for g in _points_per_panel(out / "history.svg")]
    assert circles[0] == circles[1] + 1 == circles[2]


def _points_per_panel(path: Path) -> list[list[str]]:
    panels: list[list[str]] = []
    for line in path.read_text().splitlines():
        if 'font-weight="bold">Treatment' in line:
            panels.append([])
        elif line.startswith("<circle") and panels:
            panels[-1].append(line)
    return panels


def test_out_never_replaces_an_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "runs" / "summary.json"
    src.parent.mkdir()
    shutil.copy(NIGHTLY / "servelab-20261124-3f9a0c11" / "summary.json", src)
    out = tmp_path / "out"
    out.mkdir()
    os.link(src, out / "history.json")
    before = src.read_bytes()
    code, _, err = run(capsys, src, "--out", out)
    assert code == 2 and "would replace an input" in err
    assert src.read_bytes() == before
    assert not (out / "history.md").exists()
    (tmp_path / "file").write_text("x")
    code, _, err = run(capsys, src, "--out", tmp_path / "file")
    assert code == 2 and "not a directory" in err


def test_text_from_the_input_cannot_break_a_chart_or_the_svg() -> None:
    s = hist.Series("size", "Treatment: size", "MiB",
                    [('11-2"] \n```\n<b>', 1.0), ("11-30 03:17", 2.0)], 0)
    lines = mermaid_chart(s)
    assert sum(ln.startswith("```") for ln in lines) == 2
    axis = next(ln for ln in lines if "x-axis" in ln)
    assert len(re.findall(r'"[^"]*"', axis)) == 2 and axis.endswith("]")
    assert "<" not in axis and "`" not in axis
    doc = history_svg('x <script>alert(1)</script> & "y"', [s])
    root = ET.fromstring(doc.split("\n", 1)[1])  # noqa: S314 (our own output)
    assert not root.findall(".//{http://www.w3.org/2000/svg}script")
    assert "<script>" not in doc and "&lt;script&gt;" in doc


# ------------------------------------------------------------------ Mermaid, for real

STATE = Path(os.environ.get("SERVELAB_STATE", "/var/tmp/servelab-setup"))
MMDC = STATE / "mermaid-cli" / "node_modules" / ".bin" / "mmdc"
PUPPETEER = STATE / "mermaid-cli" / "puppeteer.json"


@pytest.mark.mermaid
def test_every_chart_parses_with_the_pinned_mermaid(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    if not MMDC.exists():
        pytest.skip(f"no Mermaid CLI at {MMDC}: scripts/bootstrap.sh installs it")
    md = run(capsys, "--format", "markdown", POS, NEG)[1]
    assert len(_charts(md)) == 3
    src = tmp_path / "history.md"
    src.write_text(md)
    proc = _mmdc(src, tmp_path / "rendered.md")  # one browser start renders every block
    assert proc.returncode == 0, proc.stderr
    svgs = sorted(tmp_path.glob("rendered-*.svg"))
    assert len(svgs) == 3
    assert all("<svg" in p.read_text() for p in svgs)
    broken = tmp_path / "broken.md"  # the check really checks: a bad chart fails
    broken.write_text(md.replace("x-axis [", "x-axis [[", 1))
    assert _mmdc(broken, tmp_path / "broken-out.md").returncode != 0


def _mmdc(src: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"}
    return subprocess.run([str(MMDC), "-q", "-p", str(PUPPETEER), "-i", str(src), "-o",
                           str(dest)], capture_output=True, text=True, timeout=120,
                          env=env, check=False)


def test_the_cli_is_light_to_list(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "servelab", "history", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "--append-to" in proc.stdout


def test_input_text_cannot_start_a_line_of_its_own(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    """A history line is user input: a date that is not one is set aside, and a verdict with
    a line break stays on its row (it could otherwise start a workflow command in a CI log)."""
    first = json.loads((POS / "carried" / "history.jsonl").read_text().splitlines()[0])
    bad_date = json.loads(json.dumps(first))
    bad_date["run"].update(id="x-date", started_at="::error::not a date")
    odd = json.loads(json.dumps(first))
    odd["run"]["id"] = "x-verdict"
    odd["verdict"] = "passed\n::error title=x::injected\u202e"
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(bad_date) + "\n" + json.dumps(odd) + "\n")
    code, out, _ = run(capsys, path)
    assert code == 0
    assert not any(line.startswith("::") for line in out.splitlines())
    # servelab.escape.terminal_text: the break and the bidi override shown, not obeyed
    assert "passed\\n::error title=x::injected\\u202e" in out
    assert f"skipped: {path}:1: not a history entry: run/started_at" in out


# ---------------------------------------------------------------- hostile history files

def _with_bad_lines(tmp_path: Path, bad: int) -> Path:
    good = (POS / "carried" / "history.jsonl").read_text().splitlines()
    path = tmp_path / "many.history.jsonl"
    path.write_text("\n".join([*good, *(f'{{"not": {i}}}' for i in range(bad))]) + "\n")
    return path


def test_a_flood_of_bad_lines_is_named_twenty_times_and_counted(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _with_bad_lines(tmp_path, 5000)
    code, text, _ = run(capsys, path)
    assert code == 0
    named = [ln for ln in text.splitlines() if ln.startswith(f"skipped: {path}:")]
    assert len(named) == hist.SET_ASIDE_SHOWN
    assert "skipped: 4980 more file(s) or line(s) not used (the first 20 are named above)" \
        in text
    assert len(text.splitlines()) < 60
    doc = json.loads(run(capsys, "--format", "json", path)[1])
    assert len(doc["skipped"]) == hist.SET_ASIDE_SHOWN and doc["skipped_total"] == 5000
    assert len(run(capsys, "--format", "markdown", path)[1]) < 20_000


def test_a_few_bad_lines_are_all_named(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    path = _with_bad_lines(tmp_path, 3)
    text = run(capsys, path)[1]
    assert text.count(f"skipped: {path}:") == 3 and "more file(s) or line(s)" not in text
    doc = json.loads(run(capsys, "--format", "json", path)[1])
    assert len(doc["skipped"]) == 3 and doc["skipped_total"] == 3


@pytest.mark.parametrize("content", [
    '{"event": "deploy", "id": 1}\n{"event": "deploy", "id": 2}\n',
    "my notes\nsecond line\n",
    "[1, 2, 3]\n",
    "\n\n" + '{"kind": "something-else", "schemaVersion": 1}\n',
], ids=["other-jsonl", "text", "json-array", "other-kind-after-blank-lines"])
def test_append_refuses_a_file_that_is_not_a_history(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str) -> None:
    target = tmp_path / "target.jsonl"
    target.write_text(content)
    code, _, err = run(capsys, NIGHTLY, "--append-to", target)
    assert code == 2
    assert "not a servelab history file" in err and "nothing was appended" in err
    assert f"{target}:" in err and "fix:" in err
    assert target.read_text() == content


def test_append_takes_an_empty_file_and_a_history_with_a_bad_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, _, err = run(capsys, NIGHTLY, "--append-to", empty)
    assert code == 0 and f"{len(_nights())} run(s) appended" in err
    damaged = tmp_path / "damaged.jsonl"
    good = (POS / "carried" / "history.jsonl").read_text()
    damaged.write_text(good + '{"kind": "servelab-history-entry", "cut sh\n')
    code, _, err = run(capsys, NIGHTLY, "--append-to", damaged)
    assert code == 0 and "run(s) appended" in err
    assert damaged.read_text().startswith(good)
