"""Write-through: results.write_sample and write_summary index the file they wrote, in
the results dir's database; a database that cannot be written costs one warning line,
never the run, and `kbisect db rebuild` mends it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kbisect.core import paths
from kbisect.db import index, query, rebuild
from kbisect.measure import results
from kbisect.measure.record import Sample
from tests.db.conftest import DEMO_TPS, EXAMPLES


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "_warned", set())


def test_tests_index_into_their_own_results_dir(tmp_path: Path) -> None:
    assert index.db_path() == tmp_path / "results" / "kbisect.sqlite"
    assert paths.results_dir() == tmp_path / "results"


def test_write_sample_indexes_the_file(sample: dict[str, Any]) -> None:
    run = results.new_run_dir("compare", "demo")
    path = results.write_sample(run, Sample.of(sample))
    rows = query.rows()
    assert [r.path for r in rows] == [str(path.resolve())]
    assert rows[0].tps == pytest.approx(DEMO_TPS)
    assert rows[0].run_id == run.name and rows[0].run_kind == "compare"
    assert rows[0].boot == 1 and rows[0].label == "A"
    second = results.write_sample(run, Sample.of(sample).with_(label="B", tps=500.0))
    assert [r.boot for r in query.rows(run=run.name)] == [1, 2]
    assert query.rows(run=run.name)[1].path == str(second.resolve())


def test_write_summary_fills_the_run(sample: dict[str, Any]) -> None:
    summary = results.load_summary(EXAMPLES / "demo")
    run = results.new_run_dir("compare", "demo")
    results.write_sample(run, Sample.of(sample))
    results.write_summary(run, summary)
    conn = sqlite3.connect(index.db_path())
    got = conn.execute("SELECT kind, verdict, ratio, started, command FROM runs").fetchall()
    assert len(got) == 1
    kind, verdict, ratio, started, command = got[0]
    assert (kind, verdict) == ("compare", "improvement")
    assert ratio == pytest.approx(1.9905518932398563)
    n = run.name  # <UTC time>-compare-demo: the run started then
    assert started == f"{n[:4]}-{n[4:6]}-{n[6:8]}T{n[9:11]}:{n[11:13]}:{n[13:15]}Z"
    assert command == summary["command"]


def test_a_run_outside_the_results_dir_is_indexed_by_its_path(
    tmp_path: Path, sample: dict[str, Any]
) -> None:
    out = tmp_path / "elsewhere"
    results.out_dir(out, "run", "x")
    results.write_sample(out, Sample.of(sample))
    assert [r.run_id for r in query.rows()] == [str(out.resolve())]


def test_a_corrupt_database_warns_once_and_the_run_goes_on(
    sample: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    db = index.db_path()
    db.parent.mkdir(parents=True)
    db.write_bytes(b"garbage" * 1000)
    run = results.new_run_dir("compare", "demo")
    first = results.write_sample(run, Sample.of(sample))
    second = results.write_sample(run, Sample.of(sample))
    assert first.is_file() and second.is_file()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "results database not updated" in err[0]
    assert "kbisect db rebuild" in err[0]
    assert rebuild.rebuild().samples == 2
    assert [r.path for r in query.rows()] == [str(first.resolve()), str(second.resolve())]


def test_a_locked_database_warns_and_the_run_goes_on(
    sample: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "LOCK_WAIT_S", 0.05)
    run = results.new_run_dir("compare", "demo")
    results.write_sample(run, Sample.of(sample))
    holder = sqlite3.connect(index.db_path(), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        path = results.write_sample(run, Sample.of(sample))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert path.is_file()
    assert "locked" in capsys.readouterr().err
    assert len(query.rows()) == 1  # rebuild would add it
    rebuild.rebuild()
    assert len(query.rows()) == 2


def test_a_results_dir_that_cannot_hold_the_database_warns(
    tmp_path: Path,
    sample: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("KBISECT_RESULTS", str(blocked))
    out = tmp_path / "out"
    results.out_dir(out, "run", "x")
    assert results.write_sample(out, Sample.of(sample)).is_file()
    assert "results database not updated" in capsys.readouterr().err


def test_db_open_failure_is_caught_whatever_it_is(
    sample: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object, **__: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(index, "open_db", boom)
    run = results.new_run_dir("run", "x")
    assert results.write_sample(run, Sample.of(sample)).is_file()
    assert results.write_summary(run, results.load_summary(EXAMPLES / "demo")).is_file()
    assert "disk on fire" in capsys.readouterr().err
