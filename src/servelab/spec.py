"""The experiment spec: find it in a file, validate it, normalise both forms into one model.

Two forms are accepted (see docs/spec.md):

* native: ``apiVersion: servelab/v1``, ``kind: Experiment``, ``spec: {...}``;
* a Kubernetes ConfigMap whose ``data`` holds ``change``, ``fixed``, ``metrics``, ``repeats`` as
  strings and optionally ``spec.yaml`` (a YAML string with the rest of the native spec).

A file may hold several documents (the ConfigMap next to its workload): the experiment is the
native document, or the ConfigMap labelled/annotated ``servelab.dev/experiment: "true"``, or
else the one ConfigMap whose data has a ``change`` key; ``--document NAME`` picks by name.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from servelab import yamlsafe
from servelab.build.buildargs import parse_build_args_file
from servelab.errors import InputError, UsageError
from servelab.findings import Finding, FindingsReport, Rule, Severity
from servelab.textio import BLOB_BYTES, AllowedPath, PathPolicy, ascii_int, read_bytes

MARKER = "servelab.dev/experiment"

#: canonical metric -> accepted spellings (the canonical name included)
METRICS: dict[str, tuple[str, ...]] = {
    "digest": ("digest", "image digest", "image-digest", "manifest digest"),
    "size": ("size", "image size"),
    "startup": ("startup", "startup time", "start-up", "ready"),
    "findings": (
        "findings", "vulnerability findings", "vulnerabilities", "vulns", "cves",
    ),
    "latency": ("latency", "request latency"),
}
FACTORS: dict[str, tuple[str, ...]] = {
    "image": ("image", "base", "base image"),
    "model": ("model",),
    "input": ("input", "request"),
    "builder": ("builder",),
    "engine": ("engine",),
    "platform": ("platform",),
    "gpu": ("gpu",),
    "scanner": ("scanner", "trivy db"),
}
DEFAULT_METRICS = ("digest", "size", "startup", "findings")
DEFAULT_FIXED = ("image", "model", "input")


def _canonical(table: dict[str, tuple[str, ...]], name: str) -> str | None:
    n = " ".join(name.strip().lower().split())
    for canon, spellings in table.items():
        if n in spellings:
            return canon
    return None


def canonical_metric(name: str) -> str | None:
    return _canonical(METRICS, name)


def canonical_factor(name: str) -> str | None:
    return _canonical(FACTORS, name)


# ---------------------------------------------------------------------------- the model


@dataclass
class Arm:
    name: str
    context: Path
    dockerfile: Path
    build_args: dict[str, str] = field(default_factory=dict)
    target: str | None = None
    git_ref: str | None = None
    image: str | None = None
    allow_unpinned_base: bool = False


@dataclass
class Model:
    path: Path | None = None
    volume: str | None = None
    mount_path: str = "/models"
    sha256: str | None = None


@dataclass
class Serve:
    port: int = 8000
    health_path: str = "/health"
    readiness_timeout_s: float = 120.0
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    writable_paths: list[str] = field(default_factory=list)
    shm_size: str = "64m"
    network: str = "none"
    user: str | None = None


@dataclass
class Request:
    path: str
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    count: int = 5
    expect_status: int = 200
    expect_json: Any = None
    expect_regex: str | None = None


@dataclass
class ScanPolicy:
    fail_on: list[str] = field(default_factory=lambda: ["CRITICAL", "HIGH"])
    ignore_unfixed: bool = False
    ignore_file: Path | None = None
    vex: Path | None = None
    timeout_s: int = 1800
    max_db_age_hours: float = 168.0
    db_repositories: list[str] = field(default_factory=list)
    cache_dir: Path | None = None
    offline: bool = False


@dataclass
class GpuNeeds:
    required: bool = False
    count: int | str = "all"
    mode: str = "auto"


@dataclass
class BuildSettings:
    source_date_epoch: int | str = "commit"
    network: str = "default"
    platform: str | None = None
    timeout_s: int = 3600


@dataclass
class Gates:
    reproducible: bool = True
    max_size_bytes: int | None = None
    max_startup_s: float | None = None
    max_findings: dict[str, int] = field(default_factory=dict)
    min_effect: dict[str, float] = field(default_factory=dict)


@dataclass
class ColdStart:
    """``spec.coldStart``: the lazy arm of the node's start-up cost (``--lazy`` and
    ``--require-lazy`` add to it; ``--lazy-min-layer-size`` wins)."""

    lazy: tuple[str, ...] = ()
    lazy_required: bool = False
    lazy_min_layer_size: int | None = None


@dataclass
class Experiment:
    name: str
    change: str
    fixed: list[str]
    metrics: list[str]
    repeats: int
    treatment: Arm
    control: Arm | None
    model: Model | None
    serve: Serve
    request: Request | None
    scan: ScanPolicy
    gpu: GpuNeeds
    build: BuildSettings
    gates: Gates
    file: Path
    form: str  # "native" or "configmap"
    #: the normalised native spec (what was validated), for result.json
    spec_data: dict[str, Any]
    cold_start: ColdStart = field(default_factory=ColdStart)

    @property
    def base_dir(self) -> Path:
        return self.file.parent

    def arms(self) -> list[Arm]:
        return [a for a in (self.control, self.treatment) if a is not None]

    def spec_hash(self) -> str:
        blob = json.dumps(self.spec_data, sort_keys=True, ensure_ascii=False).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()


# ---------------------------------------------------------------------------- selection


def _is_native(d: Any) -> bool:
    return isinstance(d, dict) and d.get("kind") == "Experiment" and str(
        d.get("apiVersion", "")
    ).startswith("servelab/")


def _is_marked(d: Any) -> bool:
    if not isinstance(d, dict) or d.get("kind") != "ConfigMap":
        return False
    meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
    for key in ("labels", "annotations"):
        m = meta.get(key) if isinstance(meta, dict) else None
        if isinstance(m, dict) and str(m.get(MARKER, "")).lower() == "true":
            return True
    return False


def _is_marked_or_native(d: Any) -> bool:
    return _is_native(d) or _is_marked(d)


def _looks_like_experiment_cm(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and d.get("kind") == "ConfigMap"
        and isinstance(d.get("data"), dict)
        and "change" in d["data"]
    )


def _doc_name(d: Any) -> str | None:
    meta = d.get("metadata") if isinstance(d, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return str(name) if name is not None else None


def _describe(doc: yamlsafe.Document) -> str:
    d = doc.data
    kind = d.get("kind", "?") if isinstance(d, dict) else type(d).__name__
    return f"{kind}/{_doc_name(d) or '?'} (line {doc.line})"


def select_document(
    docs: list[yamlsafe.Document], file: str, name: str | None = None
) -> yamlsafe.Document:
    """The experiment document among *docs*; InputError when there is none or it is ambiguous."""
    if name is not None:
        named = [d for d in docs if _doc_name(d.data) == name]
        if len(named) == 1:
            return named[0]
        found = ", ".join(_describe(d) for d in docs)
        raise InputError(
            f"{'no' if not named else 'several'} document(s) named {name!r} (found: {found})",
            file=file,
            hint="pass the metadata.name of the experiment document with --document",
        )
    if len(docs) == 1:
        return docs[0]
    for pick in (_is_marked_or_native, _looks_like_experiment_cm):
        cands = [d for d in docs if pick(d.data)]
        if len(cands) == 1:
            return cands[0]
        if len(cands) > 1:
            raise InputError(
                "several documents could be the experiment: "
                + ", ".join(_describe(d) for d in cands),
                file=file,
                line=cands[1].line,
                hint=f'choose one with --document NAME, or label it {MARKER}: "true"',
            )
    raise InputError(
        f"no experiment among the {len(docs)} documents: "
        + ", ".join(_describe(d) for d in docs),
        file=file,
        hint=f"add a kind: Experiment document, or a ConfigMap labelled {MARKER}: \"true\"",
    )


# ---------------------------------------------------------------------------- validation


def _fmt_path(path: tuple[Any, ...]) -> str:
    out = "$"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


_Explained = tuple[str, str | None, tuple[Any, ...], bool]


def _explain_each(err: Any) -> list[_Explained]:
    """What :func:`_explain` says, once for each unknown key of an additionalProperties
    error (jsonschema gives one error for all of a mapping's unknown keys: each is reported
    at its own line)."""
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted(err.schema.get("properties", {}))
        patterns = list(err.schema.get("patternProperties", {}))
        extra = [k for k in err.instance
                 if k not in allowed and not any(re.search(p, k) for p in patterns)]
        return [(f"unknown key {key!r}{_suggest(key, allowed)}",
                 "allowed keys here: " + ", ".join(allowed),
                 (*err.absolute_path, key), True) for key in extra or [""]]
    return [_explain(err)]


def _explain(err: Any) -> _Explained:
    """(message, fix, path to point at, point at key) for one jsonschema error."""
    path = tuple(err.absolute_path)
    v = err.validator
    if v == "additionalProperties" and isinstance(err.instance, dict):
        return _explain_each(err)[0]
    if v == "type":
        fix = None
        if len(path) >= 1 and "data" in path[:1] and err.validator_value == "string":
            fix = (
                "Kubernetes requires every ConfigMap data value to be a string: quote it "
                f'({path[-1]}: "{err.instance}")'
            )
        got = type(err.instance).__name__.replace("dict", "mapping").replace("list", "list")
        got = {"int": "integer", "str": "string", "NoneType": "null", "bool": "boolean"}.get(
            got, got
        )
        return f"expected {err.validator_value}, got {got} {err.instance!r}", fix, path, False
    if v in ("pattern", "not", "minLength") and "x-hint" in err.schema:  # not: a char class
        msg = f"{err.instance!r} is not valid: expected {err.schema['x-hint']}"
        if path and path[-1] in ("metrics", "fixed"):
            table = METRICS if path[-1] == "metrics" else FACTORS
            bad = [x.strip() for x in str(err.instance).split(",")
                   if _canonical(table, x) is None]
            if bad:
                msg = f"unknown {path[-1][:-1] if path[-1] == 'metrics' else 'factor'} " + (
                    ", ".join(repr(b) for b in bad)
                )
                msg += _suggest(bad[0].lower(), [s for v in table.values() for s in v])
        return msg, f"use {err.schema['x-hint']}", path, False
    if v == "enum":
        opts = [str(o) for o in err.validator_value]
        return (
            f"{err.instance!r} is not one of: {', '.join(opts)}{_suggest(str(err.instance), opts)}",
            None,
            path,
            False,
        )
    if v == "const":
        return f"{err.instance!r} must be {err.validator_value!r}", None, path, False
    if v == "format" and err.validator_value == "regex":
        return (f"{err.instance!r} is not a regular expression Python can compile",
                "fix the expression (escape ( ) [ ] with a backslash to match them as text)",
                path, False)
    if v == "required":
        return err.message.replace("is a required property", "is required here"), None, path, True
    if v == "not" and isinstance(err.instance, dict):
        return "set only one of these: " + ", ".join(
            err.validator_value.get("required", [])
        ), None, path, True
    return err.message, None, path, False



# ---------------------------------------------------------------- the schemas shipped

@cache
def load_schema(name: str) -> dict[str, Any]:
    """``load_schema("experiment")`` -> the parsed ``schemas/experiment.schema.json`` (the
    experiment's schema, and those of the result and summary documents servelab writes and
    reads back), loaded with :mod:`importlib.resources`."""
    from importlib import resources

    text = resources.files("servelab").joinpath("schemas", f"{name}.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def validator(name: str, pointer: str | None = None) -> Any:
    """A Draft 2020-12 validator for schema *name*, or for its sub-schema at ``#/$defs/X``."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schema = load_schema(name)
    if pointer is None:
        return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    resource: Resource[Any] = Resource.from_contents(schema)
    registry: Registry[Any] = Registry().with_resource(schema["$id"], resource)
    return Draft202012Validator({"$ref": f"{schema['$id']}#{pointer}"}, registry=registry,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


# ------------------------------------------------------------- a quick yes for valid data
# jsonschema walks a document at about 3 µs a node: a 32 MiB history file or 2,000 results
# took 10-60 s to check. servelab's own documents are checked here first by a small reading
# of the keywords their schemas use, in one linear pass; only a document it does not accept
# (or a schema using a keyword it does not know) goes to jsonschema, for the full message.
# It never accepts what jsonschema refuses: every keyword it does not know sends the
# document to jsonschema (tests/core/test_spec_quick.py checks the two agree).

_NOTES = frozenset({"$id", "$schema", "title", "description", "default", "x-hint", "$defs",
                    "$comment", "examples"})


class _Unknown(Exception):
    """The schema uses a keyword the quick check does not read."""


def _is_type(v: Any, t: str) -> bool:
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    if isinstance(v, bool):
        return False
    if t == "integer":
        return isinstance(v, int) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float))
    raise _Unknown(t)


def _same(a: Any, b: Any) -> bool:
    """JSON equality as jsonschema's: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(b, (dict, list)):
        raise _Unknown("a const or enum of objects or arrays")
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and bool(a == b)


#: a string schema (``type: string`` with lengths, a pattern): one predicate, made once, for the
#: values that come by the million (the recorded inputs of a history line)
_LEAVES: dict[int, tuple[Any, Callable[[Any], bool]]] = {}
_LEAF_KEYS = frozenset({"type", "maxLength", "minLength", "pattern"}) | _NOTES


def _leaf(schema: Any) -> Callable[[Any], bool] | None:
    if not isinstance(schema, dict) or schema.get("type") != "string" \
            or not set(schema) <= _LEAF_KEYS:
        return None
    held = _LEAVES.get(id(schema))
    if held is not None and held[0] is schema:
        return held[1]
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    pattern = re.compile(schema["pattern"]) if "pattern" in schema else None

    def known(v: Any) -> bool:
        return (type(v) is str and len(v) >= low and (high is None or len(v) <= high)
                and (pattern is None or pattern.search(v) is not None))

    _LEAVES[id(schema)] = (schema, known)
    return known


def _all(schema: Any, values: Any, root: dict[str, Any]) -> bool:
    """Every value of *values* valid against *schema*: a string schema by its predicate."""
    leaf = _leaf(schema)
    if leaf is not None:
        return all(map(leaf, values))
    return all(_quick(schema, x, root) for x in values)


def _quick(schema: Any, v: Any, root: dict[str, Any]) -> bool:  # noqa: PLR0912
    if schema is True:
        return True
    if schema is False or not isinstance(schema, dict):
        return False if schema is False else _unknown_schema(schema)
    for key, want in schema.items():
        if key in _NOTES:
            continue
        if key == "$ref":
            if not (isinstance(want, str) and want.startswith("#/$defs/")):
                raise _Unknown(key)
            if not _quick(root["$defs"][want[len("#/$defs/"):]], v, root):
                return False
        elif key == "type":
            if not any(_is_type(v, t) for t in (want if isinstance(want, list) else [want])):
                return False
        elif key == "const":
            if not _same(v, want):
                return False
        elif key == "enum":
            if not any(_same(v, w) for w in want):
                return False
        elif key in ("minLength", "maxLength", "pattern"):
            if isinstance(v, str) and not _string_ok(key, want, v):
                return False
        elif key in ("minimum", "maximum", "exclusiveMinimum"):
            if isinstance(v, (int, float)) and not isinstance(v, bool) \
                    and not _number_ok(key, want, v):
                return False
        elif key in ("minItems", "maxItems", "items"):
            if isinstance(v, list) and not _array_ok(key, want, v, root):
                return False
        elif key in ("required", "properties", "additionalProperties", "propertyNames",
                     "minProperties"):
            if isinstance(v, dict) and not _object_ok(key, want, v, schema, root):
                return False
        else:
            raise _Unknown(key)
    return True


def _unknown_schema(schema: Any) -> bool:
    raise _Unknown(repr(schema)[:40])


def _string_ok(key: str, want: Any, v: str) -> bool:
    if key == "minLength":
        return bool(len(v) >= want)
    if key == "maxLength":
        return bool(len(v) <= want)
    return re.search(want, v) is not None


def _number_ok(key: str, want: Any, v: float) -> bool:
    if key == "minimum":
        return bool(v >= want)
    if key == "maximum":
        return bool(v <= want)
    return bool(v > want)


def _array_ok(key: str, want: Any, v: list[Any], root: dict[str, Any]) -> bool:
    if key == "minItems":
        return bool(len(v) >= want)
    if key == "maxItems":
        return bool(len(v) <= want)
    return _all(want, v, root)


def _object_ok(key: str, want: Any, v: dict[str, Any], schema: dict[str, Any],
               root: dict[str, Any]) -> bool:
    if key == "required":
        return all(k in v for k in want)
    if key == "minProperties":
        return bool(len(v) >= want)
    if key == "propertyNames":
        return all(_quick(want, k, root) for k in v)
    if key == "properties":
        return all(_quick(s, v[k], root) for k, s in want.items() if k in v)
    if "patternProperties" in schema:
        raise _Unknown("patternProperties")
    known = schema.get("properties", {})
    return _all(want, (x for k, x in v.items() if k not in known), root)


def quick_valid(name: str, data: Any) -> bool:
    """Whether *data* is valid against schema *name*, told in one linear pass: True only when
    it surely is (then jsonschema would say the same); False when it is not, or when the
    quick reading cannot tell (ask :func:`validator` for the errors then)."""
    schema = load_schema_cached(name)
    try:
        return _quick(schema, data, schema)
    except (_Unknown, RecursionError, TypeError, re.error):
        return False


@cache
def load_schema_cached(name: str) -> dict[str, Any]:
    """:func:`load_schema`, read once per process (the quick check runs per line)."""
    return load_schema(name)


def schema_errors(name: str, data: Any) -> list[Any]:
    """The jsonschema errors of *data* against schema *name*, sorted by path; none at once
    (without jsonschema's walk) when :func:`quick_valid` says it is valid."""
    if quick_valid(name, data):
        return []
    return sorted(validator(name).iter_errors(data), key=lambda e: list(map(str, e.path)))


def check_options(section: str, data: dict[str, Any], options: dict[str, str]) -> None:
    """Command-line values that mirror the spec's *section* (``serve``, ``request``,
    ``model``), checked by the spec's own schema: the first problem is a UsageError (exit 2)
    naming the option (*options* maps a field to its option), before anything starts."""
    errors = sorted(validator("experiment", f"/$defs/{section}").iter_errors(data),
                    key=lambda e: list(map(str, e.absolute_path)))
    for err in errors:
        msg, fix, path, _at_key = _explain(err)
        names = [str(p) for p in path if not isinstance(p, int)]
        option = next((options[n] for n in reversed(names) if n in options),
                      options.get("", section))
        raise UsageError(f"{option}: {msg}", hint=fix or f"give {option} a value the "
                         f"experiment's {section} section would take (docs/spec.md)")


def _schema_findings(
    data: Any,
    doc: yamlsafe.Document,
    file: str,
    *,
    pointer: str | None = None,
    prefix: tuple[Any, ...] = (),
    line_offset: int | None = None,
) -> list[Finding]:
    out: list[Finding] = []
    errors = sorted(validator("experiment", pointer).iter_errors(data), key=lambda e: list(
        map(str, e.absolute_path)
    ))
    for msg, fix, path, at_key in (each for err in errors for each in _explain_each(err)):
        full = (*prefix, *path)
        if line_offset is None:
            pos = doc.key_position(full) if at_key else doc.position(full)
            line, col = pos.line, pos.column
        else:
            line, col = line_offset, None
        out.append(
            Finding(
                rule_id="schema",
                severity=Severity.ERROR,
                message=msg,
                file=file,
                line=line,
                column=col,
                fix=fix,
                context={"path": _fmt_path(full)},
            )
        )
    return out


@dataclass
class Checked:
    """A validated (or not) experiment document."""

    file: str
    document: yamlsafe.Document
    findings: list[Finding]
    #: the native spec mapping, merged from a ConfigMap when needed (None when invalid)
    spec: dict[str, Any] | None
    name: str
    form: str


def _configmap_spec(doc: yamlsafe.Document, file: str) -> tuple[dict[str, Any], list[Finding]]:
    """The native spec a ConfigMap stands for, and the findings of its embedded spec.yaml."""
    data: dict[str, Any] = doc.data["data"]
    spec: dict[str, Any] = {}
    findings: list[Finding] = []
    inner = data.get("spec.yaml")
    if inner is not None:
        pos = doc.position(("data", "spec.yaml"))
        try:
            inner_docs = yamlsafe.embedded_documents(doc, ("data", "spec.yaml"),
                                                     f"{file} (data.spec.yaml)")
        except InputError as e:
            line = doc.string_line(("data", "spec.yaml"), e.line) if e.line else None
            return spec, [Finding("schema", Severity.ERROR, f"data.spec.yaml: {e.message}",
                                  file=file, line=line or pos.line, fix=e.hint)]
        if len(inner_docs) != 1 or not isinstance(inner_docs[0].data, dict):
            return spec, [Finding("schema", Severity.ERROR,
                                  "data.spec.yaml must hold one YAML mapping (the native spec)",
                                  file=file, line=pos.line)]
        spec = dict(inner_docs[0].data)
    for key in ("change", "fixed", "metrics", "repeats"):
        if key in data and key in spec:
            findings.append(Finding("schema", Severity.ERROR,
                                    f"{key!r} is set both in data and in data.spec.yaml",
                                    file=file, line=doc.key_position(("data", key)).line,
                                    fix="keep one of them"))
    if "change" in data:
        spec["change"] = data["change"]
    if "repeats" in data:
        spec["repeats"] = ascii_int(str(data["repeats"]))
    for key, table in (("fixed", FACTORS), ("metrics", METRICS)):
        if key in data:
            spec[key] = list(dict.fromkeys(
                _canonical(table, x) or x.strip() for x in str(data[key]).split(",")
            ))
    return spec, findings


def _inner_line_offset(doc: yamlsafe.Document) -> int:
    return doc.position(("data", "spec.yaml")).line


def check_document(doc: yamlsafe.Document, file: str) -> Checked:
    """Validate one document against the schema, and a ConfigMap's embedded spec too."""
    name = _doc_name(doc.data) or Path(file).stem
    if not isinstance(doc.data, dict):
        f = Finding("schema", Severity.ERROR,
                    f"the experiment must be a YAML mapping, not a {type(doc.data).__name__}",
                    file=file, line=doc.line, fix="start with apiVersion: servelab/v1")
        return Checked(file, doc, [f], None, name, "unknown")
    findings = _schema_findings(doc.data, doc, file)
    form = "configmap" if doc.data.get("kind") == "ConfigMap" else "native"
    if findings:
        return Checked(file, doc, findings, None, name, form)
    if form == "native":
        return Checked(file, doc, [], _normalise_native(doc.data["spec"]), name, form)
    spec, extra = _configmap_spec(doc, file)
    if not extra:
        extra = _schema_findings(spec, doc, file, pointer="/$defs/spec",
                                 line_offset=_inner_line_offset(doc))
        extra = [_inner_position(f, doc, spec) for f in extra]
    return Checked(file, doc, extra, None if extra else spec, name, form)


def _inner_position(f: Finding, doc: yamlsafe.Document, spec: dict[str, Any]) -> Finding:
    """Point a finding of the embedded spec.yaml at its line in the outer file when we can."""
    inner = doc.data["data"].get("spec.yaml")
    if not isinstance(inner, str):
        return f
    try:
        inner_doc = yamlsafe.embedded_documents(doc, ("data", "spec.yaml"), "spec.yaml")[0]
    except (InputError, IndexError):
        return f
    path = f.context.get("path", "$")
    parts: list[Any] = []
    for token in path.lstrip("$").replace("[", ".").replace("]", "").split("."):
        if token:
            index = ascii_int(token)
            parts.append(token if index is None else index)
    pos = inner_doc.position(tuple(parts))
    # where that line of the string is written: a block scalar ("spec.yaml: |") line by line
    # from the line after its indicator, a quoted or folded one as YAML folds it
    f.line = doc.string_line(("data", "spec.yaml"), pos.line) or \
        doc.position(("data", "spec.yaml")).line
    f.column = None
    f.context["path"] = "$.data['spec.yaml']" + path.lstrip("$")
    return f


def _normalise_native(spec: dict[str, Any]) -> dict[str, Any]:
    out = dict(spec)
    for key, table in (("fixed", FACTORS), ("metrics", METRICS)):
        if key in out:
            out[key] = list(dict.fromkeys(_canonical(table, x) or x for x in out[key]))
    return out


def check_file(path: Path, document: str | None = None) -> Checked:
    """Read, select and validate the experiment in *path*. InputError for unreadable input."""
    docs = yamlsafe.load_file(path, what="YAML experiment file")
    doc = select_document(docs, str(path), document)
    return check_document(doc, str(path))


# ---------------------------------------------------------------------------- named paths

#: the build-only fields of an arm: with ``image`` (a prebuilt image) they contradict it
_BUILD_FIELDS = ("dockerfile", "context", "gitRef", "target", "buildArgsFile")


class NamedPath(NamedTuple):
    """One path an experiment names: where in the spec, its kind (``--allow-path KIND=``),
    the text, what it is relative to, what it must be, and whether the file wrote it (a
    default is not checked for existence)."""

    at: tuple[str, ...]
    kind: str
    value: str
    base: Path
    need: str  # "file", "dir", "file or dir", or "" (may not exist yet)
    named: bool


LineOf = Callable[[tuple[str, ...]], int]


def _arm_paths(name: str, d: dict[str, Any], base: Path, *, policy: PathPolicy,
               file: str, line: LineOf) -> list[NamedPath]:
    if d.get("image"):
        return []
    need = "" if d.get("gitRef") else None  # built from the ref's tree, not this checkout
    ctx_value = str(d.get("context", "."))
    out = [NamedPath((name, "context"), "context", ctx_value, base,
                     "dir" if need is None else "", "context" in d)]
    try:
        ctx = policy.confine(ctx_value, base, kind="context", field=f"{name}.context",
                             file=file, line=line((name, "context")))
    except InputError:
        ctx = base / ctx_value  # reported for the context; the Dockerfile is judged there
    out.append(NamedPath((name, "dockerfile"), "dockerfile", str(d.get("dockerfile",
                         "Dockerfile")), ctx, "file" if need is None else "", "dockerfile" in d))
    if "buildArgsFile" in d:
        out.append(NamedPath((name, "buildArgsFile"), "buildArgsFile", d["buildArgsFile"], base,
                             "file", True))
    return out


def named_paths(s: dict[str, Any], base: Path, *, policy: PathPolicy, file: str,
                line: LineOf) -> list[NamedPath]:
    """Every path the spec *s* names (arms, model, request body, scan files)."""
    out: list[NamedPath] = []
    for arm in ("control", "treatment"):
        if arm in s or arm == "treatment":
            out += _arm_paths(arm, s.get(arm, {}), base, policy=policy, file=file, line=line)
    singles = ((("model", "path"), "model", "file or dir"),
               (("request", "bodyFile"), "bodyFile", "file"),
               (("scan", "ignoreFile"), "ignoreFile", "file"),
               (("scan", "vex"), "vex", "file"),
               (("scan", "cacheDir"), "cacheDir", ""))
    for at, kind, need in singles:
        value = (s.get(at[0]) or {}).get(at[1])
        if isinstance(value, str) and value:
            out.append(NamedPath(at, kind, value, base, need, True))
    return out


def _is_kind(mode: int, need: str) -> bool:
    return ((stat.S_ISREG(mode) and "file" in need) or (stat.S_ISDIR(mode) and "dir" in need))


def _check_kind(p: NamedPath, resolved: Path) -> str | None:
    """Why *resolved* is not what *p* needs (missing, a FIFO, a device, ...), or None."""
    if not p.need or not p.named:
        return None
    try:
        mode = resolved.stat().st_mode
    except OSError:
        return f"{'.'.join(p.at)} {p.value!r} does not exist"
    if _is_kind(mode, p.need):
        return None
    what = next((w for t, w in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"),
                                (stat.S_ISCHR, "a character device"),
                                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                                (stat.S_ISREG, "a file")) if t(mode)), "not a regular file")
    return f"{'.'.join(p.at)} {p.value!r} is {what}, not {_NEEDS[p.need]}"


_NEEDS = {"file": "a regular file", "dir": "a directory",
          "file or dir": "a regular file or a directory"}


def _link_out(p: NamedPath, path: Path, policy: PathPolicy) -> str | None:
    """A folder that servelab reads file by file (the model, hashed before it is mounted)
    must not hold a symbolic link out of the repository either (a link within it, as in a
    Hugging Face cache's snapshots/, is fine)."""
    if p.kind != "model" or not path.is_dir():
        return None
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            full = Path(dirpath, name)
            if full.is_symlink() and not policy.permits(Path(os.path.realpath(full)), p.kind):
                rel = full.relative_to(path).as_posix()
                return (f"{'.'.join(p.at)} {p.value!r} holds {rel}, a symbolic link that leads "
                        f"outside the repository {policy.root}")
    return None


class PathCheck(NamedTuple):
    resolved: dict[tuple[str, ...], Path]
    findings: list[Finding]


def _line_finder(checked: Checked) -> LineOf:
    doc = checked.document
    if checked.form == "native":
        return lambda at: doc.position(("spec", *at)).line
    inner = doc.data.get("data", {}).get("spec.yaml") if isinstance(doc.data, dict) else None
    outer = doc.position(("data", "spec.yaml")).line
    if not isinstance(inner, str):
        return lambda at: outer
    try:
        inner_doc = yamlsafe.embedded_documents(doc, ("data", "spec.yaml"), "spec.yaml")[0]
    except (InputError, IndexError):
        return lambda at: outer
    # where that line of the string is written, whatever its style (Document.string_line)
    return lambda at: doc.string_line(("data", "spec.yaml"),
                                      inner_doc.position(at).line) or outer


def check_paths(checked: Checked, allowed: tuple[AllowedPath, ...] = ()) -> PathCheck:
    """Every named path, resolved (realpath) and confined to the experiment's repository
    (:class:`servelab.textio.PathPolicy`), with what it must be (a regular file, a
    directory): one finding per problem, never the content of a file."""
    resolved: dict[tuple[str, ...], Path] = {}
    findings: list[Finding] = []  # paths out of the repository first: the gravest
    others: list[Finding] = []
    if checked.spec is None:
        return PathCheck(resolved, findings)
    file = Path(checked.file)
    base = Path(os.path.realpath(file)).parent
    policy = PathPolicy.for_file(file, allowed)
    line = _line_finder(checked)
    for p in named_paths(checked.spec, base, policy=policy, file=checked.file, line=line):
        try:
            path = policy.confine(p.value, p.base, kind=p.kind, field=".".join(p.at),
                                  file=checked.file, line=line(p.at))
        except InputError as e:
            findings.append(Finding("path", Severity.ERROR, e.message.split(": ", 1)[-1],
                                    file=checked.file, line=e.line, fix=e.hint))
            continue
        why = _check_kind(p, path)
        fix = _PATH_FIX.get(p.need)
        if why is None:
            why = _link_out(p, path, policy)
            fix = (f"remove the link, or allow where it leads with --allow-path {p.kind}=DIR on "
                   "the command line")
        if why is not None:
            others.append(Finding("path", Severity.ERROR, why, file=checked.file,
                                  line=line(p.at), fix=fix))
            continue
        resolved[p.at] = path
    return PathCheck(resolved, findings + others + _source_findings(checked, line))


_PATH_FIX = {
    "file": "name an existing regular file (relative to the experiment file; a Dockerfile "
    "relative to the context)",
    "dir": "name an existing directory, relative to the experiment file",
    "file or dir": "name an existing file or directory, relative to the experiment file",
}


def _source_findings(checked: Checked, line: LineOf) -> list[Finding]:
    """An arm names exactly one source: a prebuilt ``image``, or a build (context,
    dockerfile, at an optional gitRef), never both."""
    out: list[Finding] = []
    s = checked.spec or {}
    for arm in ("control", "treatment"):
        d = s.get(arm)
        if not isinstance(d, dict) or not d.get("image"):
            continue
        extra = [k for k in _BUILD_FIELDS if k in d]
        if extra:
            out.append(Finding(
                "schema", Severity.ERROR,
                f"{arm} names two sources: a prebuilt image and a build "
                f"({', '.join(extra)}); an arm is one or the other",
                file=checked.file, line=line((arm, extra[0])),
                fix=f"keep image (and drop {', '.join(extra)}) to test a prebuilt image, or "
                "drop image to build the Dockerfile",
            ))
    return out


# ---------------------------------------------------------------------------- normalising


def _arm(name: str, d: dict[str, Any], paths: dict[tuple[str, ...], Path], base: Path,
         file: Path) -> Arm:
    context = paths.get((name, "context"), base)
    args: dict[str, str] = {}
    if "buildArgsFile" in d:
        args.update(parse_build_args_file(paths[(name, "buildArgsFile")]))
    args.update(d.get("buildArgs", {}))
    return Arm(
        name=name,
        context=context,
        dockerfile=paths.get((name, "dockerfile"), context / "Dockerfile"),
        build_args=args,
        target=d.get("target"),
        git_ref=d.get("gitRef"),
        image=d.get("image"),
        allow_unpinned_base=bool(d.get("allowUnpinnedBase", False)),
    )


def _request(d: dict[str, Any], paths: dict[tuple[str, ...], Path]) -> Request:
    expect = d.get("expect", {})
    headers = dict(d.get("headers", {}))
    body: bytes | None = None
    if "bodyFile" in d:
        body = read_bytes(paths[("request", "bodyFile")], max_bytes=BLOB_BYTES,
                          what="request body file", display=str(d["bodyFile"]))
    elif "body" in d:
        raw = d["body"]
        if isinstance(raw, str):
            body = raw.encode()
        else:
            body = json.dumps(raw).encode()
            headers.setdefault("Content-Type", "application/json")
    return Request(
        path=d["path"], method=d.get("method", "POST"), headers=headers, body=body,
        count=int(d.get("count", 5)), expect_status=int(expect.get("status", 200)),
        expect_json=expect.get("json"), expect_regex=expect.get("regex"),
    )


def _model(m: dict[str, Any] | None, paths: dict[tuple[str, ...], Path]) -> Model | None:
    if m is None:
        return None
    sha = m["sha256"].removeprefix("sha256:") if "sha256" in m else None
    return Model(path=paths.get(("model", "path")), volume=m.get("volume"),
                 mount_path=m.get("mountPath", "/models"), sha256=sha)


def _serve(sv: dict[str, Any]) -> Serve:
    return Serve(
        port=sv.get("port", 8000), health_path=sv.get("healthPath", "/health"),
        readiness_timeout_s=float(sv.get("readinessTimeoutSeconds", 120)),
        env=dict(sv.get("env", {})), args=list(sv.get("args", [])),
        writable_paths=list(sv.get("writablePaths", [])), shm_size=sv.get("shmSize", "64m"),
        network=sv.get("network", "none"), user=sv.get("user"),
    )


def _scan(sc: dict[str, Any], paths: dict[tuple[str, ...], Path]) -> ScanPolicy:
    return ScanPolicy(
        fail_on=list(sc.get("failOn", ["CRITICAL", "HIGH"])),
        ignore_unfixed=bool(sc.get("ignoreUnfixed", False)),
        ignore_file=paths.get(("scan", "ignoreFile")), vex=paths.get(("scan", "vex")),
        timeout_s=int(sc.get("timeoutSeconds", 1800)),
        max_db_age_hours=float(sc.get("maxDbAgeHours", 168)),
        db_repositories=list(sc.get("dbRepositories", [])),
        cache_dir=paths.get(("scan", "cacheDir")), offline=bool(sc.get("offline", False)),
    )


def _gates(gt: dict[str, Any]) -> Gates:
    return Gates(reproducible=bool(gt.get("reproducible", True)),
                 max_size_bytes=gt.get("maxSizeBytes"),
                 max_startup_s=gt.get("maxStartupSeconds"),
                 max_findings=dict(gt.get("maxFindings", {})),
                 min_effect={k: float(v) for k, v in gt.get("minEffect", {}).items()})


def gates_of(spec_data: dict[str, Any]) -> Gates:
    """The gates of a normalised spec (as result.json records it under experiment.spec)."""
    gt = spec_data.get("gates")
    return _gates(gt if isinstance(gt, dict) else {})


def _cold_start(cs: dict[str, Any]) -> ColdStart:
    size = cs.get("lazyMinLayerSize")
    return ColdStart(lazy=tuple(cs.get("lazy", ())),
                     lazy_required=bool(cs.get("lazyRequired", False)),
                     lazy_min_layer_size=int(size) if size is not None else None)


def _first_error(findings: list[Finding]) -> InputError:
    first = findings[0]
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return InputError(f"invalid experiment: {first.message}{more}", file=first.file,
                      line=first.line,
                      hint=first.fix or "run 'servelab validate' for every problem")


def build_experiment(checked: Checked, allowed: tuple[AllowedPath, ...] = ()) -> Experiment:
    """The typed model of a valid document: every path it names resolved (realpath) and
    confined to its repository, or to what *allowed* (``--allow-path``) opens."""
    if checked.spec is None:
        raise InputError("the experiment is not valid", file=checked.file,
                         hint="run servelab validate on it")
    s = checked.spec
    file = Path(os.path.realpath(checked.file))
    base = file.parent
    named = check_paths(checked, allowed)
    if named.findings:
        raise _first_error(named.findings)
    paths = named.resolved
    g = s.get("gpu", {})
    b = s.get("build", {})
    return Experiment(
        name=checked.name,
        change=s["change"],
        fixed=list(s.get("fixed", DEFAULT_FIXED)),
        metrics=list(s.get("metrics", DEFAULT_METRICS)),
        repeats=int(s.get("repeats", 3)),
        treatment=_arm("treatment", s.get("treatment", {}), paths, base, file),
        control=_arm("control", s["control"], paths, base, file) if "control" in s else None,
        model=_model(s.get("model"), paths),
        serve=_serve(s.get("serve", {})),
        request=_request(s["request"], paths) if "request" in s else None,
        scan=_scan(s.get("scan", {}), paths),
        gpu=GpuNeeds(required=bool(g.get("required", False)), count=g.get("count", "all"),
                     mode=g.get("mode", "auto")),
        build=BuildSettings(source_date_epoch=b.get("sourceDateEpoch", "commit"),
                            network=b.get("network", "default"), platform=b.get("platform"),
                            timeout_s=int(b.get("timeoutSeconds", 3600))),
        gates=_gates(s.get("gates", {})),
        file=file,
        form=checked.form,
        spec_data=s,
        cold_start=_cold_start(s.get("coldStart", {})),
    )


def load_experiment(path: Path, document: str | None = None,
                    allowed: tuple[AllowedPath, ...] = ()) -> Experiment:
    """Read, validate and normalise; InputError (exit 2) listing the first problem if invalid.
    *allowed*: the ``--allow-path KIND=DIR`` options (only the command line sets them)."""
    checked = check_file(path, document)
    if checked.findings:
        raise _first_error(checked.findings)
    return build_experiment(checked, allowed)


# --- servelab validate: every problem of every file as a finding ---

RULES = {
    "schema": Rule(
        "schema", Severity.ERROR, "the experiment does not match the schema",
        rationale="servelab refuses to run an experiment it cannot interpret exactly.",
        fix="change the value as the message says; see docs/spec.md",
    ),
    "path": Rule(
        "path", Severity.ERROR, "a path the experiment names is outside its repository, "
        "missing, or not the kind of file its field needs",
        rationale="an experiment often comes with a pull request: the paths it names must not "
        "reach files outside the repository (a symbolic link counts where it leads), and a "
        "named pipe or a device must never be opened as a Dockerfile or a request body.",
        fix="name a regular file or directory inside the repository, or allow a directory "
        "with --allow-path KIND=DIR on the command line",
    ),
    "input": Rule(
        "input", Severity.ERROR, "the file cannot be read as an experiment",
        rationale="malformed YAML, duplicate keys, non-UTF-8 bytes, oversized files, alias "
        "bombs and ambiguous multi-document files are refused rather than guessed at.",
        fix="fix the file as the message says",
    ),
}


def validate_files(paths: Sequence[Path], document: str | None = None,
                   allowed: tuple[AllowedPath, ...] = ()) -> FindingsReport:
    """Validate each file, and what the paths it names are (confined, existing, the right
    kind); unreadable files become findings too, so all problems are listed."""
    findings: list[Finding] = []
    for path in paths:
        try:
            checked = check_file(path, document)
            findings.extend(checked.findings)
            findings.extend(check_paths(checked, allowed).findings)
        except InputError as e:
            findings.append(
                Finding("input", Severity.ERROR, e.message.split(": ", 1)[-1]
                        if e.file and e.message.startswith(e.file) else e.message,
                        file=str(path), line=e.line, column=e.column, fix=e.hint)
            )
    return FindingsReport("servelab validate", findings, dict(RULES), [str(p) for p in paths])


# ---------------------------------------------------------------- servelab's own documents
#
# result.json and summary.json, read back (report, compare, push, action-outputs, the GitHub
# writers, scan --baseline): through the safe reader (a regular file, at most
# SERVELAB_MAX_JSON_BYTES, so a pipe or /dev/zero is refused at once) and their schemas.

_DOC_HINT = "give a result.json or summary.json written by servelab"


def _read_document(path: Path) -> Any:
    from servelab.textio import read_json

    return read_json(path, what="result or summary file", hint=_DOC_HINT)


def _schema_message(err: Any) -> str:
    """A jsonschema error's message without a long repr of the value it is about."""
    text: str = err.message
    shown = repr(err.instance)
    if len(shown) > 60 and text.startswith(shown):
        text = "the value" + text[len(shown):]
    return text[:300]


def summary_results(path: Path, data: dict[str, Any]) -> list[Any]:
    """The results of a summary.json checked against schemas/summary.schema.json: a
    non-empty list of objects (a summary without results proves nothing about digests)."""
    problems = schema_errors("summary", data)
    if problems:
        where = "/".join(map(str, problems[0].absolute_path)) or "$"
        raise InputError(f"invalid summary.json: {where}: {_schema_message(problems[0])}",
                         file=str(path),
                         hint="give a summary.json written by servelab run or servelab "
                         "report --out, with at least one result")
    results: list[Any] = data["results"]
    return results


#: the largest magnitude a number in servelab's own documents may have: a petabyte, or 30
#: million years in seconds. Beyond it (``1e308``) sums and medians overflow to infinity
#: and the JSON written would not be JSON: such a file is refused, named, exit 2.
MAX_DOCUMENT_NUMBER = 1e15


def _has_big(data: Any, limit: float) -> bool:
    """Whether *data* holds a number beyond +-*limit*: one pass, no path built."""
    stack = [data]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is dict:
            stack.extend(x for x in v.values() if type(x) is not str)
        elif kind is list:
            stack.extend(x for x in v if type(x) is not str)
        elif (kind is float or kind is int) and not abs(v) <= limit:
            return True
    return False


def out_of_range(data: Any, limit: float = MAX_DOCUMENT_NUMBER) -> str | None:
    """The JSON path of the first number in *data* beyond +-*limit* (or not finite), else None;
    one pass over the document."""
    if not _has_big(data, limit):
        return None
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{where}/{k}", x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{where}/{i}", x) for i, x in enumerate(v))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) \
                and not abs(v) <= limit:
            return f"{where or '$'} = {str(v)[:40]}"
    return None


def checked_result(path: Path, data: Any, where: str = "") -> dict[str, Any]:
    """*data* (read from *path*) when it is a result.json object its schema accepts and every
    number in it is within :data:`MAX_DOCUMENT_NUMBER`."""
    at = f"{where}: " if where else ""
    if not isinstance(data, dict):
        raise InputError(f"{at}not a servelab result (a JSON object)", file=str(path))
    big = out_of_range(data)
    if big is not None:
        raise InputError(f"{at}a number out of range: {big.lstrip('/')} (at most "
                         f"{MAX_DOCUMENT_NUMBER:g} in magnitude)", file=str(path),
                         hint="was the file edited? servelab writes no such number")
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
                for e in schema_errors("result", data)]
    if problems:
        raise InputError(f"{at}invalid result.json: {problems[0][:400]}", file=str(path),
                         hint="was it written by another servelab version?")
    return data


def read_summary(path: Path, *, missing: str | None = None) -> dict[str, Any]:
    """A summary.json servelab wrote, checked against its schema and each result against
    result.schema.json; InputError (exit 2) naming the file otherwise (*missing*: the message
    when there is no such file)."""
    import os

    if missing is not None and not os.path.lexists(path):
        raise InputError(missing, file=str(path),
                         hint="pass the --out directory of a servelab run that finished")
    data = _read_document(path)
    if not isinstance(data, dict):
        raise InputError("not a servelab summary (a JSON object)", file=str(path),
                         hint=_DOC_HINT)
    for i, r in enumerate(summary_results(path, data)):
        checked_result(path, r, f"results[{i}]")
    return data


def read_result(path: Path) -> dict[str, Any]:
    """One result.json servelab wrote, checked against schemas/result.schema.json."""
    return checked_result(path, _read_document(path))
