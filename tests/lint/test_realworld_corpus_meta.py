"""The real-world corpus (eval/realworld/) is well formed: checked without network or cache.

The corpus keeps references to public files and the truths written before servelab ran on
them; these tests check its bookkeeping, never the files themselves (they are not in the
repository) and never a figure.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from servelab.k8s import all_rules
from servelab.lint.rules import RULES as LINT_RULES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "eval" / "realworld"
FILE_COLUMNS = ["id", "kind", "repo", "path", "commit", "date_added"]
TRUTH_COLUMNS = ["id", "rule", "line", "note"]
RULES = {"dockerfile": set(LINT_RULES.rules), "manifest": set(all_rules())}


def _rows(name: str) -> tuple[list[str], list[dict[str, str]]]:
    with (CORPUS / name).open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"realworld_{name}", CORPUS / f"{name}.py")
    assert spec and spec.loader
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    sys.path.insert(0, str(CORPUS))
    try:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(CORPUS))
    return module


def _reserved_list() -> Path | None:
    candidates = [os.environ.get("SERVELAB_RESERVED_FILES", ""),
                  str(ROOT.parent / "shared" / "reserved-files.tsv"),
                  str(ROOT.parent.parent / "shared" / "reserved-files.tsv")]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def test_files_columns_ids_and_commits() -> None:
    columns, rows = _rows("files.tsv")
    assert columns == FILE_COLUMNS
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "ids are unique"
    for r in rows:
        assert r["kind"] in RULES, r
        assert re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", r["repo"]), r
        assert re.fullmatch(r"[0-9a-f]{40}", r["commit"]), r
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["date_added"]), r
        assert r["id"].startswith("d" if r["kind"] == "dockerfile" else "m"), r
        assert r["path"] and not r["path"].startswith("/"), r
    assert len({(r["repo"], r["path"]) for r in rows}) == len(rows), "no file listed twice"


def test_truths_refer_to_listed_files_and_known_rules() -> None:
    columns, truths = _rows("truths.tsv")
    assert columns == TRUTH_COLUMNS
    kinds = {r["id"]: r["kind"] for r in _rows("files.tsv")[1]}
    parse_lines = _module("score").parse_lines
    for t in truths:
        assert t["id"] in kinds, f"truth for an unlisted id: {t}"
        assert t["rule"] in RULES[kinds[t["id"]]], f"not a rule of that tool: {t}"
        lines = parse_lines(t["line"])
        assert lines and min(lines) >= 1, t


def test_optional_judgement_files_are_well_formed() -> None:
    kinds = {r["id"]: r["kind"] for r in _rows("files.tsv")[1]}
    score = _module("score")
    for name, column, allowed in (("judged.tsv", "verdict", {score.LATE, score.CONFIRMED}),
                                  ("corrections.tsv", "action", {"drop", "add"})):
        if not (CORPUS / name).is_file():
            continue
        for r in _rows(name)[1]:
            assert r["id"] in kinds and r["rule"] in RULES[kinds[r["id"]]], r
            assert r[column] in allowed, r
            score.parse_lines(r["line"])


def test_no_reserved_file_is_in_the_corpus() -> None:
    reserved_path = _reserved_list()
    if reserved_path is None:
        pytest.skip("the reserved-files list is not on this machine "
                    "(set SERVELAB_RESERVED_FILES to its path)")
    reserved = set()
    for line in reserved_path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            repo, path = line.split("\t")[:2]
            reserved.add((repo.strip(), path.strip()))
    listed = {(r["repo"], r["path"]) for r in _rows("files.tsv")[1]}
    assert reserved, "the reserved list was read"
    assert not listed & reserved


def test_line_specs_and_matching() -> None:
    score = _module("score")
    assert score.parse_lines("12") == {12}
    assert score.parse_lines("3-5") == {3, 4, 5}
    assert score.parse_lines("15,18") == {15, 18}
    with pytest.raises(ValueError):
        score.parse_lines("9-3")
    truths = [score.Truth("m1", "resources", frozenset({10, 11, 12}), "10-12", ""),
              score.Truth("m1", "resources", frozenset({11}), "11", ""),
              score.Truth("d1", "base-unpinned", frozenset({1}), "1", "")]
    findings = [score.Finding("m1", "resources", 11, ""),
                score.Finding("m1", "resources", 12, ""),
                score.Finding("m1", "resources", 30, ""),
                score.Finding("d1", "base-latest", 1, "")]
    matched = score.match(truths, findings)
    # the narrow truth (11) and the range (10-12) are both found; line 30 and the other rule
    # match nothing, and a finding never counts twice
    assert sorted(matched.values()) == [0, 1]
    s = score.score(truths, findings, matched, None)
    assert (s.truths, s.findings, s.found) == (3, 4, 2)
    assert s.recall == pytest.approx(2 / 3) and s.precision == pytest.approx(0.5)


def test_fetch_takes_a_directory_of_fetched_files(tmp_path: Path) -> None:
    fetch = _module("fetch")
    entries = [fetch.Entry("d900", "dockerfile", "o/r", "Dockerfile", "0" * 40),
               fetch.Entry("m900", "manifest", "o/r", "k8s/a.yaml", "0" * 40),
               fetch.Entry("d901", "dockerfile", "o/r", "x/Dockerfile", "0" * 40)]
    src = tmp_path / "src"
    (src / "d900").mkdir(parents=True)
    (src / "d900" / "Dockerfile").write_text("FROM scratch\n", encoding="utf-8")
    (src / "m900.yaml").write_text("kind: Pod\n", encoding="utf-8")
    cache = tmp_path / "cache"
    missing = fetch.fill(entries, cache, src, timeout=1.0)
    assert missing == 1  # d901 is in neither form
    assert (cache / "d900" / "Dockerfile").read_text(encoding="utf-8") == "FROM scratch\n"
    assert (cache / "m900" / "manifest.yaml").read_text(encoding="utf-8") == "kind: Pod\n"
    assert fetch.raw_url(entries[1]) == (
        "https://raw.githubusercontent.com/o/r/" + "0" * 40 + "/k8s/a.yaml")
