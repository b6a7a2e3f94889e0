"""`kbisect db rebuild`: the index made again from the run directories' files, into a
temporary database renamed over the old one (a reader sees the old index or the new one,
never half of one)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbisect.core import atomic, reading
from kbisect.db import index, runs, schema


@dataclass
class Counts:
    runs: int = 0
    samples: int = 0
    skipped: list[str] = field(default_factory=list)  # files that could not be read


def _json(path: Path) -> dict[str, Any] | None:
    try:
        return reading.json_table(path, "")
    except reading.CorruptFile:
        return None


def index_run(conn: sqlite3.Connection, run_dir: Path, counts: Counts) -> None:
    """Every sample of one run directory, and its row (no transaction of its own); what
    cannot be read or indexed is skipped, with a line in `counts`, never the others."""
    counts.runs += 1
    summary = _json(run_dir / runs.SUMMARY) if (run_dir / runs.SUMMARY).is_file() else None
    kind = summary if summary and isinstance(summary.get("kind"), str) else None
    _put(counts, run_dir / runs.SUMMARY, index.put_run, conn, run_dir, kind)
    odd: list[Path] = []
    for path in runs.sample_files(run_dir, odd):
        if runs.run_of(path.resolve()) != run_dir:
            continue  # a run nested in this one is indexed on its own
        sample = _json(path)
        if sample is None or sample.get("kind") != "sample":
            counts.skipped.append(f"{path}: not a readable kbisect sample")
        elif _put(counts, path, index.put_sample, conn, path, sample):
            counts.samples += 1
    counts.skipped += [runs.odd_sample(p) for p in odd if runs.run_of(p.resolve()) == run_dir]


def _put(counts: Counts, path: Path, put: Callable[..., None], *args: Any) -> bool:
    """put(*args); False, and a line in counts, when the index cannot hold what `path`
    says (a figure beyond SQLite's integers, nesting too deep for json)."""
    try:
        put(*args)
    except (sqlite3.Error, ValueError, OverflowError, RecursionError) as exc:
        counts.skipped.append(f"{path}: cannot be indexed ({' '.join(str(exc).split())})")
        return False
    return True


def _keep_others(old: Path, new: sqlite3.Connection, dirs: list[Path]) -> None:
    """Copy the old index into the new one, without the runs being indexed again; an old
    index that cannot be read is left behind (its runs come back with a full rebuild)."""
    try:
        src = sqlite3.connect(f"file:{old}?mode=ro", uri=True)
        try:
            if int(src.execute("PRAGMA user_version").fetchone()[0]) != schema.VERSION:
                return
            src.backup(new)
        finally:
            src.close()
    except sqlite3.Error:
        return
    for d in dirs:
        ids = [runs.run_id(d), str(d)]
        under = f"{d}/"
        new.execute(
            "DELETE FROM samples WHERE run_id IN (?, ?) OR substr(path, 1, ?) = ?",
            [*ids, len(under), under],
        )
        new.execute("DELETE FROM runs WHERE run_id IN (?, ?)", ids)


def rebuild(folders: list[Path] | None = None, db: Path | None = None) -> Counts:
    """Index the run directories under `folders` (default: the whole results dir, from
    scratch); with folders, the other runs of the old index are kept."""
    db = db or index.db_path()
    index.check_file(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    dirs = sorted({d for f in folders or [db.parent] for d in runs.run_dirs(f)})
    tmp = db.with_name(f".{db.name}.{os.getpid()}.tmp")
    for stale in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
        stale.unlink(missing_ok=True)
    counts = Counts()
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.executescript(f"BEGIN;{schema.DDL}COMMIT;")
            if folders:
                _keep_others(db, conn, dirs)
            conn.execute("BEGIN")
            for d in dirs:
                index_run(conn, d, counts)
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        for side in ("-wal", "-shm"):  # the old index's log must not be replayed into the new
            db.with_name(db.name + side).unlink(missing_ok=True)
        os.replace(tmp, db)
        atomic.fsync_dir(db.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return counts
