"""A small JSON Schema (draft 2020-12) validator for the subset of keywords kbisect's
own schemas use (measure/schemas/*.json; jsonschema is only a dev dependency).

One difference: NaN and Infinity, which Python's json reads but JSON has no words for,
are not numbers here (`"type": "number"` or `"integer"` refuses them), so a damaged
figure is named where a schema types it.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from kbisect.core.reading import CorruptFile

_ANNOTATIONS = {"$schema", "$id", "$defs", "$comment", "title", "description", "default"}
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class InvalidResult(CorruptFile):
    """A sample or summary cannot be read back, or does not match its schema."""


@functools.cache
def schema(name: str) -> dict[str, Any]:
    text = resources.files("kbisect.measure").joinpath("schemas", f"{name}.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _got(value: Any) -> str:
    return json.dumps(value, default=str)[:80]


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref is supported, got {ref}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return dict(node)


def _check_type(value: Any, types: str | list[str]) -> str | None:
    names = [types] if isinstance(types, str) else types
    if any(_TYPES[t](value) for t in names):
        return None
    return f"must be {' or '.join(names)}, got {_got(value)}"


def _check_scalar(value: Any, sch: dict[str, Any]) -> str | None:
    """Keywords about one value: type, const, enum, bounds, length, pattern."""
    if "type" in sch and (problem := _check_type(value, sch["type"])):
        return problem
    if "type" in sch and isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if "const" in sch and value != sch["const"]:
        return f"must be {_got(sch['const'])}, got {_got(value)}"
    if "enum" in sch and value not in sch["enum"]:
        return f"must be one of {', '.join(map(_got, sch['enum']))}, got {_got(value)}"
    number = _TYPES["number"](value)
    if number and "minimum" in sch and value < sch["minimum"]:
        return f"must be >= {sch['minimum']}, got {value}"
    if number and "maximum" in sch and value > sch["maximum"]:
        return f"must be <= {sch['maximum']}, got {value}"
    if number and "exclusiveMinimum" in sch and value <= sch["exclusiveMinimum"]:
        return f"must be > {sch['exclusiveMinimum']}, got {value}"
    if isinstance(value, str) and len(value) < sch.get("minLength", 0):
        return f"must have at least {sch['minLength']} characters, got {_got(value)}"
    if isinstance(value, str) and "pattern" in sch and not re.search(sch["pattern"], value):
        return f"must match {sch['pattern']}, got {_got(value)}"
    if isinstance(value, list) and len(value) < sch.get("minItems", 0):
        return f"must have at least {sch['minItems']} items"
    return None


def _check_children(value: Any, sch: dict[str, Any], root: dict[str, Any], at: str) -> str | None:
    """Keywords that descend: required, properties, additionalProperties, items."""
    if isinstance(value, dict):
        for key in sch.get("required", []):
            if key not in value:
                return f"{at}.{key}: is missing"
        props = sch.get("properties", {})
        extra = sch.get("additionalProperties", True)
        for key, item in value.items():
            sub = props.get(key, extra)
            if sub is False:
                return f"{at}.{key}: is not allowed here"
            if isinstance(sub, dict) and (problem := _check(item, sub, root, f"{at}.{key}")):
                return problem
    if isinstance(value, list) and isinstance(sch.get("items"), dict):
        for i, item in enumerate(value):
            if problem := _check(item, sch["items"], root, f"{at}[{i}]"):
                return problem
    return None


def _check(value: Any, sch: dict[str, Any], root: dict[str, Any], at: str) -> str | None:
    """The first problem of `value` against `sch`, as `path: problem`, else None."""
    known = {
        "type",
        "const",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "minLength",
        "pattern",
        "minItems",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "$ref",
        "if",
        "then",
        "else",
        "allOf",
    }
    if unknown := set(sch) - known - _ANNOTATIONS:
        raise ValueError(f"results validator does not support {sorted(unknown)}")
    if "$ref" in sch and (problem := _check(value, _resolve(root, sch["$ref"]), root, at)):
        return problem
    if problem := _check_scalar(value, sch):
        return f"{at}: {problem}"
    if problem := _check_children(value, sch, root, at):
        return problem
    for sub in sch.get("allOf", []):
        if problem := _check(value, sub, root, at):
            return problem
    if "if" in sch:
        branch = sch.get("then" if _check(value, sch["if"], root, at) is None else "else")
        if branch and (problem := _check(value, branch, root, at)):
            return problem
    return None


def validate(obj: Any, schema_name: str, where: str | None = None) -> None:
    """InvalidResult naming the first field that does not match `schema/<name>.json`."""
    sch = schema(schema_name)
    problem = _check(obj, sch, sch, "$")
    if problem:
        raise InvalidResult(f"{where or schema_name}: not a valid {schema_name}: {problem}")
