"""Property-based tests (Hypothesis) of the readers: whatever the input, each reader returns
its typed result or raises InputError/UsageError (exit 2). Nothing else: no ValueError,
KeyError, RecursionError or AttributeError from a bad value ("internal error", exit 3).

Inputs are built from the pieces that broke servelab before: YAML tags on the wrong values,
huge and non-ASCII numbers, NaN and infinity, deep nesting, aliases, Helm templates, heredocs,
``${A:-...}`` nesting, chained stages, summaries without results. Profiles: conftest.py
(derandomized when ``CI`` is set).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from servelab.build.buildargs import parse_build_args_file
from servelab.errors import InputError, ServelabError, UsageError
from servelab.gpu import parse_env_text
from servelab.image.pin import scan_froms
from servelab.lint import parse
from servelab.run import results
from servelab.run.merge import compare_runs, merge_runs
from servelab.textio import ascii_int, decode, loads_json
from servelab.yamlsafe import load_documents

GOOD = Path(__file__).resolve().parents[1] / "data" / "hostile" / "good"
BAD_INPUT = (InputError, UsageError)

# ------------------------------------------------------------------ pieces of hostile text

UNICODE_DIGITS = ["²", "٣", "١٢", "৩", "߉", "𝟘", "Ⅻ", "½", "３"]
NUMBERS = ["0", "-1", "1e400", "-1e400", ".nan", ".inf", "-.inf", "0x_", "0o99", "1_000",
           "9" * 30, "9" * 400, "9" * 4301, "3.0", "1e5", "0b102", *UNICODE_DIGITS]
TAGS = ["!!int", "!!bool", "!!float", "!!str", "!!null", "!!timestamp", "!!binary", "!!map",
        "!!seq", "!!set", "!!omap", "!!python/object/apply:os.system", "!Ref", "!"]
WORDS = ["a", "x", "maybe", "yes", "~", "null", "''", '""', "'²'", "{{ .Values.x }}",
         "{{- include \"x\" . }}", "[", "]", "{", "}", "&a", "*a", "*nope", "<<", "|", ">",
         "#c", "%TAG", "---", "...", "\t", "é", "\u2028", "\x00", *NUMBERS]


def _yaml_line(indent: int, key: str, tag: str, value: str) -> str:
    return " " * indent + f"{key}: {tag} {value}".rstrip() + "\n"


yaml_lines = st.builds(
    _yaml_line,
    st.integers(0, 6),
    st.sampled_from(["a", "b", "replicas", "- a", "? a", "<<", "'k'", "2", "spec"]),
    st.sampled_from(["", "", "", *TAGS]),
    st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join),
)
yaml_text = st.one_of(
    st.text(max_size=300),
    st.lists(yaml_lines, max_size=25).map("".join),
    st.integers(1, 400).map(lambda n: "a: " + "[" * n + "]" * n + "\n"),
    st.integers(1, 400).map(lambda n: "".join(" " * i + f"k{i}:\n" for i in range(n))),
)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@given(yaml_text)
def test_yaml_reader_returns_documents_or_bad_input(text: str) -> None:
    try:
        docs = load_documents(text, "f.yaml")
    except BAD_INPUT as e:
        assert e.exit_code == 2 and e.file == "f.yaml"
        return
    for doc in docs:
        assert doc.data is not None
        assert _finite(doc.data), "NaN or infinity got through"


# ------------------------------------------------------------------ Dockerfiles

NAMES = ["BASE", "A", "TAG", "TARGETARCH_X", "V"]
IMAGES = ["alpine", "python:3.11", "python:3.11@sha256:" + "a" * 64, "127.0.0.1:5000/x:1",
          "scratch", "s0", "²", "٣.١٨"]


@st.composite
def from_word(draw: st.DrawFn, depth: int = 0) -> str:
    """A FROM/ARG word: images, $NAME, ${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:+word}."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["image", "plain", "braced", "default"] if depth < 3
                                    else ["image", "plain", "braced"]))
        name = draw(st.sampled_from(NAMES))
        if kind == "image":
            parts.append(draw(st.sampled_from(IMAGES)))
        elif kind == "plain":
            parts.append(f"${name}")
        elif kind == "braced":
            parts.append(f"${{{name}}}")
        else:
            op = draw(st.sampled_from([":-", "-", ":+", "+"]))
            parts.append(f"${{{name}{op}{draw(from_word(depth + 1))}}}")
    return "".join(parts)


@st.composite
def global_args(draw: st.DrawFn) -> list[str]:
    out = []
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=4)):
        value = draw(st.none() | from_word())
        out.append(f"ARG {name}" if value is None else f"ARG {name}={value}")
    return out


@given(global_args(), from_word())
def test_pin_and_lint_resolve_the_same_from(args: list[str], word: str) -> None:
    """`pin --check` and lint judge one FROM line alike: the same image after substitution,
    or both unresolved (FROM ${BASE:-python:3.11} is python:3.11 for both)."""
    text = "\n".join([*args, f"FROM {word}", "USER 10001", ""])
    try:
        df = parse.build(Path("Dockerfile"), "Dockerfile", text)
    except BAD_INPUT:
        return
    [fl] = scan_froms(text)
    pin_sees = fl.resolved if fl.status == "arg" else fl.image
    assert pin_sees == df.stages[0].base


INSTRUCTIONS = [
    "FROM {w}", "FROM {w} AS {n}", "FROM --platform=$BUILDPLATFORM {w} AS {n}", "ARG {n}={w}",
    "ARG {n}", "ENV {n}={w}", "ENV {n}", "USER {d}", "USER {d}:{d}", "COPY --from={d} /a /b",
    "COPY --from={n} /a /b", "RUN echo {w}", "RUN <<EOF\necho {w}\nEOF", "RUN <<EOF\necho {w}",
    "RUN <<-'X'\n\techo\n\tX", "COPY <<EOF /x\n{w}\nEOF", "RUN echo a \\\n  && echo {w}",
    "RUN echo a \\\n# comment\n  && b", "HEALTHCHECK CMD {w}", "EXPOSE {d}", "BOGUS {w}",
    "CMD [\"{w}\"]", "ENTRYPOINT {w}", "# escape=`", "# syntax=docker/dockerfile:1", "",
    "# servelab: ignore=base-unpinned", "ONBUILD RUN {w}", "SHELL [\"/bin/sh\", \"-c\"]",
    "WORKDIR {w}", "VOLUME {w}", "ADD http://x/{w} /y", "STOPSIGNAL {d}", "LABEL a={w}",
]


@st.composite
def dockerfiles(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 14))):
        tpl = draw(st.sampled_from(INSTRUCTIONS))
        lines.append(tpl.format(w=draw(from_word()), n=draw(st.sampled_from(["b", "s0", "x"])),
                                d=draw(st.sampled_from(["0", "1000", "root", "²", "٣", "-1"]))))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@given(st.one_of(dockerfiles(), st.text(max_size=200),
                 st.integers(1, 60).map(lambda n: "ARG X=" + "${A:-" * n + "x" + "}" * n
                                        + "\nFROM $X\n")))
def test_dockerfile_reader_returns_stages_or_bad_input(text: str) -> None:
    try:
        df = parse.build(Path("Dockerfile"), "Dockerfile", text)
    except BAD_INPUT as e:
        assert e.exit_code == 2 and e.file == "Dockerfile"
    else:
        assert df.stages
    try:
        scan_froms(text)
    except BAD_INPUT as e:
        assert e.exit_code == 2


# ------------------------------------------------------------------ Kubernetes manifests

HOSTILE_SCALARS = st.one_of(
    st.integers(-(2**70), 2**70), st.sampled_from([10**400, -(10**300), 0, 1, 2**31, 2**63]),
    st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(),
    st.sampled_from([*UNICODE_DIGITS, "25%", "²%", "100%", "", "1Gi", "1e3", "0x10", "a" * 300,
                     "/health", "http", "8000", "nvidia.com/gpu", "sha256:",
                     "x@sha256:" + "0" * 64]),
    st.text(max_size=20),
)
hostile_values = st.recursive(
    HOSTILE_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["name", "port", "path", "image", "value", "key", "operator", "values"]),
        inner, max_size=3),
    max_leaves=8,
)
#: places in a GPU Deployment where a hostile value goes
PATHS = [
    ("spec", "replicas"), ("spec", "strategy"), ("spec", "strategy", "rollingUpdate"),
    ("spec", "template", "spec", "containers", 0, "resources"),
    ("spec", "template", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    ("spec", "template", "spec", "containers", 0, "startupProbe", "failureThreshold"),
    ("spec", "template", "spec", "containers", 0, "startupProbe", "periodSeconds"),
    ("spec", "template", "spec", "containers", 0, "readinessProbe"),
    ("spec", "template", "spec", "containers", 0, "ports"),
    ("spec", "template", "spec", "containers", 0, "image"),
    ("spec", "template", "spec", "containers", 0, "securityContext"),
    ("spec", "template", "spec", "containers", 0, "volumeMounts"),
    ("spec", "template", "spec", "containers", 0, "env"),
    ("spec", "template", "spec", "containers", 0, "command"),
    ("spec", "template", "spec", "containers", 0, "args"),
    ("spec", "template", "spec", "containers"), ("spec", "template", "spec", "volumes"),
    ("spec", "template", "spec", "tolerations"), ("spec", "template", "spec", "affinity"),
    ("spec", "template", "spec", "nodeSelector"), ("spec", "template", "spec", "initContainers"),
    ("spec", "template", "spec", "securityContext"), ("spec", "template", "metadata"),
    ("spec", "template", "spec", "priorityClassName"), ("metadata",), ("kind",), ("spec",),
]


def _put(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    """Set *path* in *doc* to *value* where the path still leads through mappings and lists
    (an earlier change may have replaced a part of it)."""
    for part in path[:-1]:
        if isinstance(doc, dict):
            doc = doc.setdefault(part, {})
        elif isinstance(doc, list) and isinstance(part, int) and part < len(doc):
            doc = doc[part]
        else:
            return
    if isinstance(doc, dict):
        doc[path[-1]] = value


def _manifest(changes: list[tuple[tuple[Any, ...], Any]]) -> str:
    import yaml

    doc = yaml.safe_load((GOOD / "deploy.yaml").read_text())
    for path, value in changes:
        _put(doc, path, value)
    extra = [
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
         "spec": {"selector": {"matchLabels": {"app": "llm"}}, "maxUnavailable": 0}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
         "spec": {"selector": {"app": "llm"}, "ports": [{"port": 80, "targetPort": "http"}]}},
    ]
    return yaml.safe_dump_all([doc, *extra], allow_unicode=True)


@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), hostile_values), max_size=4))
def test_manifest_checks_report_findings_or_bad_input(
        changes: list[tuple[tuple[Any, ...], Any]], tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from servelab.k8s import check_manifests

    f = tmp_path_factory.mktemp("k8s") / "deploy.yaml"
    f.write_text(_manifest(changes))
    try:
        report = check_manifests([f], result_paths=[GOOD / "result.json"])
    except ServelabError as e:
        assert e.exit_code == 2, e
        return
    assert report.files == [str(f)]


# ------------------------------------------------------------------ summaries and results

GOOD_RESULT = json.loads((GOOD / "result.json").read_text())


def _leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaf_paths(v, (*prefix, k))] or [prefix]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, (*prefix, i))] or [prefix]
    return [prefix]


LEAVES = _leaf_paths(GOOD_RESULT)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**45), 10**45) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6,
)


def _mutated(changes: list[tuple[int, Any]]) -> dict[str, Any]:
    r = json.loads(json.dumps(GOOD_RESULT))
    for index, value in changes:
        path = LEAVES[index % len(LEAVES)]
        target = r
        for part in path[:-1]:
            target = target[part]
        if path:
            target[path[-1]] = value
    return r


summaries = st.one_of(
    st.lists(st.lists(st.tuples(st.integers(0, 10**6), json_values), max_size=3).map(_mutated),
             max_size=3).map(lambda rs: {"schemaVersion": 1, "results": rs}),
    st.lists(json_values, max_size=3).map(lambda rs: {"results": rs}),
    st.lists(st.tuples(st.integers(0, 10**6), json_values), max_size=2).map(_mutated),
    json_values,
)


@given(data=summaries)
def test_summary_reader_returns_valid_results_or_bad_input(
        data: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    f = tmp_path_factory.mktemp("summary") / "summary.json"
    try:
        f.write_text(json.dumps(data, allow_nan=True))
    except ValueError:
        assume(False)
    try:
        rows = results.load_results(f)
    except BAD_INPUT as e:
        assert e.exit_code == 2
        return
    assert rows and all(results.validate_result(r) == [] for r in rows)
    cmp = compare_runs(f, f)  # a run never drifts from itself; without a treatment's
    assert cmp.exit_code in (0, 2)  # digest it is not comparable, never "same"
    assert cmp.data["comparable"] is (cmp.exit_code == 0)
    merge_runs([f])


# ------------------------------------------------------------------ small readers


@given(text=st.text(max_size=300))
def test_key_value_readers(text: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    f = tmp_path_factory.mktemp("env") / "args.env"
    f.write_text(text, encoding="utf-8", errors="surrogatepass")
    for read in (lambda: parse_build_args_file(f), lambda: parse_env_text(text, source="e")):
        try:
            values = read()
        except BAD_INPUT as e:
            assert e.exit_code == 2
        else:
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in values.items())


@given(st.binary(max_size=200))
def test_decode_gives_text_or_names_the_problem(raw: bytes) -> None:
    try:
        text = decode(raw, "f")
    except InputError as e:
        assert e.file == "f" and e.exit_code == 2
    else:
        assert text.encode("utf-8") == raw.removeprefix(b"\xef\xbb\xbf")
        assert "\x00" not in text


@given(st.text(max_size=40))
def test_json_reader(text: str) -> None:
    try:
        loads_json(text, "f.json")
    except InputError as e:
        assert e.exit_code == 2


@given(st.text(max_size=25))
def test_ascii_int_takes_ascii_digits_only(text: str) -> None:
    value = ascii_int(text)
    s = text.strip()
    if s and s.isascii() and s.isdigit() and len(s) <= 18:
        assert value == int(s)
    else:
        assert value is None
