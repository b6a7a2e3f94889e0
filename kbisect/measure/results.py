"""The results store: one directory per run, one JSON file per boot, one summary.

    results/<UTC time>-<kind>-<name>/samples/NNN-<label>.json   (never overwritten)
    results/<UTC time>-<kind>-<name>/summary.json

Both formats are JSON Schema (draft 2020-12) files in measure/schemas/, checked by
jsonschema (`validate`; NaN and Infinity, which Python's json reads but JSON has no words
for, are no numbers there, so a damaged figure is named where a schema types it). Each
file, once written, is indexed in the results database (kbisect/db/, docs/results-db.md).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from kbisect.core import atomic, clock, paths, progress, reading
from kbisect.core.exceptions import InfraError, UserError
from kbisect.core.reading import CorruptFile, got
from kbisect.db import index, runs
from kbisect.measure.record import Sample

SAMPLES, SUMMARY = runs.SAMPLES, runs.SUMMARY  # where db/runs.py looks for them
BOOTS = "boots"  # each boot's console log and guest files (measure/sample.py)
# What to do about a sample or summary that cannot be read back (each file is written
# whole, by rename or link: only damage from outside truncates one).
SAMPLE_RECOVER = reading.SAMPLE_RECOVER
SUMMARY_RECOVER = (
    "remove it and report.md, and run the command with --resume: it is written again "
    "from the run's samples"
)
RESUMABLE = ("compare", "study", "bisect")


class InvalidResult(CorruptFile):
    """A sample or summary cannot be read back, or does not match its schema."""


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """measure/schemas/<name>.json."""
    text = resources.files("kbisect.measure").joinpath("schemas", f"{name}.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


# A number is finite (reading.number), an integer no boolean.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"number": lambda _, v: reading.number(v), "integer": lambda _, v: type(v) is int}
    ),
)


@functools.cache
def _validator(name: str) -> Any:
    return _Validator(schema(name))


def _says(e: jsonschema.ValidationError) -> str:
    """What the value `e` names must be, as one line."""
    v, x = e.validator_value, e.instance
    if e.validator == "type":
        names = [v] if isinstance(v, str) else list(v)
        if isinstance(x, float) and not math.isfinite(x) and {"number", "integer"} & set(names):
            return f"must be a finite number, got {x}"
        return f"must be {' or '.join(names)}, got {got(x)}"
    match e.validator:
        case "const":
            return f"must be {got(v)}, got {got(x)}"
        case "enum":
            return f"must be one of {', '.join(map(got, v))}, got {got(x)}"
        case "minimum":
            return f"must be >= {v}, got {x}"
        case "maximum":
            return f"must be <= {v}, got {x}"
        case "exclusiveMinimum":
            return f"must be > {v}, got {x}"
        case "minLength":
            return f"must have at least {v} characters, got {got(x)}"
        case "pattern":
            return f"must match {v}, got {got(x)}"
        case "minItems":
            return f"must have at least {v} items"
    return str(e.message)[:200]


def validate(obj: Any, schema_name: str, where: str | None = None) -> None:
    """InvalidResult, one line naming the first field that does not match
    measure/schemas/<schema_name>.json."""
    e = next(_validator(schema_name).iter_errors(obj), None)
    if e is None:
        return
    at = e.json_path
    if e.validator in ("required", "additionalProperties") and isinstance(e.instance, dict):
        missing = e.validator == "required"
        names, known = e.validator_value if missing else e.instance, e.schema.get("properties", {})
        key = next(k for k in names if (k not in e.instance if missing else k not in known))
        problem = f"{at}.{key}: {'is missing' if missing else 'is not allowed here'}"
    else:
        problem = f"{at}: {_says(e)}"
    raise InvalidResult(f"{where or schema_name}: not a valid {schema_name}: {problem}")


class BadOutDir(UserError):
    """--out cannot hold a new run."""


class NoResults(UserError):
    """The results directory (or its summary) the user named does not exist, or its
    summary is not a kbisect summary."""


def check_out(given: Path | None, kind: str, need: int, *, fresh: bool = True) -> None:
    """Before any work, and writing nothing: the run's directory (--out, else the results
    dir a new one goes into) is a writable directory with `need` bytes free (core/paths.py, exit
    3); --out holds no run yet (exit 2: it would be overwritten), or without `fresh` (the
    samples of `kbisect run` add up) only such samples."""
    if given is not None:
        paths.not_a_link(given, "--out", "dir")
    paths.check(given or paths.results_dir(), need, "--out" if given else "results dir")
    if given is None or not given.is_dir():
        return
    own = (SAMPLES, BOOTS) if not fresh else (SAMPLES,)  # kbisect run adds to its own
    held = sorted(p.name for p in given.iterdir() if p.name not in own)
    if fresh and (given / SAMPLES).is_dir() and any((given / SAMPLES).iterdir()):
        held.append(SAMPLES)
    if held:
        raise BadOutDir(
            f"--out {given}: already holds a run ({', '.join(held[:3])}); "
            f"use a new directory{' or --resume' if kind in RESUMABLE else ''}"
        )


def out_dir(given: Path | None, kind: str, name: str, *, fresh: bool = True) -> Path:
    """--out if given (created; with `fresh`, it must not hold a run already: check_out),
    else a new run dir."""
    if given is None:
        return new_run_dir(kind, name)
    check_out(given, kind, 0, fresh=fresh)
    (given / SAMPLES).mkdir(parents=True, exist_ok=True)
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
    return max(filter(None, map(runs.sample_number, folder.iterdir())), default=0) + 1


def write_sample(run_dir: Path, record: Sample) -> Path:
    """Validate and store one sample as samples/NNN-<label>.json; never overwrites one."""
    sample = record.data
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
                atomic.fsync_dir(folder)
                break
            except FileExistsError:
                continue
    finally:
        os.unlink(tmp)
    index.sample_written(path, sample)  # the results database (never fails the run)
    return path


def _read(path: Path, schema_name: str) -> dict[str, Any]:
    """A sample or summary, validated; InvalidResult, one line ending with how to
    recover, if it cannot be read or does not match its schema."""
    recover = SAMPLE_RECOVER if schema_name == "sample" else SUMMARY_RECOVER
    obj = reading.json_table(path, recover, InvalidResult)
    if schema_name == "sample" and not reading.finite(obj):
        reading.fail(path, "holds NaN or Infinity, which no boot measures", recover, InvalidResult)
    try:
        validate(obj, schema_name, where=str(path))
    except InvalidResult as exc:
        raise InvalidResult(f"{exc}; {recover}") from None
    return obj


_said: set[Path] = set()  # odd files named once per process, however often read


def sample_paths(run_dir: Path) -> list[Path]:
    """The run's sample files, in the order they were taken: the one place that decides
    which files of samples/ are samples (db/runs.py SAMPLE_NAME); another .json there
    (`001 (copy)-A.json`) is left out, with one warning line."""
    if not run_dir.is_dir():
        raise NoResults(f"no such results directory: {run_dir}")
    folder = run_dir / SAMPLES
    try:
        found = list(folder.iterdir()) if folder.is_dir() else []
    except OSError as exc:
        raise InvalidResult(f"{folder}: cannot be listed: {exc.strerror or exc}") from None
    numbered = {p: runs.sample_number(p) for p in found}  # a sample damaged into a dir too
    for p in sorted(p for p, n in numbered.items() if n is None and p.suffix == ".json"):
        if not p.name.startswith(".") and p.is_file() and p not in _said:
            _said.add(p)
            progress.warn(runs.odd_sample(p))
    return sorted(
        (p for p, n in numbered.items() if n is not None), key=lambda p: (numbered[p], p.name)
    )


def load_sample(path: Path) -> Sample:
    """One sample file, validated and in today's shape (record.Sample.of)."""
    return Sample.of(_read(path, "sample"))


def load_samples(run_dir: Path) -> list[Sample]:
    """Every sample of a run, in the order they were taken, each validated and in
    today's shape (record.Sample.of)."""
    return [load_sample(p) for p in sample_paths(run_dir)]


def without_copies(run_dir: Path) -> tuple[list[Sample], list[str]]:
    """The run's samples (as load_samples), but a file that repeats an earlier sample's
    boot (its boot_dir; a sample without one, its whole content), such as a sample copied
    under another number, is left out, with one line saying which."""
    kept: list[Sample] = []
    seen: dict[str, Path] = {}
    copies: list[str] = []
    for path in sample_paths(run_dir):
        sample = load_sample(path)
        key = sample.boot_dir or json.dumps(sample.data, sort_keys=True)
        if key in seen:
            copies.append(
                f"{path.name} repeats the boot of {seen[key].name}: left out of "
                "the statistics (a copied sample? remove it)"
            )
            continue
        seen[key] = path
        kept.append(sample)
    return kept, copies


def write_summary(run_dir: Path, summary: dict[str, Any]) -> Path:
    validate(summary, "summary")
    path = run_dir / SUMMARY
    atomic.write_json(path, summary)
    index.summary_written(run_dir, summary)  # the results database (never fails the run)
    return path


def load_summary(run_dir: Path) -> dict[str, Any]:
    path = run_dir / SUMMARY
    if not path.exists():
        raise NoResults(f"no summary in {run_dir} (was the run interrupted?)")
    return _read(path, "summary")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A run's summary.json of any kind, as `kbisect report` reads it to tell the kinds
    apart (the module that renders a kind checks it); NoResults, one line, when there is
    none or it names no `kind`; InvalidResult (exit 3) when it cannot be read back."""
    path = run_dir / SUMMARY
    if not path.exists():
        raise NoResults(f"{run_dir}: no summary.json (not a finished compare or bisect run)")
    summary = reading.json_table(path, SUMMARY_RECOVER, InvalidResult)
    if not isinstance(summary.get("kind"), str):
        raise NoResults(f"{path}: no 'kind' field: not a kbisect summary")
    return summary
