"""The tables of the results database, and opening it: WAL, a schema version, created once
per process; the columns of one sample and of one run, read from their JSON as written (a
field an older file lacks, or holds with another type, becomes NULL, never an error).
A sample stays raw JSON here on purpose: rebuild reads its files unvalidated."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbisect.core import digest, reading
from kbisect.core.exceptions import InfraError
from kbisect.db import runs

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


# -- a sample's and a run's columns from their JSON --------------------------------------
# What names a machine: the same figures on every boot of it, whatever kernel runs there
# (memory in whole GiB: each kernel reserves a little of it for itself).
MACHINE_FIELDS = ("cpu_model", "cpu_cores", "cpu_threads", "numa_nodes", "dmi_product", "machine")
INT64 = 2**63  # SQLite's integers: a larger one is no figure kbisect wrote (NULL)


def table(value: Any) -> Mapping[str, Any]:
    """A sample's JSON object; an empty one where the field holds anything else."""
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and -INT64 <= value < INT64
    return value if ok else None


def _number(value: Any) -> float | None:
    """A finite number as a float; None for anything else (10**400 too)."""
    return float(value) if reading.number(value) else None


def machine(fp: Mapping[str, Any], target: Mapping[str, Any]) -> str | None:
    """A 16-hex-digit hash of the fields that name the machine a sample ran on; None when
    the sample records none of them. A vng guest's figures are the guest's: the host
    under it (`target.vm_host`) is part of the machine."""
    facts = {k: fp.get(k) for k in MACHINE_FIELDS if fp.get(k) is not None}
    mem = _int(fp.get("mem_total_kb"))
    if mem is not None:
        facts["mem_gib"] = round(mem / 1048576)
    if not facts:
        return None
    facts["target"] = [target.get("kind"), target.get("name")]
    host = table(target.get("vm_host"))  # a vng guest's real machine (targets/vng/host.py)
    if host:  # older samples lack it: one hash for every host they ran on, as before
        facts["host"] = [host.get("cpu_model"), host.get("cpus"), host.get("qemu")]
    return digest.key(facts, 16)


def label(path: Path, sample: Mapping[str, Any], run_dir: Path) -> str | None:
    """The side (A/B), study cell or, in a bisection's store, the commit of the folder."""
    given = _text(sample.get("label"))
    owner = path.parent.parent
    if given and given != "sample":
        return given
    return owner.name if owner != run_dir else given


def tps_runs(sample: Mapping[str, Any]) -> list[float]:
    """The tps of each measured (non-warm-up) run."""
    runs = sample.get("runs")
    rows = runs if isinstance(runs, list) else []
    found = [_number(table(r).get("tps")) for r in rows if not table(r).get("warmup")]
    return [x for x in found if x is not None]


def disturbed(sample: Mapping[str, Any]) -> bool:
    """Taken while other work used the host (measure/retake.py), whatever its status."""
    return sample.get("status") == "disturbed" or bool(
        table(sample.get("disturbance")).get("disturbed")
    )


def _target(sample: Mapping[str, Any]) -> Mapping[str, Any]:
    """The sample's target; version 1 samples were vng only (measure/record.py Sample.of)."""
    target = table(sample.get("target"))
    if not target and sample.get("version") == 1:
        manifest = table(table(sample.get("kernel")).get("manifest"))
        target = {"kind": "vng", "name": "vng", "arch": manifest.get("arch")}
    return target


def sample_machine(sample: Mapping[str, Any]) -> str | None:
    """The machine hash of one sample, as its row in the index has it (machine)."""
    return machine(table(sample.get("fingerprint")), _target(sample))


def sample_row(path: Path, sample: Mapping[str, Any], run_id: str, run_dir: Path) -> dict[str, Any]:
    kernel = table(sample.get("kernel"))
    manifest = table(kernel.get("manifest"))
    fp = table(sample.get("fingerprint"))
    target = _target(sample)
    scenario = table(sample.get("scenario"))
    mem = _int(fp.get("mem_total_kb"))
    patches = manifest.get("patches")
    return {
        "path": str(path),
        "run_id": run_id,
        "label": label(path, sample, run_dir),
        "boot": _int(runs.sample_number(path)),
        "status": _text(sample.get("status")),
        "disturbed": int(disturbed(sample)),
        "tps": _number(sample.get("tps")),
        "tps_runs": json.dumps(tps_runs(sample)),
        "kernel_commit": _text(kernel.get("commit")) or _text(manifest.get("commit")),
        "kernel_tag": _text(manifest.get("describe")),
        "kernel_release": _text(kernel.get("release")),
        "tree": _text(manifest.get("tree")),
        "config_hash": _text(kernel.get("config_hash")),
        "patches": json.dumps(patches) if patches is not None else None,
        "append": _text(sample.get("append")),
        "scenario_name": _text(scenario.get("name")),
        "scenario_hash": _text(scenario.get("hash")),
        "target_kind": _text(target.get("kind")),
        "target_name": _text(target.get("name")),
        "arch": _text(target.get("arch")) or _text(fp.get("machine")),
        "machine": sample_machine(sample),
        "cpu_model": _text(fp.get("cpu_model")),
        "cores": _int(fp.get("cpu_cores")) or _int(fp.get("nproc")),
        "memory_mb": mem // 1024 if mem is not None else None,
        "numa_nodes": _int(fp.get("numa_nodes")),
        "pg_version": _text(fp.get("pg_server")) or _text(fp.get("pg_version")),
        "started": _text(sample.get("created")),
    }


def run_row(
    run_dir: Path,
    run_id: str,
    kind: str,
    name: str,
    started: str | None,
    summary: Mapping[str, Any] | None,
    sample: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The run's columns: from its summary when it has one, else from a sample of it."""
    held = table(summary) or table(sample)
    scenario = table(held.get("scenario"))
    verdict = table(table(summary).get("verdict"))
    ratio = table(verdict.get("ratio")).get("ratio")
    return {
        "run_id": run_id,
        "path": str(run_dir),
        "kind": _text(table(summary).get("kind")) or kind,
        "name": _text(table(summary).get("name")) or name,
        "scenario_name": _text(scenario.get("name")),
        "scenario_hash": _text(scenario.get("hash")),
        "started": started or _text(held.get("created")),
        "command": _text(held.get("command")),
        "verdict": _text(verdict.get("kind")),
        "ratio": _number(ratio),
    }
