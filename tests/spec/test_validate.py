"""servelab validate on positive/negative fixture folders (picked up automatically).

An invalid fixture marks each offending line with ``# <-- expect: TEXT``: a finding must sit on
that line with TEXT in its message. ``# expect-any: TEXT`` wants TEXT on any finding.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from servelab import spec
from servelab.spec import validate_files

DATA = Path(__file__).resolve().parent.parent / "data" / "spec"
VALID = sorted((DATA / "valid").glob("*.yaml"))
INVALID = sorted((DATA / "invalid").glob("*.yaml"))
MARK = re.compile(rb"<-- expect: (.+?)\s*$")
ANY = re.compile(rb"^# expect-any: (.+?)\s*$")


def expectations(path: Path) -> tuple[list[tuple[int, str]], list[str]]:
    at_line: list[tuple[int, str]] = []
    anywhere: list[str] = []
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        if m := MARK.search(raw):
            at_line.append((n, m.group(1).decode("utf-8", "replace")))
        if m := ANY.search(raw):
            anywhere.append(m.group(1).decode())
    if path.name == "empty.yaml":
        anywhere.append("empty file")
    return at_line, anywhere


def test_fixture_folders_are_big_enough() -> None:
    assert len(VALID) >= 5
    assert len(INVALID) >= 25


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid(path: Path) -> None:
    report = validate_files([path])
    assert report.findings == [], [f.message for f in report.findings]
    exp = spec.load_experiment(path)
    assert exp.change
    assert exp.repeats >= 1
    assert set(exp.metrics) <= set(spec.METRICS)
    assert set(exp.fixed) <= set(spec.FACTORS)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid(path: Path) -> None:
    at_line, anywhere = expectations(path)
    assert at_line or anywhere, f"fixture {path.name} states no expectation"
    report = validate_files([path])
    assert report.findings, "an invalid fixture must give findings"
    for line, text in at_line:
        hits = [f for f in report.findings if f.line == line and text in f.message]
        got = [(f.line, f.message) for f in report.findings]
        assert hits, f"want {text!r} at line {line}, got {got}"
    for text in anywhere:
        assert any(text in f.message for f in report.findings), [f.message for f in report.findings]
    for f in report.findings:
        assert f.file == str(path)


def test_cli_rejects_every_invalid_fixture_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "validate", *map(str, INVALID)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    for path in INVALID:
        assert str(path) in proc.stdout


def test_cli_accepts_valid_fixtures() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "validate", *map(str, VALID)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no findings" in proc.stdout


def test_oversized_file(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("apiVersion: servelab/v1\n" + "# padding\n" * 120_000)
    report = validate_files([big])
    assert len(report.findings) == 1
    assert "over the" in report.findings[0].message


def test_billion_laughs_fails_fast() -> None:
    import time

    start = time.monotonic()
    validate_files([DATA / "invalid" / "billion-laughs.yaml"])
    assert time.monotonic() - start < 5


def test_configmap_normalises_like_native() -> None:
    exp = spec.load_experiment(DATA / "valid" / "configmap-verbatim.yaml")
    assert exp.form == "configmap"
    assert exp.repeats == 3
    assert exp.metrics == ["digest", "size", "startup", "findings"]
    assert exp.fixed == ["image", "model", "input"]
    assert exp.name == "day11-experiment"
    assert exp.treatment.dockerfile == (DATA / "valid" / "Dockerfile").resolve()


def test_labelled_configmap_is_picked_and_spec_yaml_applies() -> None:
    exp = spec.load_experiment(DATA / "valid" / "multidoc-labelled.yaml")
    assert exp.name == "serving-experiment"
    assert exp.repeats == 2
    assert exp.serve.port == 8080
    assert exp.serve.health_path == "/ready"


def test_document_option_picks_by_name() -> None:
    path = DATA / "invalid" / "multidoc-ambiguous.yaml"
    exp = spec.load_experiment(path, document="b")
    assert exp.change == "two"


def test_merge_keys_resolve() -> None:
    exp = spec.load_experiment(DATA / "valid" / "anchors.yaml")
    assert exp.treatment.build_args == {"A": "1"}
    assert exp.treatment.dockerfile.name == "Dockerfile.fast"


def test_github_format_annotates() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "validate", "--format", "github",
         str(DATA / "invalid" / "cm-repeats-int.yaml")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout.startswith("::error file=")
    assert ",line=7," in proc.stdout


def test_spec_docs_are_generated_from_the_current_schema() -> None:
    root = Path(__file__).resolve().parent.parent.parent
    proc = subprocess.run([sys.executable, str(root / "scripts" / "gen_spec_docs.py"), "--check"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_schema_lists_match_the_code() -> None:
    from servelab.spec import load_schema

    schema = load_schema("experiment")
    metric_enum = set(schema["$defs"]["metric"]["enum"])
    assert metric_enum == {s for v in spec.METRICS.values() for s in v}
    factor_enum = set(schema["$defs"]["factor"]["enum"])
    assert factor_enum == {s for v in spec.FACTORS.values() for s in v}


def test_top_level_schema_is_the_shipped_one() -> None:
    root = Path(__file__).resolve().parent.parent.parent
    top = root / "schemas" / "experiment.schema.json"
    shipped = root / "src" / "servelab" / "schemas" / "experiment.schema.json"
    assert top.read_bytes() == shipped.read_bytes()


def test_every_schema_field_has_a_description() -> None:
    from servelab.spec import load_schema

    missing: list[str] = []

    def walk(node: object, path: str) -> None:
        if not isinstance(node, dict):
            return
        for key, sub in node.get("properties", {}).items():
            if "description" not in sub:
                missing.append(f"{path}.{key}")
            walk(sub, f"{path}.{key}")
        for name, sub in node.get("$defs", {}).items():
            walk(sub, f"#/{name}")

    walk(load_schema("experiment"), "#")
    assert missing == []


def test_cold_start_lazy_is_read_into_the_experiment() -> None:
    exp = spec.load_experiment(DATA / "valid" / "native-coldstart-lazy.yaml")
    assert exp.cold_start == spec.ColdStart(("soci",), True, 4194304)
    assert spec.load_experiment(DATA / "valid" / "native-minimal.yaml").cold_start == \
        spec.ColdStart()
