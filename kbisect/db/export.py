"""Indexed samples as CSV or JSON, one row per sample, the columns of query.Row in order;
or as KCIDB, KernelCI's results format (its schema 5.3, kcidb-io 141).

Lists (each run's tps, the patches) are JSON text in a CSV cell; NULL is an empty cell in
CSV and null in JSON. KCIDB has no null: a field kbisect does not know, or whose value
the schema would refuse (a commit that is not a full SHA-1, text with a NUL), is left out.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import sqlite3
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from kbisect.core import digest, progress, reading
from kbisect.core.reading import mapping
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


# -- KCIDB: a checkout per tree, commit and patches; a build per checkout, arch and config;
# a test per sample. Ids are "kbisect:" and a hash of what names the object (never a path:
# a run exported on another machine, or moved, keeps its ids).
KCIDB_VERSION = {"major": 5, "minor": 3}
ORIGIN = "kbisect"
STATUS = {"ok": "DONE", "disturbed": "DONE", "boot-failed": "FAIL", "benchmark-failed": "ERROR"}
SHA1 = re.compile(r"[0-9a-f]{40}")
ARCH = re.compile(r"[a-z0-9_]+")
NOT_IN_PATH = re.compile(r"[^A-Za-z0-9_-]")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def _kcidb_id(*names: Any) -> str:
    return f"{ORIGIN}:{digest.key(list(names), 16)}"


def _text(value: Any) -> str | None:
    """Text KCIDB takes: not empty, no NUL."""
    return value if isinstance(value, str) and value and "\0" not in value else None


def _plain(value: Any) -> Any:
    """JSON as KCIDB takes it (no NaN or infinity), else None."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return None
    return value


def _time(value: str | None) -> str | None:
    """An RFC 3339 time, as the schema's date-time format wants."""
    if value is None or not TIME.fullmatch(value):
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return None
    return value


def _given(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None and v != {}}


def _sample(row: query.Row) -> Mapping[str, Any]:
    """The row's sample file (for what the index leaves out); empty if it is gone."""
    try:
        return reading.json_table(Path(row.path), reading.SAMPLE_RECOVER)
    except reading.CorruptFile:
        return {}


def _tree_name(tree: str | None) -> str | None:
    """The tree's folder; a kbisect worktree's (worktrees/REPO/SLOT) is REPO."""
    if _text(tree) is None:
        return None
    path = Path(str(tree))
    return _text(path.parent.name if path.parent.parent.name == "worktrees" else path.name)


def _checkout(row: query.Row, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A patched kernel's commit is the one kbisect made with the patches in it
    (source/patches.py): nothing is applied on top of it; its patches go in misc."""
    tree = _tree_name(row.tree)
    patches = _plain(row.patches)
    commit = row.kernel_commit if row.kernel_commit and SHA1.fullmatch(row.kernel_commit) else None
    return _given(
        id=_kcidb_id(tree, row.kernel_commit, patches),
        origin=ORIGIN,
        tree_name=tree,
        git_commit_hash=commit,
        git_commit_name=_text(row.kernel_tag),
        patchset_hash="" if patches == [] else None,
        comment=_text(manifest.get("subject")),
        misc=_given(tree=_text(row.tree), patches=patches or None),
    )


def _build(row: query.Row, checkout: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    arch = row.arch if row.arch and ARCH.fullmatch(row.arch) else None
    return _given(
        id=_kcidb_id(checkout, row.arch, row.config_hash),
        checkout_id=checkout,
        origin=ORIGIN,
        architecture=arch,
        config_name=_text(manifest.get("base")),
        compiler=_text(manifest.get("compiler")),
        status="PASS",  # it booted, or was tried: a build that failed has no sample
        misc=_given(config_hash=row.config_hash, kernel_release=row.kernel_release),
    )


def _test(row: query.Row, build: str, fingerprint: Any) -> dict[str, Any]:
    scenario = NOT_IN_PATH.sub("_", row.scenario_name) if row.scenario_name else None
    ident = (row.started, row.machine, row.kernel_commit, row.config_hash, row.patches)
    return _given(
        id=_kcidb_id(*ident, row.append, row.scenario_hash, row.label, row.boot),
        build_id=build,
        origin=ORIGIN,
        path=scenario,
        status=STATUS.get(row.status or ""),
        number=None if row.tps is None else {"value": row.tps, "unit": "tps", "prefix": "metric"},
        start_time=_time(row.started),
        misc=_given(
            run=row.run_id,
            run_kind=row.run_kind,
            label=row.label,
            boot=row.boot,
            tps_runs=row.tps_runs,
            disturbed=row.disturbed,
            scenario_hash=row.scenario_hash,
            machine=row.machine,
            target=_given(kind=row.target_kind, name=row.target_name),
            fingerprint=_plain(mapping(fingerprint)) or None,
        ),
    )


def as_kcidb(rows: list[query.Row]) -> str:
    """The samples as one KCIDB report: their checkouts, builds and tests. The compiler,
    the config's base and the fingerprint come from each sample's file."""
    checkouts: dict[str, dict[str, Any]] = {}
    builds: dict[str, dict[str, Any]] = {}
    tests = []
    for row in rows:
        sample = _sample(row)
        manifest = mapping(mapping(sample.get("kernel")).get("manifest"))
        checkout = _checkout(row, manifest)
        checkouts.setdefault(checkout["id"], checkout)
        build = _build(row, checkout["id"], manifest)
        builds.setdefault(build["id"], build)
        tests.append(_test(row, build["id"], sample.get("fingerprint")))
    report = {
        "version": KCIDB_VERSION,
        "checkouts": list(checkouts.values()),
        "builds": list(builds.values()),
        "tests": tests,
    }
    return json.dumps(report, indent=1) + "\n"


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
