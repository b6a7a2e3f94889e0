"""The tables of the results database, and opening it: WAL, a schema version, created once
per process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kbisect.core.exceptions import InfraError

VERSION = 1
FILE = "kbisect.sqlite"
REBUILD = "run `kbisect db rebuild` to build it again from the run directories"

RUN_COLUMNS = (
    "run_id",
    "path",
    "kind",
    "name",
    "scenario_name",
    "scenario_hash",
    "started",
    "command",
    "verdict",
    "ratio",
)
SAMPLE_COLUMNS = (
    "path",
    "run_id",
    "label",
    "boot",
    "status",
    "disturbed",
    "tps",
    "tps_runs",
    "kernel_commit",
    "kernel_tag",
    "kernel_release",
    "tree",
    "config_hash",
    "patches",
    "append",
    "scenario_name",
    "scenario_hash",
    "target_kind",
    "target_name",
    "arch",
    "machine",
    "cpu_model",
    "cores",
    "memory_mb",
    "numa_nodes",
    "pg_version",
    "started",
)

DDL = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    kind TEXT,
    name TEXT,
    scenario_name TEXT,
    scenario_hash TEXT,
    started TEXT,
    command TEXT,
    verdict TEXT,
    ratio REAL
);
CREATE TABLE IF NOT EXISTS samples (
    path TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    label TEXT,
    boot INTEGER,
    status TEXT,
    disturbed INTEGER NOT NULL DEFAULT 0,
    tps REAL,
    tps_runs TEXT NOT NULL DEFAULT '[]',
    kernel_commit TEXT,
    kernel_tag TEXT,
    kernel_release TEXT,
    tree TEXT,
    config_hash TEXT,
    patches TEXT,
    "append" TEXT,
    scenario_name TEXT,
    scenario_hash TEXT,
    target_kind TEXT,
    target_name TEXT,
    arch TEXT,
    machine TEXT,
    cpu_model TEXT,
    cores INTEGER,
    memory_mb INTEGER,
    numa_nodes INTEGER,
    pg_version TEXT,
    started TEXT
);
CREATE INDEX IF NOT EXISTS samples_run ON samples (run_id);
CREATE INDEX IF NOT EXISTS samples_scenario ON samples (scenario_hash);
CREATE INDEX IF NOT EXISTS samples_machine ON samples (machine);
CREATE INDEX IF NOT EXISTS samples_commit ON samples (kernel_commit);
PRAGMA user_version = {VERSION};
"""


class DbError(InfraError):
    """The results database cannot be opened, read or written (its files are intact)."""


class UnknownVersion(DbError):
    """The database was made by another kbisect (a newer schema, or none kbisect knows)."""


def memory() -> sqlite3.Connection:
    """An empty database in memory (`kbisect export RUN_DIR` indexes a run into one)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(DDL)
    return conn


def connect(path: Path, *, timeout: float = 5.0) -> sqlite3.Connection:
    """A connection in WAL mode, the schema created if the file is new; UnknownVersion
    when it holds another schema version."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        found = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if found == 0:
            conn.executescript(f"BEGIN IMMEDIATE;{DDL}COMMIT;")
        elif found != VERSION:
            raise UnknownVersion(
                f"{path}: results database schema version {found}, this kbisect knows "
                f"{VERSION}; {REBUILD}"
            )
    except BaseException:
        conn.close()
        raise
    return conn
