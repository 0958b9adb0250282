"""`servelab lint` as users run it: a subprocess, its exit code, stdout and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from servelab.lint import RULES

from .conftest import CLEAN_TAIL, DATA, NEUTRAL_CWD, PINNED, REPO

#: The official OASIS SARIF 2.1.0 schema (errata01), vendored from the oasis-tcs/sarif-spec
#: repository, file sarif-2.1/schema/sarif-schema-2.1.0.json.
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif-2.1.0.schema.json"


def lint(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    full_env = {**os.environ, **(env or {})}
    full_env.pop("SERVELAB_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "servelab", "lint", *args],
        capture_output=True,
        text=True,
        cwd=cwd or NEUTRAL_CWD,
        env=full_env,
        timeout=60,
        check=False,
    )


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no such file"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary file"),
        (b"", "empty Dockerfile"),
        (b"FROM a\nRUN <<EOF\necho\n", "parser rejected it: unterminated heredoc"),
        (b"FROM a\nENV ONLYKEY\n", "ENV must have two arguments"),
        (b"FROM a\nBOGUS x\n", "unknown instruction BOGUS"),
        (b"FROM a\nCOPY --checksum=sha256:ab x /x\n", "unknown flag: --checksum"),
        (b"FROM a AS 2nd\n", "invalid name for build stage"),
        (b"# check=error=true\nFROM a AS b\nFROM a AS b\n", 'duplicate stage name "b"'),
    ],
)
def test_bad_input_exits_2_naming_the_file(
    tmp_path: Path, content: bytes | None, words: str
) -> None:
    path = tmp_path / "Dockerfile.bad"
    if content is not None:
        path.write_bytes(content)
    proc = lint(str(path), "--no-hadolint")
    assert proc.returncode == 2, proc.stderr
    _no_traceback(proc)
    assert str(path) in proc.stderr
    assert words in proc.stderr
    assert proc.stdout == ""


def test_parser_rejection_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("FROM a\nRUN x\n\nLABEL alone\n")
    proc = lint(str(path))
    assert proc.returncode == 2
    assert f"{path}:4: " in proc.stderr


def test_directory_without_dockerfiles_exits_2(tmp_path: Path) -> None:
    proc = lint(str(tmp_path))
    assert proc.returncode == 2
    assert "no Dockerfile found" in proc.stderr
    _no_traceback(proc)


def test_exit_codes_follow_fail_on(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    clean = write_dockerfile(f"FROM {PINNED}\n{CLEAN_TAIL}")
    assert lint(str(clean), "--no-hadolint").returncode == 0
    warn = write_dockerfile(f"FROM {PINNED}\nUSER 10001\nEXPOSE 8000\nCMD [\"x\"]\n",
                           name="w.Dockerfile")
    assert lint(str(warn), "--no-hadolint").returncode == 0  # no-health is a warning
    assert lint(str(warn), "--no-hadolint", "--fail-on", "warning").returncode == 1
    err = write_dockerfile("FROM python:3.11\n" + CLEAN_TAIL, name="e.Dockerfile")
    proc = lint(str(err), "--no-hadolint")
    assert proc.returncode == 1
    assert "[base-unpinned]" in proc.stdout
    assert lint(str(err), "--no-hadolint", "--fail-on", "none").returncode == 0


def test_directory_discovery(tmp_path: Path) -> None:
    for name in ("Dockerfile", "api.Dockerfile", "Dockerfile.gpu", "Dockerfile.dockerignore"):
        (tmp_path / "svc" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "svc" / name).write_text(f"FROM {PINNED}\n{CLEAN_TAIL}")
    (tmp_path / "svc" / "README.md").write_text("not a Dockerfile")
    proc = lint(str(tmp_path), "--no-hadolint", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    files = sorted(Path(f).name for f in json.loads(proc.stdout)["files"])
    assert files == ["Dockerfile", "Dockerfile.gpu", "api.Dockerfile"]


def test_build_args_file_resolves_from(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    path = write_dockerfile("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n" + CLEAN_TAIL)
    without = lint(str(path), "--no-hadolint", "-f", "json")
    assert [f["rule"] for f in json.loads(without.stdout)["findings"]] == ["arg-unresolved"]
    env_file = str(DATA / "build-args.env")
    with_file = lint(str(path), "--no-hadolint", "--build-args-file", env_file)
    assert with_file.returncode == 0, with_file.stdout
    overridden = lint(
        str(path), "--no-hadolint", "--build-args-file", env_file,
        "--build-arg", "BASE_IMAGE=python:3.11", "-f", "json",
    )
    assert [f["rule"] for f in json.loads(overridden.stdout)["findings"]] == ["base-unpinned"]


def test_bad_build_args_file(tmp_path: Path, write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    path = write_dockerfile(f"FROM {PINNED}\n{CLEAN_TAIL}")
    bad = tmp_path / "args.env"
    bad.write_text("# ok\nBASE=x\nnot a pair\n")
    proc = lint(str(path), "--build-args-file", str(bad))
    assert proc.returncode == 2
    assert f"{bad}:3: " in proc.stderr
    proc = lint(str(path), "--build-arg", "NOEQUALS")
    assert proc.returncode == 2
    assert "KEY=VALUE" in proc.stderr


def test_health_declared_and_context(write_dockerfile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_dockerfile(f"FROM {PINNED}\nUSER 10001\nCOPY . /app\nEXPOSE 8000\nCMD [\"x\"]\n")
    (tmp_path / ".git").mkdir()  # a checkout: COPY . takes its history along
    proc = lint(str(path), "--no-hadolint", "-f", "json")
    rules = sorted(f["rule"] for f in json.loads(proc.stdout)["findings"])
    assert rules == ["context-leak", "no-health"]
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / ".dockerignore").write_text(".git\n**/*.safetensors\n**/models\n")
    proc = lint(str(path), "--no-hadolint", "--health-declared", "--context", str(ctx))
    assert proc.returncode == 0
    assert "no findings" in proc.stdout
    proc = lint(str(path), "--context", str(tmp_path / "nope"))
    assert proc.returncode == 2


def _sarif_for_all_fixtures() -> dict:  # type: ignore[type-arg]
    proc = lint(str(DATA / "positive"), "--no-hadolint", "-f", "sarif", "--fail-on", "none")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_sarif_validates_and_describes_every_rule() -> None:
    doc = _sarif_for_all_fixtures()
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.Draft4Validator(schema).validate(doc)
    run = doc["runs"][0]
    described = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert set(RULES) <= set(described)
    results = run["results"]
    assert {r["ruleId"] for r in results} == set(RULES)  # the fixtures trigger every rule
    for r in results:
        assert described[r["ruleIndex"]] == r["ruleId"]
        assert r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1


def test_sarif_schema_rejects_broken_documents() -> None:
    schema = json.loads(SARIF_SCHEMA.read_text())
    doc = _sarif_for_all_fixtures()
    doc["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate(doc)


def test_json_and_github_formats(tmp_path: Path) -> None:
    path = DATA / "positive" / "root-user-root.Dockerfile"
    proc = lint(str(path), "--no-hadolint", "-f", "json")
    doc = json.loads(proc.stdout)
    assert doc["findings"][0]["rule"] == "root-user"
    assert doc["findings"][0]["line"] == 4
    assert doc["rules"]["root-user"]["severity"] == "error"
    out = tmp_path / "report.txt"
    proc = lint(str(path), "--no-hadolint", "-f", "github", "-o", str(out))
    assert proc.stdout == ""
    assert out.read_text().startswith(f"::error file={path},line=4,title=servelab root-user::")


def test_list_rules() -> None:
    proc = lint("--list-rules")
    assert proc.returncode == 0
    assert [line.split()[0] for line in proc.stdout.splitlines()] == list(RULES)


def test_help_explains_exit_codes() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "servelab", "lint", "--help"],
        capture_output=True, text=True, check=False, cwd=NEUTRAL_CWD,
    )
    assert proc.returncode == 0
    assert "Exit codes" in proc.stdout
    assert "--build-args-file" in proc.stdout


def test_lint_does_not_import_docker_sdk_or_jsonschema(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    path = write_dockerfile(f"FROM {PINNED}\n{CLEAN_TAIL}")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "servelab", "lint", str(path), "--no-hadolint"],
        capture_output=True, text=True, check=False, cwd=NEUTRAL_CWD,
    )
    assert proc.returncode == 0, proc.stderr
    modules = {
        line.rsplit("|", 1)[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "servelab.lint.frontend" in modules  # the measurement works
    # nor the old Go parser binding: the frontend is servelab's own (lint/frontend.py)
    heavy = {m for m in modules
             if m.split(".")[0] in {"docker", "jsonschema", "yaml", "requests", "dockerfile"}}
    assert heavy == set()
