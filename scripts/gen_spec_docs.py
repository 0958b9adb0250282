#!/usr/bin/env python3
"""Generate docs/spec.md from the experiment JSON Schema (run after editing the schema).

``python scripts/gen_spec_docs.py`` rewrites docs/spec.md; ``--check`` exits 1 when it is stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "src" / "servelab" / "schemas" / "experiment.schema.json"
OUT = ROOT / "docs" / "spec.md"

INTRO = """\
# Experiment spec reference

Generated from `schemas/experiment.schema.json` by `scripts/gen_spec_docs.py`; do not edit.

An experiment is one YAML document in one of two forms, validated by one JSON Schema
(draft 2020-12). Editors complete it with
`# yaml-language-server: $schema=<path>/schemas/experiment.schema.json`.

* **Native**: `apiVersion: servelab/v1`, `kind: Experiment`, `metadata`, `spec`.
* **ConfigMap**: `apiVersion: v1`, `kind: ConfigMap`, whose `data` holds `change`, `fixed`,
  `metrics`, `repeats` as strings (Kubernetes requires string values: `repeats: "3"`), and
  optionally `spec.yaml`, a YAML string with the rest of the native `spec`. Keys of your own
  must start with `x-`. `repeats` is a whole number from 1 to 50 in quotes (`"3"`; the
  native form's `repeats` has the same range); another value is reported at its own line.

`servelab validate` reports every unknown key of a mapping, each at its own line with the
keys allowed there (and the closest one: `repeat` → `repeats`), not only the first. A
problem inside `spec.yaml` is reported at the file line where it is written, whatever the
string's style: a literal block (`|`) line by line, a folded block (`>`) or a quoted string
over several lines as YAML folds it, a one-line quoted string (`"a: 1\\nb: 2"`) at its line.

In a multi-document file the experiment is the native document, or the ConfigMap labelled or
annotated `servelab.dev/experiment: "true"`, or else the one ConfigMap with a `change` key;
`--document NAME` picks by `metadata.name`. More than one candidate is an error.

Relative paths are relative to the experiment file's directory.

## Metrics, defined precisely

* **digest**: the per-platform image manifest digest (not the index digest), as the build
  exported it; with the containerd image store it equals the loaded image's ID.
* **size**: the compressed bytes a node pulls for the platform: the layers plus the config
  blob of the per-platform manifest. The uncompressed size (sum of the layers' diff sizes) is
  reported beside it.
* **startup**: seconds from container start to the first HTTP 2xx of the health path; beside
  it, on the same clock: created, first TCP accept on the port, first successful
  representative request.
* **findings**: vulnerability findings by severity (Trivy), fixable and unfixed.
* **latency**: p50 and p95 of the representative request after ready.

"""


def _type(s: dict[str, Any]) -> str:
    if "$ref" in s:
        return f"[{s['$ref'].rsplit('/', 1)[-1]}](#{s['$ref'].rsplit('/', 1)[-1].lower()})"
    if "allOf" in s and len(s["allOf"]) == 1:
        return _type(s["allOf"][0])
    if "enum" in s:
        return " \\| ".join(f"`{v}`" for v in s["enum"])
    if "const" in s:
        return f"`{s['const']}`"
    if "oneOf" in s:
        return " or ".join(_type(x) for x in s["oneOf"])
    t = s.get("type", "any")
    if t == "array":
        return f"list of {_type(s.get('items', {}))}"
    if t == "object" and isinstance(s.get("additionalProperties"), dict):
        return f"map of {_type(s['additionalProperties'])}"
    return f"{t}" if isinstance(t, str) else " or ".join(t)


def _constraints(s: dict[str, Any]) -> str:
    parts = []
    for key, label in (("minimum", "≥"), ("maximum", "≤"), ("exclusiveMinimum", ">")):
        if key in s:
            parts.append(f"{label} {s[key]}")
    if "pattern" in s and "x-hint" not in s and len(s["pattern"]) < 60:
        parts.append(f"pattern `{s['pattern']}`")
    if "x-hint" in s:
        parts.append(s["x-hint"])
    if "default" in s:
        parts.append(f"default `{json.dumps(s['default'])}`")
    return "; ".join(parts)


def _table(name: str, s: dict[str, Any]) -> list[str]:
    out = [f"## {name}", "", s.get("description", ""), ""]
    props = s.get("properties", {})
    if not props:
        return out
    required = set(s.get("required", []))
    out += ["| field | type | required | description |", "|---|---|---|---|"]
    for key, sub in props.items():
        desc = sub.get("description", "")
        extra = _constraints(sub)
        if extra:
            desc = f"{desc} ({extra})" if desc else extra
        desc = desc.replace("|", "\\|")
        out.append(f"| `{key}` | {_type(sub)} | {'yes' if key in required else ''} | {desc} |")
    out.append("")
    return out


def render() -> str:
    schema = json.loads(SCHEMA.read_text())
    lines = [INTRO]
    order = ["experiment", "configMap", "spec", "arm", "model", "serve", "request", "scan",
             "gpu", "build", "gates", "metadata", "metric", "factor"]
    defs = schema["$defs"]
    for name in order + sorted(set(defs) - set(order)):
        sub = defs[name]
        if name == "configMap":
            lines += _table(name, sub)
            lines += _table("configMap data", sub["properties"]["data"])
            continue
        lines += _table(name, sub)
        if "enum" in sub:
            lines += ["Accepted values: " + ", ".join(f"`{v}`" for v in sub["enum"]), ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/spec.md is stale: run python scripts/gen_spec_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
