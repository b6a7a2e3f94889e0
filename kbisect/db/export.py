"""Indexed samples as CSV or JSON, one row per sample, the columns of query.Row in order.

Lists (each run's tps, the patches) are JSON text in a CSV cell; NULL is an empty cell in
CSV and null in JSON."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

from kbisect.core import progress
from kbisect.db import query, rebuild, runs, schema


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value)
    return int(value) if isinstance(value, bool) else value


def as_csv(rows: list[query.Row]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(query.COLUMNS)
    for r in rows:
        writer.writerow([_cell(getattr(r, c)) for c in query.COLUMNS])
    return out.getvalue()


def as_json(rows: list[query.Row]) -> str:
    return json.dumps([dataclasses.asdict(r) for r in rows], indent=1) + "\n"


def run_rows(run_dir: Path) -> list[query.Row]:
    """The samples of one run directory (and of the runs it holds), read from its files
    (no database needed), in boot order."""
    conn: sqlite3.Connection = schema.memory()
    try:
        counts = rebuild.Counts()
        for d in runs.run_dirs(run_dir):
            rebuild.index_run(conn, d, counts)
        for line in counts.skipped:
            progress.warn(f"skipped {line}")
        return query.matching(conn)
    finally:
        conn.close()
