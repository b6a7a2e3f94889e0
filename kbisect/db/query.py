"""Reading the index: every sample that matches some filters, with its run's kind, as
typed rows (`rows`), for `kbisect db query`, `kbisect export` and any other reader."""

from __future__ import annotations

import json
import re
import sqlite3
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from kbisect.core import progress, reading
from kbisect.core.exceptions import UserError
from kbisect.db import index, schema

T = TypeVar("T")


class BadFilter(UserError):
    """A query filter's value cannot match anything (a malformed hash, date, status)."""


class NoDatabase(UserError):
    """There is no results database yet."""


@dataclass(frozen=True)
class Row:
    """One indexed sample, as `kbisect export` writes it (columns in this order)."""

    path: str
    run_id: str
    run_kind: str | None
    run_name: str | None
    label: str | None
    boot: int | None
    status: str | None
    disturbed: bool
    tps: float | None
    tps_runs: list[float]
    kernel_commit: str | None
    kernel_tag: str | None
    kernel_release: str | None
    tree: str | None
    config_hash: str | None
    patches: list[Any] | None
    append: str | None
    scenario_name: str | None
    scenario_hash: str | None
    target_kind: str | None
    target_name: str | None
    arch: str | None
    machine: str | None
    cpu_model: str | None
    cores: int | None
    memory_mb: int | None
    numa_nodes: int | None
    pg_version: str | None
    started: str | None
    verdict: str | None
    ratio: float | None


COLUMNS = tuple(f.name for f in fields(Row))
_FROM_RUNS = {
    "run_kind": "r.kind",
    "run_name": "r.name",
    "verdict": "r.verdict",
    "ratio": "r.ratio",
}
SELECT = (
    "SELECT "
    + ", ".join(_FROM_RUNS.get(c, f's."{c}"') for c in COLUMNS)
    + " FROM samples s LEFT JOIN runs r ON r.run_id = s.run_id"
)
STATUSES = ("ok", "disturbed", "boot-failed", "benchmark-failed", "failed")
HEX = re.compile(r"^[0-9a-f]{1,64}$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z?)?$")


def _fits(value: Any, hint: Any) -> bool:
    """A cell read back is of its Row field's type (a finite number where a float goes)."""
    kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return any(
        (value is None and k is type(None))
        or (k is float and reading.number(value))
        or (typing.get_origin(k) is list and isinstance(value, list))
        or type(value) is k
        for k in kinds
    )


_HINTS = typing.get_type_hints(Row)


def _row(values: tuple[Any, ...]) -> Row | None:
    """The Row of one result row; None when a cell is not what kbisect writes there (not
    JSON where JSON goes, text where a number goes: damage from outside)."""
    d = dict(zip(COLUMNS, values, strict=True))
    d["disturbed"] = d["disturbed"] in (1, True)
    try:
        d["tps_runs"] = json.loads(d["tps_runs"] or "[]")
        d["patches"] = json.loads(d["patches"]) if d["patches"] else None
    except (TypeError, ValueError, RecursionError):
        return None
    if not all(_fits(d[c], _HINTS[c]) for c in COLUMNS) or not all(
        _fits(x, float) for x in d["tps_runs"]
    ):
        return None
    return Row(**d)


def _status(value: str) -> tuple[str, list[Any]]:
    if value not in STATUSES:
        raise BadFilter(f"--status {value!r}: one of {', '.join(STATUSES)}")
    return ("s.status LIKE '%failed'", []) if value == "failed" else ("s.status = ?", [value])


def _since(value: str) -> tuple[str, list[Any]]:
    if not DATE.match(value):
        raise BadFilter(f"--since {value!r}: a date, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ")
    return "s.started >= ?", [value]


def _prefix(column: str, option: str) -> Filter:
    """A hash, or a prefix of one."""

    def term(value: str) -> tuple[str, list[Any]]:
        if not HEX.match(value):
            raise BadFilter(f"{option} {value!r}: not a hexadecimal hash (or a prefix of one)")
        return f"substr({column}, 1, ?) = ?", [len(value), value]

    return term


Filter = Callable[[str], tuple[str, list[Any]]]
# Each filter: its SQL term and parameters, or BadFilter for a value no sample can have.
FILTERS: dict[str, Filter] = {
    "scenario": lambda v: ("s.scenario_name = ?", [v]),
    "scenario_hash": _prefix("s.scenario_hash", "--scenario-hash"),
    "kind": lambda v: ("r.kind = ?", [v]),
    # the machine's hash (or a prefix), or a target's name
    "machine": lambda v: ("(substr(s.machine, 1, ?) = ? OR s.target_name = ?)", [len(v), v, v]),
    "run": lambda v: ("(s.run_id = ? OR r.path = ?)", [v, v]),
    "commit": _prefix("s.kernel_commit", "--commit"),
    # `v6.12` matches its describe `v6.12` and the ones after it, `v6.12-3-gabc...`
    "tag": lambda v: (
        "(s.kernel_tag = ? OR substr(s.kernel_tag, 1, ?) = ?)",
        [v, len(v) + 1, f"{v}-"],
    ),
    "since": _since,
    "status": _status,
}


def where(**filters: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause of the filters given (FILTERS; all must hold)."""
    terms: list[str] = []
    params: list[Any] = []
    for name, value in filters.items():
        if value is not None:
            term, values = FILTERS[name](value)
            terms.append(term)
            params.extend(values)
    return (" WHERE " + " AND ".join(terms)) if terms else "", params


def connect(db_path: Path | None = None) -> sqlite3.Connection:
    """The database to read; NoDatabase (one line) when there is none."""
    path = db_path or index.db_path()
    index.check_file(path)
    if not path.is_file():
        raise NoDatabase(f"no results database at {path}: run `kbisect db rebuild`")
    return index.open_db(path, timeout=10.0)


def matching(conn: sqlite3.Connection, **filters: Any) -> list[Row]:
    """The samples that match `filters` (see `where`), oldest first."""
    clause, params = where(**filters)
    found = conn.execute(f"{SELECT}{clause} ORDER BY s.started, s.run_id, s.path", params)
    rows = [(v, _row(v)) for v in found.fetchall()]
    if bad := [v[0] for v, row in rows if row is None]:
        progress.warn(
            f"{len(bad)} rows of the results database cannot be read (the first: sample "
            f"{str(bad[0])[:200]!r}): left out; run `kbisect db rebuild` to index them again"
        )
    return [row for _v, row in rows if row is not None]


def _read(db_path: Path | None, read: Callable[[sqlite3.Connection], T]) -> T:
    """read(conn) on the results database; DbError, one line, when it fails."""
    path = db_path or index.db_path()
    conn = connect(path)
    try:
        return read(conn)
    except sqlite3.Error as exc:
        raise schema.DbError(f"{path}: {exc}; {schema.REBUILD}") from None
    finally:
        conn.close()


def rows(db_path: Path | None = None, **filters: Any) -> list[Row]:
    """`matching` in the results database (or the one at db_path)."""
    where(**filters)  # a bad filter is said before the database is opened
    return _read(db_path, lambda conn: matching(conn, **filters))


@dataclass(frozen=True)
class Info:
    path: Path
    runs: int
    samples: int
    by_kind: dict[str, int]


def _count(conn: sqlite3.Connection, path: Path) -> Info:
    n_runs = int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    n_samples = int(conn.execute("SELECT count(*) FROM samples").fetchone()[0])
    kinds = conn.execute("SELECT coalesce(kind, '?'), count(*) FROM runs GROUP BY 1 ORDER BY 1")
    return Info(path, n_runs, n_samples, {str(k): int(n) for k, n in kinds})


def info(db_path: Path | None = None) -> Info:
    """How many runs (by kind) and samples the database indexes."""
    path = db_path or index.db_path()
    return _read(path, lambda conn: _count(conn, path))
