"""Settings files, inline suppressions and build-argument files."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.build.buildargs import parse_build_args_file
from servelab.errors import InputError
from servelab.findings import Severity
from servelab.lint import RULES, LintConfig, discover_config, lint_paths
from servelab.lint.config import load_config, suppressions

from .conftest import CLEAN_TAIL, DATA, PINNED, REPO

UNPINNED = "FROM python:3.11\n" + CLEAN_TAIL  # base-unpinned only


def _rules(path: Path, cfg: LintConfig) -> list[tuple[str, str]]:
    report = lint_paths([path], config=cfg, hadolint=False)
    return sorted((f.rule_id, f.severity.value) for f in report.findings)


def test_pyproject_settings_are_found_upwards(tmp_path: Path, write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.servelab.lint]\n'
        'disable = ["no-health"]\nseverity = { "base-unpinned" = "warning" }\nhadolint = false\n'
    )
    (tmp_path / ".git").mkdir()
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = discover_config(sub)
    assert cfg.disable == {"no-health"}
    assert cfg.severity == {"base-unpinned": Severity.WARNING}
    assert cfg.hadolint is False
    assert cfg.source == str(tmp_path / "pyproject.toml")
    path = write_dockerfile("FROM python:3.11\nUSER 10001\nEXPOSE 8000\nCMD [\"x\"]\n")
    assert _rules(path, cfg) == [("base-unpinned", "warning")]
    report = lint_paths([path], config=cfg, hadolint=False)
    assert report.rules["base-unpinned"].severity == Severity.WARNING
    assert "no-health" not in report.rules


def test_discovery_stops_at_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / ".servelab.yaml").write_text("lint:\n  disable: [no-health]\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert discover_config(repo) == LintConfig()
    assert discover_config(tmp_path).disable == {"no-health"}


def test_yaml_settings_win_over_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.servelab.lint]\ndisable = ["root-user"]\n')
    (tmp_path / ".servelab.yaml").write_text(
        "lint:\n  disable: [DL3008]\n  severity:\n    no-health: error\n"
    )
    cfg = discover_config(tmp_path)
    assert cfg.disable == {"DL3008"}
    assert cfg.severity == {"no-health": Severity.ERROR}


def test_pyproject_without_table_is_skipped(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert discover_config(tmp_path) == LintConfig()
    assert discover_config(REPO).source == str(REPO / "pyproject.toml")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("lint:\n  disable: [no-such-rule]\n", "unknown lint rule 'no-such-rule'"),
        ("lint:\n  severity: {base-latest: fatal}\n", "unknown severity"),
        ("lint:\n  colour: red\n", "unknown lint setting"),
        ("lint:\n  hadolint: maybe\n", "true or false"),
        ("lint: [1]\n", "table/mapping"),
        ("lint:\n  disable: x: y\n", "malformed YAML"),
        ("other: 1\n", "no lint settings"),
    ],
)
def test_bad_settings(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / ".servelab.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=words):
        load_config(path, set(RULES))


def test_bad_toml(tmp_path: Path) -> None:
    path = tmp_path / "lint.toml"
    path.write_text("[tool.servelab.lint\n")
    with pytest.raises(InputError, match="malformed TOML"):
        load_config(path, set(RULES))


def test_inline_suppression(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    text = (
        "# servelab: ignore=base-unpinned\n"
        "FROM python:3.11 AS build\n"
        "FROM python:3.11\n"
        "# the server image's user comes from the base\n"
        "# servelab: ignore=root-user, no-health\n"
        "# servelab: ignore=base-latest\n"
        'CMD ["uvicorn", "app:app"]\n'
    )
    path = write_dockerfile(text)
    # line 3 is not suppressed; no USER is reported at the final FROM (line 3), not CMD
    found = lint_paths([path], config=LintConfig(), hadolint=False).findings
    assert sorted((f.rule_id, f.line) for f in found) == [
        ("base-unpinned", 3),
        ("no-health", 3),
        ("root-user", 3),
    ]
    lines = text.splitlines()
    assert suppressions(lines, 7) == {"root-user", "no-health", "base-latest"}
    assert suppressions(lines, 2) == {"base-unpinned"}
    assert suppressions(lines, 3) == set()


def test_suppression_applies_to_the_whole_instruction(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    path = write_dockerfile(
        f"FROM {PINNED}\n# servelab: ignore=unpinned-packages\nRUN true \\\n"
        " && pip install flask\n" + CLEAN_TAIL
    )
    assert lint_paths([path], config=LintConfig(), hadolint=False).findings == []


def test_build_args_file(tmp_path: Path) -> None:
    args = parse_build_args_file(DATA / "build-args.env")
    assert args["BASE_IMAGE"].startswith("127.0.0.1:5000/servelab/python-base:bookworm@sha256:")
    p = tmp_path / "a.env"
    p.write_text('\n# c\nA=1\nB="two words"\nC=x=y\n')
    assert parse_build_args_file(p) == {"A": "1", "B": "two words", "C": "x=y"}


def test_unknown_rule_in_ignore_comment_is_a_note(write_dockerfile) -> None:  # type: ignore[no-untyped-def]
    path = write_dockerfile(
        f"# servelab: ignore=base-unpined, DL3008\nFROM {PINNED}\n" + CLEAN_TAIL
    )
    report = lint_paths([path], config=LintConfig(), hadolint=False)
    assert report.findings == []
    note = f"{path}:1: unknown rule id 'base-unpined' in a servelab: ignore comment"
    assert report.notes == [note]


@pytest.mark.parametrize(
    ("name", "text", "words", "line", "fix"),
    [
        (".servelab.yaml", "lint:\n  disable:\n    - no-health\n    - no-helth\n",
         "did you mean 'no-health'", 4, "servelab lint --list-rules"),
        (".servelab.yaml", "lint:\n  severity:\n    no-health: info\n    base-latest: fatal\n",
         "unknown severity 'fatal'", 4, "error, warning or info"),
        (".servelab.yaml", "x: 1\nlint:\n  hadolint: true\n  colour: red\n",
         "unknown lint setting(s): colour", 4, "disable, severity and hadolint"),
        (".servelab.yaml", "lint:\n  hadolint: 'no'\n", "true or false, not str 'no'", 2,
         "unquoted"),
        (".servelab.yaml", "lint:\n  disable: no-health\n", "must be a list", 2,
         "disable: [no-health, DL3008]"),
        (".servelab.yaml", "\nlint: [1]\n", "table/mapping, not list", 2, "disable (a list"),
        ("lint.toml", '[project]\nname = "x"\n\n[tool.servelab.lint]\nhadolint = true\n'
         'disable = [\n  "no-health",\n  "nope",\n]\n', "unknown lint rule 'nope'", 8,
         "--list-rules"),
        ("lint.toml", '[tool.servelab.lint]\nseverity = { "no-health" = "info", '
         '"base-latest" = "fatal" }\n', "unknown severity 'fatal'", 2, "error, warning"),
        ("lint.toml", "[tool.servelab.lint]\n\ncolor = 1\n", "unknown lint setting(s): color",
         3, "disable, severity and hadolint"),
        ("lint.toml", '[tool.servelab.lint]\ndisable = ["no-health"\n', "malformed TOML", 2,
         "TOML syntax"),
        ("lint.toml", "\n[tool.servelab.lint\n", "malformed TOML", 2, "TOML syntax"),
    ],
)
def test_bad_settings_name_their_line_and_fix(tmp_path: Path, *, name: str, text: str,
                                              words: str, line: int, fix: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load_config(path, set(RULES))
    assert words in e.value.message
    assert (e.value.file, e.value.line) == (str(path), line)
    assert e.value.hint and fix in e.value.hint


@pytest.mark.parametrize(("name", "text"), [
    (".servelab.yaml", "lint:\n  disable:\n    - no-health\n    - DL3008\n"
     "  severity: {base-latest: error}\n  hadolint: false\n"),
    ("lint.toml", '[tool.servelab.lint]\ndisable = [\n  "no-health",\n  "DL3008",\n]\n'
     'severity = { "base-latest" = "error" }\nhadolint = false\n'),
])
def test_good_settings_in_either_form_load(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    cfg = load_config(path, set(RULES))
    assert cfg.disable == {"no-health", "DL3008"} and not cfg.hadolint
    assert cfg.severity == {"base-latest": Severity.ERROR}
