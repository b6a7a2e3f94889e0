"""The noise of one scenario on one machine, from the results index: each earlier run's
boots that count (status ok, not disturbed) of that scenario hash on that machine hash,
grouped by run and side (a compare's A or B, a bisection's commit, a study's cell),
pooled into a noise prior for the sequential compare (stats/prior.py). The newest
RECENT runs only: a host's noise drifts as its software does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from kbisect.db import index, schema
from kbisect.stats import prior as priors

RECENT = 10  # the newest runs read

_BOOTS = (
    "SELECT run_id, coalesce(label, ''), tps FROM samples "
    "WHERE scenario_hash = ? AND machine = ? AND run_id != ? AND status = 'ok' "
    "AND disturbed = 0 AND typeof(tps) IN ('real', 'integer') AND tps > 0 "
    "AND run_id IN (SELECT run_id FROM samples WHERE scenario_hash = ? AND machine = ? "
    "AND run_id != ? AND status = 'ok' AND disturbed = 0 "
    "GROUP BY run_id ORDER BY max(coalesce(started, '')) DESC, run_id DESC LIMIT ?) "
    "ORDER BY run_id, path"
)


def groups(
    conn: sqlite3.Connection, scenario_hash: str, machine: str, exclude_run: str = ""
) -> dict[tuple[str, str], list[float]]:
    """Each (run, side)'s tps, the newest RECENT runs but `exclude_run` (the run asking)."""
    key = (scenario_hash, machine, exclude_run)
    out: dict[tuple[str, str], list[float]] = {}
    for run, label, tps in conn.execute(_BOOTS, (*key, *key, RECENT)):
        out.setdefault((str(run), str(label)), []).append(float(tps))
    return out


def prior(
    scenario_hash: str, machine: str, exclude_run: str = "", db_path: Path | None = None
) -> tuple[priors.Prior | None, str]:
    """The noise prior of this scenario on this machine, or None and why there is none.
    The index never costs a run: one that cannot be read is a reason, not an error."""
    path = db_path or index.db_path()
    if not path.is_file():
        return None, f"no results database at {path}"
    try:
        conn = index.open_db(path, timeout=10.0)
        try:
            found = groups(conn, scenario_hash, machine, exclude_run)
        finally:
            conn.close()
    except (schema.DbError, sqlite3.Error) as exc:
        return None, f"the results database cannot be read: {' '.join(str(exc).split())}"
    got = priors.pooled(found)
    if got is None:
        return None, "no earlier runs of this scenario on this machine with 2 boots a side"
    where = f"{path}, scenario {scenario_hash[:12]}, machine {machine}"
    return priors.Prior(got.var, got.df, got.pooled_df, got.boots, got.runs, where), ""
