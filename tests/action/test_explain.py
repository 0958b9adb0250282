"""Why a verdict: the failed checks, rule ids and evidence of each arm (servelab.run.explain),
in summary.md and as annotations.

The fixtures in tests/data/action/results are result.json files of real runs (paths made
neutral, the bulky timeline and probe events dropped): the tiny server's control built the
common way, the bundled example's control (8 MiB of weights baked in), and a pull request
whose server downloads a tokenizer at start and crashes without network.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from servelab import github
from servelab.run import explain as ex
from servelab.run import summary

DATA = Path(__file__).resolve().parents[1] / "data" / "action" / "results"


def load(name: str) -> dict[str, Any]:
    data = json.loads((DATA / name).read_text())
    assert isinstance(data, dict)
    return data


def checks(result: dict[str, Any]) -> dict[str, ex.FailedCheck]:
    return {c.name: c for c in ex.repeat_checks(result)}


def test_the_control_names_each_rule_with_its_evidence() -> None:
    found = checks(load("tiny-server-control.json"))
    assert list(found) == ["lint base-unpinned", "lint root-user", "lint weights-baked",
                           "not-ready (download-attempt)", "runs-as-root"]
    base = found["lint base-unpinned"]
    assert base.file == "/work/team/Dockerfile.control" and base.line == 4
    assert any("resolved to sha256:a0423bb944ed" in e and "the tag can move" in e
               for e in base.evidence)
    root = found["lint root-user"]
    assert root.severity == "warning"
    assert root.evidence == ("the server ran as uid 0 at start (image USER (none))",)
    weights = found["lint weights-baked"]
    assert weights.evidence[0].startswith("the image holds 184 B of model weights in 1 file")
    assert weights.evidence[1] == ("`/models/model.safetensors`: 184 B in layer 2 by "
                                   "`COPY model/ /models/ # buildkit`")
    assert found["runs-as-root"].fix and "USER 10001" in found["runs-as-root"].fix


def test_baked_weights_are_measured_in_bytes_and_layers() -> None:
    weights = checks(load("bundled-control.json"))["lint weights-baked"]
    assert weights.evidence[0].startswith("the image holds 8.0 MiB of model weights in 2 files")
    assert "`/models/weights.safetensors`: 8.0 MiB in layer 2" in weights.evidence[2]


def test_a_download_at_start_names_the_download() -> None:
    found = checks(load("pr-download-at-start.json"))
    assert list(found) == ["crashed (download-attempt)"]
    crash = found["crashed (download-attempt)"]
    assert crash.rule == "download-attempt" and crash.arm == "treatment"
    assert ("the download attempt: `urllib.error.URLError: <urlopen error [Errno -3] "
            "Temporary failure in name resolution>`") in crash.evidence
    assert ("the address it tried to reach: "
            "`https://huggingface.co/acme/tiny/resolve/main/tokenizer.json`") in crash.evidence
    assert "the container exited with code 1" in crash.evidence
    assert crash.fix and "HF_HUB_OFFLINE=1" in crash.fix


def test_a_crash_without_a_diagnosis_shows_its_telling_log_line() -> None:
    result = load("pr-download-at-start.json")
    smoke = result["stages"]["smoke"]["record"]
    smoke["cause"] = None
    smoke["container"]["log_tail"] = ["[0.001s] listening on port 8000",
                                      "Traceback (most recent call last):",
                                      "KeyError: 'weight'", "", "  "]
    crash = checks(result)["crashed"]
    assert crash.rule is None
    assert crash.evidence[0] == "the telling log line: `KeyError: 'weight'`"


def test_telling_line_prefers_an_error_over_the_last_line() -> None:
    assert ex.telling_line(["boot", "fatal: no model", "bye"]) == "fatal: no model"
    assert ex.telling_line(["boot", "bye", ""]) == "bye"
    assert ex.telling_line([]) is None


def test_a_log_line_cannot_break_out_of_its_code_span() -> None:
    assert ex.code("a `b` c") == "`a 'b' c`"
    assert ex.code("x" * 500, 20) == "`" + "x" * 19 + "…`"
    assert ex.code("two\nlines") == "`two lines`"


def test_the_same_failure_in_several_repeats_is_one_entry() -> None:
    first = load("pr-download-at-start.json")
    second = copy.deepcopy(first)
    second["repeat"] = 2
    (arm,) = ex.explain([second, first])
    assert arm.arm == "treatment" and arm.repeats == 2
    assert [(c.name, c.repeats) for c in arm.failed] == [("crashed (download-attempt)", (1, 2))]
    assert arm.ids == ["download-attempt"]


def test_weights_found_by_the_smoke_stage_alone_are_named() -> None:
    """Lint did not see them (e.g. fetched by a script): the measured bytes still show."""
    result = load("bundled-control.json")
    result["verdicts"] = [v for v in result["verdicts"] if v["check"] != "lint"]
    found = checks(result)
    measured = found["baked weights (weights-baked)"]
    assert measured.severity == "warning"
    assert measured.message.startswith("the image holds 8.0 MiB of model weights")


def test_a_failed_vulnerability_gate_lists_the_findings() -> None:
    result = load("pr-download-at-start.json")
    result["verdicts"].append({"check": "vulnerability gate", "stage": "scan", "passed": False,
                               "reason": "1 finding(s) at CRITICAL"})
    result["stages"]["scan"]["record"]["gate"] = {
        "passed": False, "fail_on": ["CRITICAL"], "reason": "1 finding(s) at CRITICAL",
        "failing": [{"id": "CVE-2099-1001", "severity": "CRITICAL", "package": "openssl",
                     "installed": "3.0.1", "fixed": "3.0.2"}]}
    gate = checks(result)["vulnerability gate"]
    assert gate.evidence == ("CVE-2099-1001 (CRITICAL) in openssl 3.0.1: fixed in 3.0.2",)


def test_summary_md_says_why() -> None:
    lines = summary._why([load("tiny-server-control.json"), load("pr-download-at-start.json")])
    text = "\n".join(lines)
    assert lines[0] == "## Why"
    assert ("**control**: 5 failed checks (`base-unpinned`, `root-user`, `weights-baked`, "
            "`download-attempt`, `runs-as-root`)") in text
    assert "- ❌ **lint `weights-baked`** at `/work/team/Dockerfile.control:8`" in text
    assert "- ⚠️ **lint `root-user`**" in text
    assert "  - the server ran as uid 0 at start (image USER (none))" in text
    assert "**treatment**: 1 failed check (`download-attempt`)" in text
    assert "  - fix: put everything the server needs into the image" in text


def test_summary_md_of_an_arm_that_passed() -> None:
    result = load("pr-download-at-start.json")
    result["verdicts"] = [v for v in result["verdicts"] if v["passed"] is not False]
    assert summary._why([result]) == ["## Why", "", "**treatment**: every check passed.", ""]


@pytest.mark.parametrize("verdict", ["failed", "not reproducible"])
def test_annotations_one_per_failed_check_of_the_treatment(verdict: str) -> None:
    doc = {"verdict": verdict, "results": [load("tiny-server-control.json"),
                                           load("pr-download-at-start.json")],
           "reasons": ["crashed (treatment r1): the container exited with code 1",
                       "reproducible: 2 distinct digests over 2 builds"]}
    found = github.failure_annotations(doc)
    assert [(a.level, a.title) for a in found] == [
        ("error", "servelab treatment: crashed (download-attempt)"),
        ("error", f"servelab: {verdict}"),
    ]
    assert "https://huggingface.co/acme/tiny/resolve/main/tokenizer.json" in found[0].message
    assert "`" not in found[0].message
    assert found[1].message == "reproducible: 2 distinct digests over 2 builds"


def test_annotation_paths_are_relative_to_the_workspace(tmp_path: Path) -> None:
    df = tmp_path / "ws" / "app" / "Dockerfile"
    df.parent.mkdir(parents=True)
    df.touch()
    inside = github.Annotation("error", "m", file=str(df), line=3)
    assert inside.in_workspace(tmp_path / "ws").file == "app/Dockerfile"
    outside = github.Annotation("error", "m", file="/elsewhere/Dockerfile", line=3)
    moved = outside.in_workspace(tmp_path / "ws")
    assert (moved.file, moved.line, moved.message) == (None, None, "/elsewhere/Dockerfile:3: m")
    assert github.Annotation("error", "m", file="rel/Dockerfile").in_workspace(None).file == \
        "rel/Dockerfile"
