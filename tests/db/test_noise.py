"""The noise prior read from the results index (db/noise.py): samples written by the
project's own code (results.write_sample indexes them), only the same scenario hash on
the same machine, boots that count, grouped by run and side, the asking run left out."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from kbisect.db import index, noise, runs, schema
from kbisect.measure import results
from kbisect.measure.record import Sample
from kbisect.stats import prior as priors


def _write(run: Path, sample: dict[str, Any], label: str, tps: float, **over: Any) -> None:
    s = copy.deepcopy(sample)
    s.update(label=label, tps=tps, **over)
    results.write_sample(run, Sample.of(s))


def _other_machine(sample: dict[str, Any]) -> dict[str, Any]:
    fp = {**sample["fingerprint"], "cpu_model": "another CPU"}
    return fp


def test_the_prior_pools_this_scenario_on_this_machine_only(sample: dict[str, Any]) -> None:
    scen, machine = sample["scenario"]["hash"], schema.sample_machine(sample)
    assert machine is not None
    r1 = results.new_run_dir("compare", "one")
    for label, tps in (("A", 1000.0), ("A", 1100.0), ("A", 900.0), ("B", 500.0), ("B", 520.0)):
        _write(r1, sample, label, tps)
    _write(r1, sample, "A", 5000.0, status="disturbed")  # never counts
    r2 = results.new_run_dir("compare", "two")
    for label, tps in (("A", 800.0), ("A", 860.0), ("B", 700.0)):  # B's one boot: no residual
        _write(r2, sample, label, tps)
    other = results.new_run_dir("compare", "elsewhere")
    for tps in (100.0, 9000.0):  # another machine, another scenario: not read
        _write(other, sample, "A", tps, fingerprint=_other_machine(sample))
        _write(other, sample, "B", tps, scenario={**sample["scenario"], "hash": "f" * 64})
    got, why = noise.prior(scen, machine)
    assert got is not None and why == ""
    want = priors.pooled(
        {
            ("1", "A"): [1000.0, 1100.0, 900.0],
            ("1", "B"): [500.0, 520.0],
            ("2", "A"): [800.0, 860.0],
        }
    )
    assert want is not None
    assert got.var == pytest.approx(want.var, rel=1e-12)
    assert (got.df, got.pooled_df, got.boots, got.runs) == (4, 4, 7, 2)
    assert str(index.db_path()) in got.source and machine in got.source
    assert 0.05 < got.cv < 0.1 and math.isfinite(got.cv)


def test_the_run_asking_is_left_out_and_none_says_why(sample: dict[str, Any]) -> None:
    scen, machine = sample["scenario"]["hash"], schema.sample_machine(sample)
    assert machine is not None
    got, why = noise.prior(scen, machine)
    assert got is None and why.startswith("no results database at ")
    run = results.new_run_dir("compare", "now")
    for label, tps in (("A", 1000.0), ("A", 1100.0), ("B", 500.0), ("B", 520.0)):
        _write(run, sample, label, tps)
    assert noise.prior(scen, machine)[0] is not None
    got, why = noise.prior(scen, machine, runs.run_id(run))
    assert got is None
    assert why == "no earlier runs of this scenario on this machine with 2 boots a side"


def test_the_newest_runs_only(sample: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "RECENT", 1)
    scen, machine = sample["scenario"]["hash"], schema.sample_machine(sample)
    assert machine is not None
    old = results.new_run_dir("compare", "old")
    for tps, when in ((1000.0, "2026-01-01T00:00:00Z"), (2000.0, "2026-01-01T00:01:00Z")):
        _write(old, sample, "A", tps, created=when)
    new = results.new_run_dir("compare", "new")
    for tps, when in ((1000.0, "2026-02-01T00:00:00Z"), (1010.0, "2026-02-01T00:01:00Z")):
        _write(new, sample, "A", tps, created=when)
    got, _ = noise.prior(scen, machine)
    assert got is not None and got.runs == 1
    assert got.cv == pytest.approx(math.log(1010 / 1000) / math.sqrt(2), rel=1e-9)


def test_an_unreadable_database_is_a_reason_not_an_error(
    tmp_path: Path, sample: dict[str, Any]
) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    got, why = noise.prior(sample["scenario"]["hash"], "0" * 16, db_path=bad)
    assert got is None and why.startswith("the results database cannot be read")


def test_a_damaged_tps_cell_is_no_boot_of_the_prior(sample: dict[str, Any]) -> None:
    """A tps cell that holds text (damage from outside: SQLite keeps any value in any
    column) is left out, not a ValueError in the middle of a compare."""
    scen, machine = sample["scenario"]["hash"], schema.sample_machine(sample)
    assert machine is not None
    run = results.new_run_dir("compare", "one")
    for label, tps in (("A", 1000.0), ("A", 1100.0), ("B", 500.0), ("B", 520.0), ("B", 9.0)):
        _write(run, sample, label, tps)
    conn = index.open_db()
    with conn:
        conn.execute("UPDATE samples SET tps = 'fast' WHERE tps = 9.0")
    conn.close()
    got, why = noise.prior(scen, machine)
    assert got is not None and (got.boots, got.runs) == (4, 1), why
