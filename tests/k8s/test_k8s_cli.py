"""The k8s-check command: exit codes, output formats, stdin, directories, --result errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from servelab.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "k8s"
CLEAN = DATA / "negative" / "vllm-deployment.yaml"
SUMMARY = DATA / "results" / "summary.json"
ERROR_CASE = DATA / "positive" / "image-not-digest-tag.yaml"
WARNING_CASE = DATA / "positive" / "disruption-missing.yaml"
INFO_CASE = DATA / "positive" / "rollout-surge.yaml"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["k8s-check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_manifest_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(CLEAN), "--result", str(SUMMARY))
    assert code == 0
    assert "no findings" in out
    assert "worst startup 95.2s" in out  # the control arm's 400s is not counted


@pytest.mark.parametrize(
    ("path", "fail_on", "code"),
    [
        (ERROR_CASE, "error", 1),
        (ERROR_CASE, "none", 0),
        (WARNING_CASE, "error", 0),
        (WARNING_CASE, "warning", 1),
        (INFO_CASE, "warning", 0),
        (INFO_CASE, "info", 1),
    ],
)
def test_fail_on(capsys: pytest.CaptureFixture[str], path: Path, fail_on: str, code: int) -> None:
    args = [str(path), "--fail-on", fail_on]
    if path == ERROR_CASE:
        args += ["--result", str(SUMMARY)]
    assert _run(capsys, *args)[0] == code


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(ERROR_CASE), "--result", str(SUMMARY), "-f", "json")
    assert code == 1
    doc = json.loads(out)
    [finding] = doc["findings"]
    assert finding["rule"] == "image-not-digest"
    assert finding["line"] == 64
    assert finding["context"]["object"] == "Deployment/llama-3-8b"
    assert finding["context"]["container"] == "vllm"
    assert "@sha256:781e1125" in finding["fix"]  # the tested digest is suggested
    assert doc["rules"]["image-not-digest"]["severity"] == "error"


def test_sarif_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(WARNING_CASE), "-f", "sarif")
    assert code == 0
    doc = json.loads(out)
    schema = json.loads((DATA.parent / "sarif-2.1.0.schema.json").read_text())
    jsonschema.validate(doc, schema)
    run = doc["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert "shm" in ids and "driver-compat" in ids  # every rule is described
    [result] = run["results"]
    assert result["ruleId"] == "disruption"
    assert ids[result["ruleIndex"]] == "disruption"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 14


def test_github_output(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, str(WARNING_CASE), "-f", "github")
    assert out.startswith("::warning file=")
    assert ",line=14," in out
    assert "title=servelab disruption::" in out


def test_output_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    code, out, _ = _run(capsys, str(WARNING_CASE), "-f", "markdown", "-o", str(target))
    assert code == 0 and out == ""
    assert "| warning | `disruption` |" in target.read_text()


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(ERROR_CASE.read_text()))
    code, out, _ = _run(capsys, "-", "-f", "json")
    assert code == 1
    [finding] = json.loads(out)["findings"]
    assert finding["file"] == "<stdin>"
    assert finding["line"] == 64


def test_objects_combine_across_files_and_directories(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = CLEAN.read_text().split("\n---\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "deploy.yaml").write_text(docs[1])
    (tmp_path / "sub" / "policy.yml").write_text("\n---\n".join([docs[0], docs[2]]))
    (tmp_path / "notes.txt").write_text("not read")
    code, out, _ = _run(capsys, str(tmp_path))
    assert code == 0, out
    assert "2 file(s) checked, no findings" in out


def test_pdb_missing_when_files_are_split(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    docs = CLEAN.read_text().split("\n---\n")
    (tmp_path / "deploy.yaml").write_text(docs[1])
    _, out, _ = _run(capsys, str(tmp_path / "deploy.yaml"), "-f", "json")
    rules = {f["rule"] for f in json.loads(out)["findings"]}
    assert "disruption" in rules


def test_duplicates_are_noted(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, str(CLEAN), str(CLEAN))
    assert "defined more than once" in out
    assert "Deployment/llama-3-8b" in out


def test_skipped_cpu_workload_is_noted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(DATA / "negative" / "cpu-gateway-skipped.yaml"))
    assert code == 0
    assert "not checked (no GPU): Deployment/gateway" in out


def test_unknown_container(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, str(CLEAN), "--container", "nope")
    assert code == 2
    assert "no container named 'nope'" in err and "vllm" in err


def test_margin_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, str(CLEAN), "--startup-margin", "0.5")
    assert code == 2
    assert "below 1" in err


def test_help_explains_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["k8s-check", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--result" in out and "Exit codes" in out and "startup-probe-budget" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"schemaVersion": 1, "arm": "treatment"}', "no measurement found"),
        ('{"results": [{"arm": "control", "image": {"digest": "x"}}]}', "no result of the"),
    ],
)
def test_bad_result_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    result = tmp_path / "result.json"
    result.write_text(content)
    code, out, err = _run(capsys, str(CLEAN), "--result", str(result))
    assert code == 2
    assert out == ""
    assert message in err
    assert str(result) in err or "no measurement" in err


def test_missing_result_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, str(CLEAN), "--result", str(tmp_path / "none.json"))
    assert code == 2
    assert "no such file" in err


@pytest.mark.parametrize(
    ("name", "code"),
    [("negative/no-workload-service-only.yaml", 0),
     ("positive/plaintext-secret-secret-only.yaml", 1)],
)
def test_a_file_without_workload_is_valid_input(capsys: pytest.CaptureFixture[str], name: str,
                                                code: int) -> None:
    """Only Services and ConfigMaps: exit 0; only a Secret with a token: exit 1 for it. Never
    exit 2, and the output says that no workload was in the input."""
    got, out, err = _run(capsys, str(DATA / name))
    assert got == code, out + err
    assert "no workload in the input" in out + err
    assert "Traceback" not in err


def test_a_committed_secret_and_the_same_token_in_env_are_one_finding(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "positive" / "plaintext-secret-same-token-secret.yaml"
    code, out, _ = _run(capsys, str(path), "--result", str(SUMMARY), "-f", "json")
    assert code == 1
    found = [f for f in json.loads(out)["findings"] if f["rule"] == "plaintext-secret"]
    assert len(found) == 1
    assert "Secret/hf-token key 'HF_TOKEN'" in found[0]["context"]["also"]


def test_notes_are_in_every_output(capsys: pytest.CaptureFixture[str]) -> None:
    """What is said without a finding (a GPU need that is unknown) reaches every format."""
    path = str(DATA / "negative" / "gpu-limit-unknown-server.yaml")
    said = "whether it needs one is unknown"
    for fmt in ("text", "json", "markdown", "github", "sarif"):
        code, out, _ = _run(capsys, path, "-f", fmt)
        assert code == 0 and said in out, fmt
    _, out, _ = _run(capsys, path, "-f", "github")
    assert out.startswith("::notice title=servelab note::")
    _, out, _ = _run(capsys, path, "-f", "sarif")
    assert any(said in n for n in json.loads(out)["runs"][0]["properties"]["notes"])
