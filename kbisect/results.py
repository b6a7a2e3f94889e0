"""The results store: one directory per run, one JSON file per boot, one summary.

    results/<UTC time>-<kind>-<name>/samples/NNN-<label>.json   (never overwritten)
    results/<UTC time>-<kind>-<name>/summary.json

Both formats are JSON Schema (draft 2020-12) files in kbisect/schema/, checked here by a
small validator for the subset of keywords they use (jsonschema is only a dev dependency).
"""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from kbisect import atomic, clock, paths
from kbisect.exceptions import InfraError, UserError

SAMPLES = "samples"
SUMMARY = "summary.json"
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


class InvalidResult(InfraError):
    """A sample or summary does not match its schema."""


class BadOutDir(UserError):
    """--out cannot hold a new run."""


class NoResults(UserError):
    """The results directory (or its summary) the user named does not exist."""


@functools.cache
def schema(name: str) -> dict[str, Any]:
    text = resources.files("kbisect").joinpath("schema", f"{name}.json").read_text("utf-8")
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


def out_dir(given: Path | None, kind: str, name: str, *, fresh: bool = True) -> Path:
    """--out if given (created; with `fresh`, it must not hold samples already), else a
    new run dir."""
    if given is None:
        return new_run_dir(kind, name)
    try:
        (given / SAMPLES).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadOutDir(f"--out {given}: cannot create it: {exc.strerror}") from None
    if not os.access(given, os.W_OK):
        raise BadOutDir(f"--out {given}: not writable")
    if fresh and any((given / SAMPLES).glob("[0-9]*-*.json")):
        raise BadOutDir(
            f"--out {given}: already holds samples; use a new directory"
            f"{' or --resume' if kind == 'compare' else ''}"
        )
    return given


def new_run_dir(kind: str, name: str) -> Path:
    """A fresh `<UTC time>-<kind>-<name>/` (with `samples/`) under the results dir."""
    stamp = clock.stamp()
    base = f"{stamp}-{_slug(kind)}-{_slug(name)}"
    for n in range(1, 1000):
        path = paths.results_dir() / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        (path / SAMPLES).mkdir()
        return path
    raise InfraError(f"cannot create a run directory named {base} in {paths.results_dir()}")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def _next_number(folder: Path) -> int:
    numbers = [int(m.group(1)) for p in folder.iterdir() if (m := re.match(r"(\d+)-", p.name))]
    return max(numbers, default=0) + 1


def write_sample(run_dir: Path, sample: dict[str, Any]) -> Path:
    """Validate and store one sample as samples/NNN-<label>.json; never overwrites one."""
    validate(sample, "sample")
    folder = run_dir / SAMPLES
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".sample.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(sample, indent=2, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        label = _slug(sample.get("label") or "sample")
        while True:  # link(2) fails rather than replace: a sample is never overwritten
            path = folder / f"{_next_number(folder):03d}-{label}.json"
            try:
                os.link(tmp, path)
                return path
            except FileExistsError:
                continue
    finally:
        os.unlink(tmp)


def _read(path: Path, schema_name: str) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidResult(f"{path}: cannot read: {exc}") from exc
    validate(obj, schema_name, where=str(path))
    result: dict[str, Any] = obj
    return result


def sample_paths(run_dir: Path) -> list[Path]:
    if not run_dir.is_dir():
        raise NoResults(f"no such results directory: {run_dir}")
    found = (run_dir / SAMPLES).glob("[0-9]*-*.json")
    return sorted(found, key=lambda p: (int(p.name.split("-", 1)[0]), p.name))


def upgrade(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample in today's shape: version 1 recorded only the accelerator of a vng boot."""
    if sample.get("version") != 1:
        return sample
    arch = ((sample.get("kernel") or {}).get("manifest") or {}).get("arch")
    where = {"kind": "vng", "name": "vng", "arch": arch, "accel": sample.get("accel")}
    return {**sample, "target": sample.get("target", where)}


def load_samples(run_dir: Path) -> list[dict[str, Any]]:
    """Every sample of a run, in the order they were taken, each validated and in
    today's shape (`upgrade`)."""
    return [upgrade(_read(p, "sample")) for p in sample_paths(run_dir)]


def write_summary(run_dir: Path, summary: dict[str, Any]) -> Path:
    validate(summary, "summary")
    path = run_dir / SUMMARY
    atomic.write_json(path, summary)
    return path


def load_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / SUMMARY
    if not path.is_file():
        raise NoResults(f"no summary in {run_dir} (was the run interrupted?)")
    return _read(path, "summary")
