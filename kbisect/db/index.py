"""Write-through: each sample and summary is indexed right after its JSON file is written,
in one transaction, keyed by the file's path (so indexing a file again changes nothing).

The JSON files are the record and the database only their index: whatever goes wrong with
it (locked, corrupt, a read-only results dir) costs one warning line, never the run;
`kbisect db rebuild` mends it from the files.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.core import paths, progress
from kbisect.db import runs, schema

LOCK_WAIT_S = 2.0  # a write-through waits this long for another writer, then gives up
_warned: set[Path] = set()

_QUOTED = ", ".join(f'"{c}"' for c in schema.SAMPLE_COLUMNS)  # "append" is a keyword
SAMPLE_UPSERT = (
    f"INSERT OR REPLACE INTO samples ({_QUOTED}) "
    f"VALUES ({', '.join('?' * len(schema.SAMPLE_COLUMNS))})"
)
_RUN_INSERT = (
    f"INSERT INTO runs ({', '.join(schema.RUN_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(schema.RUN_COLUMNS))}) ON CONFLICT(run_id) DO UPDATE SET "
)
# A sample fills what its run lacks; the earliest sample's time is when the run started.
RUN_FROM_SAMPLE = _RUN_INSERT + (
    "started = CASE WHEN runs.started IS NULL OR excluded.started < runs.started "
    "THEN excluded.started ELSE runs.started END, "
    "scenario_name = coalesce(runs.scenario_name, excluded.scenario_name), "
    "scenario_hash = coalesce(runs.scenario_hash, excluded.scenario_hash), "
    "command = coalesce(runs.command, excluded.command)"
)
# A summary says what the run was, and its verdict.
RUN_FROM_SUMMARY = _RUN_INSERT + (
    "path = excluded.path, kind = excluded.kind, name = excluded.name, "
    "scenario_name = excluded.scenario_name, scenario_hash = excluded.scenario_hash, "
    "started = coalesce(runs.started, excluded.started), command = excluded.command, "
    "verdict = excluded.verdict, ratio = excluded.ratio"
)


def db_path() -> Path:
    """<results dir>/kbisect.sqlite."""
    return paths.results_dir() / schema.FILE


def check_file(path: Path) -> None:
    """DbError, one line, when something other than a file stands where the database
    goes (a directory): neither opened nor replaced, it is the user's to move."""
    if path.exists() and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise schema.DbError(
            f"{path}: {kind} where the results database goes; move it aside, then "
            "run `kbisect db rebuild`"
        )


def open_db(path: Path | None = None, timeout: float = LOCK_WAIT_S) -> sqlite3.Connection:
    """The database (created with its folder if missing); DbError when it cannot be."""
    path = path or db_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return schema.connect(path, timeout=timeout)
    except (sqlite3.Error, OSError) as exc:
        raise schema.DbError(
            f"{path}: cannot open the results database: {exc}; {schema.REBUILD}"
        ) from None


def _values(row: Mapping[str, Any], columns: tuple[str, ...]) -> list[Any]:
    return [row[c] for c in columns]


def _run_of(path: Path) -> tuple[Path, str, str, str, str | None]:
    run_dir = runs.run_of(path)
    kind, name = runs.kind_and_name(run_dir)
    return run_dir, runs.run_id(run_dir), kind, name, runs.stamp_time(run_dir)


def put_sample(conn: sqlite3.Connection, path: Path, sample: Mapping[str, Any]) -> None:
    """Index one sample file and fill its run's row (no transaction of its own)."""
    path = path.resolve()
    run_dir, run_id, kind, name, started = _run_of(path)
    row = schema.sample_row(path, sample, run_id, run_dir)
    run = schema.run_row(run_dir, run_id, kind, name, started or row["started"], None, sample)
    conn.execute(RUN_FROM_SAMPLE, _values(run, schema.RUN_COLUMNS))
    conn.execute(SAMPLE_UPSERT, _values(row, schema.SAMPLE_COLUMNS))


def put_run(conn: sqlite3.Connection, run_dir: Path, summary: Mapping[str, Any] | None) -> None:
    """Index a run directory's own row, from its summary when it has one."""
    run_dir = run_dir.resolve()
    kind, name = runs.kind_and_name(run_dir)
    run_id = runs.run_id(run_dir)
    run = schema.run_row(run_dir, run_id, kind, name, runs.stamp_time(run_dir), summary, None)
    statement = RUN_FROM_SUMMARY if summary is not None else RUN_FROM_SAMPLE
    conn.execute(statement, _values(run, schema.RUN_COLUMNS))


def _through(what: str, put: Any, *args: Any) -> None:
    """Run put(conn, *args) in one transaction; on any failure one warning, once."""
    path = db_path()
    try:
        conn = open_db(path)
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                put(conn, *args)
        finally:
            conn.close()
    except Exception as exc:  # the index must never cost a run: the files are the record
        if path not in _warned:
            _warned.add(path)
            progress.warn(
                f"results database not updated ({what}): {_one_line(exc)}; {schema.REBUILD}"
            )


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def sample_written(path: Path, sample: Mapping[str, Any]) -> None:
    """Write-through after results.write_sample."""
    _through(path.name, put_sample, path, sample)


def summary_written(run_dir: Path, summary: Mapping[str, Any]) -> None:
    """Write-through after results.write_summary."""
    _through(f"{run_dir.name}/summary.json", put_run, run_dir, summary)
