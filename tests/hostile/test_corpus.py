"""The checked-in corpus of hostile inputs (tests/data/hostile), run through every command
that reads that kind of file, each in its own process.

Every case must keep servelab's promise (tests/hostile/harness.py): exit 0, 1 or 2, no
"internal error" or traceback, at most 10 s and 512 MiB, nothing left behind. Cases listed in
EXPECT must also exit with that code and say that text (the message a user needs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import run_servelab

CORPUS = Path(__file__).resolve().parents[1] / "data" / "hostile"
GOOD = CORPUS / "good"

#: kind (corpus folder) -> the commands that read such a file; {f} is the hostile file
COMMANDS: dict[str, list[list[str]]] = {
    "yaml": [["validate", "{f}"], ["k8s-check", "{f}"]],
    "dockerfile": [["lint", "--no-hadolint", "{f}"], ["pin", "--check", "{f}"]],
    "json": [["report", "{f}"], ["k8s-check", "{good}/deploy.yaml", "--result", "{f}"]],
    "toml": [["lint", "--no-hadolint", "--config", "{f}", "{good}/Dockerfile"]],
    "env": [["lint", "--no-hadolint", "--build-args-file", "{f}", "{good}/Dockerfile"],
            ["gpu-probe", "--no-python-probe", "--image-env", "{f}"]],
}
_COMPARE = [["compare", "{f}", "{good}/result.json"]]
_IMAGE_ENV = [["gpu-probe", "--no-python-probe", "--image-env", "{f}"]]
#: extra readers for some files: compare (the summary loader), gpu-probe's --image-env (JSON
#: of docker image inspect), experiments through lint --spec, YAML as lint settings
EXTRA: dict[str, list[list[str]]] = {
    "json/summary-empty-results.json": _COMPARE,
    "json/summary-results-not-objects.json": _COMPARE,
    "json/summary-results-not-a-list.json": _COMPARE,
    "json/summary-invalid-result.json": _COMPARE,
    "json/inspect-env-not-strings.json": _IMAGE_ENV,
    "json/not-json.json": _IMAGE_ENV,
    "json/result-nan.json": _IMAGE_ENV,
    "json/result-int-5000-digits.json": _IMAGE_ENV,
    "json/utf16-bom.json": _IMAGE_ENV,
    "json/top-level-list.json": _IMAGE_ENV,
    "yaml/experiment-body-fifo.yaml": [["lint", "--no-hadolint", "--spec", "{f}"]],
    "yaml/experiment-huge-numbers.yaml": [["lint", "--no-hadolint", "--spec", "{f}"]],
    "yaml/configmap-repeats-superscript.yaml": [["lint", "--no-hadolint", "--spec", "{f}"]],
    "yaml/tag-int-abc.yaml": [["lint", "--no-hadolint", "--config", "{f}", "{good}/Dockerfile"]],
    "yaml/alias-bomb.yaml": [["lint", "--no-hadolint", "--config", "{f}", "{good}/Dockerfile"]],
}

#: (file, or file and command) -> (exit code, text the output must hold)
EXPECT: dict[str | tuple[str, str], tuple[int, str]] = {
    "yaml/tag-int-abc.yaml": (2, "not a valid int"),
    "yaml/tag-bool-maybe.yaml": (2, "not a valid bool"),
    "yaml/tag-float-x.yaml": (2, "not a valid float"),
    "yaml/int-5000-digits.yaml": (2, "5000 digits"),
    "yaml/tag-python-object.yaml": (2, "unknown YAML tag"),
    "yaml/nan.yaml": (2, "NaN"),
    "yaml/inf.yaml": (2, "infinity"),
    "yaml/nested-3000.yaml": (2, "nested more than 100 levels"),
    "yaml/nested-mapping-150.yaml": (2, "nested more than 100 levels"),
    "yaml/alias-bomb.yaml": (2, "billion laughs"),
    "yaml/helm-template.yaml": (2, "helm template"),
    "yaml/utf16-bom.yaml": (2, "UTF-16 (little-endian)"),
    "yaml/utf16-no-bom.yaml": (2, "UTF-16 (big-endian)"),
    "yaml/utf32-bom.yaml": (2, "UTF-32"),
    "yaml/binary-nul.yaml": (2, "binary file"),
    "yaml/latin1.yaml": (2, "not UTF-8"),
    # /dev/zero is outside the experiment's repository: refused before it is opened
    ("yaml/experiment-body-fifo.yaml", "lint"): (2, "request.bodyFile '/dev/zero' leads outside"),
    ("yaml/configmap-repeats-superscript.yaml", "validate"): (2, "repeats"),
    ("dockerfile/heredoc-unterminated.Dockerfile", "lint"): (2, ":202: the Dockerfile parser "
                                                             "rejected it: unterminated heredoc"),
    ("dockerfile/chain-1000-stages.Dockerfile", "lint"): (2, "1000 build stages"),
    "dockerfile/nested-3000-arg.Dockerfile": (2, "nested more than 32 deep"),
    ("dockerfile/nested-continued.Dockerfile", "lint"): (2, "nested more than 32 deep"),
    ("dockerfile/env-one-word.Dockerfile", "lint"): (2, ":3002: the Dockerfile parser"),
    "dockerfile/arg-default-from.Dockerfile": (1, "[base-unpinned]"),
    "dockerfile/utf16-bom.Dockerfile": (2, "UTF-16 (little-endian) text (it starts with a "
                                           "UTF-16 byte-order mark), not UTF-8"),
    "dockerfile/utf16-no-bom.Dockerfile": (2, "UTF-16 (little-endian) text without"),
    "dockerfile/utf32.Dockerfile": (2, "UTF-32"),
    "dockerfile/elf-binary.Dockerfile": (2, "binary file"),
    ("json/summary-empty-results.json", "report"): (2, "should be non-empty"),
    ("json/summary-empty-results.json", "compare"): (2, "should be non-empty"),
    ("json/summary-results-not-objects.json", "report"): (2, "is not of type 'object'"),
    ("json/summary-results-not-a-list.json", "compare"): (2, "is not of type 'array'"),
    ("json/summary-invalid-result.json", "report"): (2, "results[0]: invalid result.json"),
    "json/result-nan.json": (2, "NaN"),
    "json/result-infinity.json": (2, "Infinity"),
    "json/result-1e400.json": (2, "out of the range"),
    "json/result-int-5000-digits.json": (2, "5000 digits"),
    "json/utf16-bom.json": (2, "UTF-16"),
    "toml/tool-5.toml": (2, "tool must be a table"),
    "toml/servelab-5.toml": (2, "tool.servelab must be a table"),
    "toml/int-5000-digits.toml": (2, "malformed TOML"),
    "toml/nested-arrays.toml": (2, "malformed TOML"),
    "env/utf16.env": (2, "UTF-16"),
}


def _cases() -> list[tuple[str, list[str]]]:
    out = []
    for kind, commands in COMMANDS.items():
        for f in sorted((CORPUS / kind).iterdir()):
            rel = f"{kind}/{f.name}"
            out += [(rel, argv) for argv in commands + EXTRA.get(rel, [])]
    return out


CASES = _cases()


def _expected(rel: str, command: str) -> tuple[int, str] | None:
    return EXPECT.get((rel, command)) or EXPECT.get(rel)


@pytest.mark.parametrize(("rel", "argv"), CASES,
                         ids=[f"{r}-{'-'.join(a[:1] + a[-2:-1])}" for r, a in CASES])
def test_hostile_file(rel: str, argv: list[str], tmp_path: Path) -> None:
    args = [a.format(f=CORPUS / rel, good=GOOD) for a in argv]
    outcome = run_servelab(args, cwd=tmp_path, watch=[CORPUS])
    assert outcome.problems() == [], outcome.explain()
    want = _expected(rel, argv[0])
    if want is not None:
        code, text = want
        assert outcome.code == code, outcome.explain()
        assert text in outcome.stdout + outcome.stderr, outcome.explain()


def test_every_corpus_file_is_run() -> None:
    """A file dropped into a folder no command reads would test nothing."""
    files = {f"{p.parent.name}/{p.name}" for p in CORPUS.glob("*/*") if p.parent != GOOD}
    assert files == {rel for rel, _ in CASES}
    stale = {k if isinstance(k, str) else k[0] for k in EXPECT} - files
    assert not stale, f"EXPECT names files that are not in the corpus: {stale}"


@pytest.mark.parametrize("argv", [
    ["validate", "{good}/experiment.yaml"],
    ["lint", "--no-hadolint", "{good}/Dockerfile"],
    ["lint", "--no-hadolint", "--spec", "{good}/experiment.yaml"],
    ["lint", "--no-hadolint", "--config", "{good}/lint.toml", "--build-args-file",
     "{good}/build-args.env", "{good}/Dockerfile"],
    ["k8s-check", "{good}/deploy.yaml", "--result", "{good}/result.json"],
    ["pin", "--check", "{good}/Dockerfile"],
    ["report", "{good}/result.json"],
    ["compare", "{good}/result.json", "{good}/result.json"],
], ids=lambda a: "-".join(a[:2]))
def test_the_good_inputs_pass(argv: list[str], tmp_path: Path) -> None:
    """The corpus's good files are not bad input (exit 0, or 1 for findings): the hostile
    cases fail for their own flaw, not for a broken baseline."""
    outcome = run_servelab([a.format(good=GOOD) for a in argv], cwd=tmp_path, watch=[CORPUS])
    assert outcome.problems() == [] and outcome.code in (0, 1), outcome.explain()
