"""The JSON Schemas shipped in the package, loaded with importlib.resources."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def load_schema(name: str) -> dict[str, Any]:
    """``load_schema("experiment")`` -> the parsed ``schemas/experiment.schema.json``."""
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
    return Draft202012Validator({"$ref": f"{schema['$id']}#{pointer}"}, registry=registry)
