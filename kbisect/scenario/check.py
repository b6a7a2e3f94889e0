"""Validating a scenario: every key known, each field typed and checked, PostgreSQL
settings, the rules between fields (scenario/fields.py has the fields themselves), the
defaults that depend on other fields, a custom script's path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kbisect.core import reading
from kbisect.core.reading import got
from kbisect.scenario import profile, storage
from kbisect.scenario.fields import (
    FIELDS,
    HARNESS_OWNED,
    HUGEPAGE_MB,
    REQUIRED,
    SECTIONS,
    TYPES,
    ScenarioError,
    assign,
    lookup,
    typed,
)


def check_setting(name: str, value: Any) -> str | None:
    if not re.fullmatch(r"[a-z_][a-z0-9_.]*", name):
        return "is not a PostgreSQL setting name"
    if name in HARNESS_OWNED:
        return "is set by the harness (use postgres.port)"
    if not isinstance(value, str | int | float | bool):
        return f"must be a string, number or boolean, got {got(value)}"
    if not reading.finite(value):
        return f"must be a finite number, got {got(value)}"
    if isinstance(value, str) and (problem := reading.line(value)):
        return f"{problem}, got {got(value)}"
    return None


def cross_check(data: dict[str, Any]) -> str | None:
    """Rules between fields; the one-line problem, or None."""
    bench, guest, pg = data["pgbench"], data["guest"], data["postgres"]["settings"]
    server = data["postgres"]
    if "build" in server and server["source"] == "host":
        return 'postgres.build runs a build on an image\'s root: it goes with source = "image"'
    if "build" in server and "version" in server:
        return "postgres.build and postgres.version pin two different servers: keep one"
    if "version" in server and server["source"] == "host":
        return 'postgres.version pins an image\'s server: it goes with source = "image"'
    if "version" in server and not server["version"].startswith(f"{server['major']}."):
        return (
            f"postgres.version ({server['version']}) is not a version of "
            f"postgres.major ({server['major']})"
        )
    if ("builtin" in bench) == ("script" in bench):
        return "pgbench needs exactly one of builtin or script"
    if bench["threads"] > bench["clients"]:
        return f"pgbench.threads ({bench['threads']}) exceeds pgbench.clients ({bench['clients']})"
    if bench["clients"] >= pg["max_connections"]:
        return (
            f"pgbench.clients ({bench['clients']}) must be below "
            f"postgres.settings.max_connections ({pg['max_connections']})"
        )
    if pg["huge_pages"] == "on" and not guest["hugepages"] and "hugepages=" not in guest["append"]:
        return (
            "postgres.settings.huge_pages is on but guest.hugepages is 0 "
            "(reserve some, or put hugepages= in guest.append)"
        )
    if guest["hugepages"] * HUGEPAGE_MB >= guest["memory_mb"]:
        return (
            f"guest.hugepages ({guest['hugepages']} x {HUGEPAGE_MB} MB) must fit in "
            f"guest.memory_mb ({guest['memory_mb']})"
        )
    return _check_total(data)


def _check_total(data: dict[str, Any]) -> str | None:
    """A total timeout shorter than the measured runs themselves can only time out."""
    total, bench = data["timeouts"].get("total_s"), data["pgbench"]
    runtime = bench_seconds(bench)
    if total is None or total > runtime:
        return None
    return (
        f"timeouts.total_s ({total}) must exceed the runs' own length, pgbench.warmup_runs "
        f"x pgbench.warmup_s + pgbench.runs x pgbench.duration_s = {runtime} s"
    )


def warmup_seconds(bench: dict[str, Any]) -> int:
    """One warm-up run's length: pgbench.warmup_s, else a measured run's."""
    return int(bench.get("warmup_s") or bench["duration_s"])


def bench_seconds(bench: dict[str, Any]) -> int:
    """The warm-up and measured runs' own length, in seconds."""
    return int(bench["warmup_runs"]) * warmup_seconds(bench) + int(bench["runs"]) * int(
        bench["duration_s"]
    )


def _default_total_s(data: dict[str, Any]) -> int:
    """Boot, plus 10 minutes for the template, plus each run with a minute to spare (and
    a profiled boot's extra run with perf script's time)."""
    bench = data["pgbench"]
    count = bench["warmup_runs"] + bench["runs"]
    runs = bench_seconds(bench) + 60 * count + profile.extra_run_s(data)
    return int(data["timeouts"]["boot_s"] + 600 + runs)


def _children(prefix: str) -> set[str]:
    """Field and section names directly under `prefix` ("" or "pgbench.")."""
    tails = (d[len(prefix) :] for d in (*FIELDS, *SECTIONS) if d.startswith(prefix))
    return {tail.split(".")[0] for tail in tails}


def _check_shape(raw: dict[str, Any], source: str, prefix: str = "") -> None:
    """Every key is a known field or section; sections are tables."""
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if dotted in SECTIONS:
            if not isinstance(value, dict):
                raise ScenarioError(f"{source}: [{dotted}] must be a table, got {got(value)}")
            if dotted != "postgres.settings":
                _check_shape(value, source, f"{dotted}.")
        elif dotted not in FIELDS:
            known = sorted(_children(prefix))
            raise ScenarioError(
                f"{source}: unknown field {dotted} (known here: {', '.join(known) or 'none'})"
            )


def _field(raw: dict[str, Any], dotted: str, source: str, data: dict[str, Any]) -> None:
    kind, default, check = FIELDS[dotted]
    value = lookup(raw, dotted)
    if value is REQUIRED:
        if default is REQUIRED:
            raise ScenarioError(f"{source}: {dotted} is missing")
        if default is None:
            return
        value = default
    if not typed(kind, value):
        raise ScenarioError(f"{source}: {dotted} must be {TYPES[kind][0]}, got {got(value)}")
    problem = check(value) if check else None
    if problem:
        raise ScenarioError(f"{source}: {dotted} {problem}, got {got(value)}")
    assign(data, dotted, value)


def _resolve_script(data: dict[str, Any], base: Path | None, source: str) -> None:
    script = data["pgbench"].get("script")
    if script is None:
        return
    path = Path(script) if base is None else base / script
    if not path.is_file():
        raise ScenarioError(f"{source}: pgbench.script: no such file {path}")
    data["pgbench"]["script"] = str(path.resolve())


def validate(raw: dict[str, Any], source: str, base: Path | None = None) -> dict[str, Any]:
    """The scenario with defaults filled in; ScenarioError naming `source` and the field."""
    _check_shape(raw, source)
    data: dict[str, Any] = {}
    for dotted in FIELDS:
        _field(raw, dotted, source, data)
    settings = raw.get("postgres", {}).get("settings", {})
    for name, value in settings.items():
        problem = check_setting(name, value)
        if problem:
            raise ScenarioError(f"{source}: postgres.settings.{name} {problem}")
        data["postgres"]["settings"][name] = value
    problem = cross_check(data) or storage.complete(data)
    if problem:
        raise ScenarioError(f"{source}: {problem}")
    data["timeouts"].setdefault("total_s", _default_total_s(data))
    _resolve_script(data, base, source)
    return data
