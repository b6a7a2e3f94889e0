"""`kbisect db rebuild`: docs/examples indexed from a clean checkout, idempotence, a
rebuild of some directories keeping the others, a corrupt or foreign database mended."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.db import index, query, rebuild, schema
from tests.db.conftest import DEMO_SAMPLE, DEMO_TPS, EXAMPLES, example_sample_files


def _paths(db: Path) -> set[str]:
    return {r.path for r in query.rows(db)}


def test_examples_are_indexed_every_sample_once(capsys: pytest.CaptureFixture[str]) -> None:
    files = example_sample_files()
    assert cli.main(["db", "rebuild", str(EXAMPLES)]) == 0
    assert f"indexed {len(files)} samples" in capsys.readouterr().out
    rows = query.rows()
    assert sorted(r.path for r in rows) == sorted(str(p) for p in files)
    demo = next(r for r in rows if r.path == str(DEMO_SAMPLE.resolve()))
    assert demo.tps == pytest.approx(DEMO_TPS)
    assert demo.tps_runs == pytest.approx([479.430798, 500.949749, 486.606334])
    assert (demo.label, demo.boot, demo.run_kind, demo.status) == ("A", 1, "compare", "ok")
    assert demo.kernel_tag == "v6.12-debian-16-g497e2bae621e"
    assert demo.cpu_model == "QEMU TCG CPU version 2.5+" and demo.memory_mb == 2044200 // 1024
    assert demo.machine is not None and len(demo.machine) == 16
    assert demo.run_id == str((EXAMPLES / "demo").resolve())  # outside the results dir


def test_bisect_samples_belong_to_their_run_labelled_by_commit() -> None:
    rebuild.rebuild([EXAMPLES / "drift-bisect"])
    rows = query.rows(kind="bisect")
    assert len(rows) == len(list((EXAMPLES / "drift-bisect").rglob("samples/*.json")))
    assert {r.run_id for r in rows} == {str((EXAMPLES / "drift-bisect").resolve())}
    assert all(r.label == r.kernel_commit for r in rows)  # store/<commit>, recheck/../<commit>


def test_disturbed_samples_are_flagged() -> None:
    rebuild.rebuild([EXAMPLES / "disturbed-compare"])
    rows = query.rows()
    assert any(r.disturbed for r in rows) and not all(r.disturbed for r in rows)
    assert all(r.disturbed for r in rows if r.status == "disturbed")


def test_rebuild_is_idempotent() -> None:
    first = rebuild.rebuild([EXAMPLES])
    rows = query.rows()
    again = rebuild.rebuild([EXAMPLES])
    assert (again.runs, again.samples) == (first.runs, first.samples)
    assert query.rows() == rows
    conn = index.open_db()
    with conn:
        index.put_sample(conn, DEMO_SAMPLE, json.loads(DEMO_SAMPLE.read_text()))
    conn.close()
    assert query.rows() == rows


def test_a_partial_rebuild_keeps_the_other_runs(tmp_path: Path) -> None:
    rebuild.rebuild([EXAMPLES / "demo", EXAMPLES / "founding"])
    copy = tmp_path / "founding"
    shutil.copytree(EXAMPLES / "founding", copy)
    (copy / "samples" / "001-A.json").unlink()
    rebuild.rebuild([EXAMPLES / "founding"])
    assert len(query.rows(run=str((EXAMPLES / "demo").resolve()))) == 10
    assert len(query.rows(run=str((EXAMPLES / "founding").resolve()))) == 10
    rebuild.rebuild([copy])
    assert len(query.rows(run=str(copy))) == 9
    assert len(query.rows()) == 29


def test_a_full_rebuild_drops_what_is_gone(tmp_path: Path) -> None:
    results = index.db_path().parent
    shutil.copytree(EXAMPLES / "demo", results / "20261123T053831Z-compare-demo")
    assert rebuild.rebuild().samples == 10
    run = query.rows()[0]
    assert run.run_id == "20261123T053831Z-compare-demo" and run.run_kind == "compare"
    Path(run.path).unlink()
    assert rebuild.rebuild().samples == 9
    assert run.path not in _paths(index.db_path())


def test_a_corrupt_database_is_replaced(capsys: pytest.CaptureFixture[str]) -> None:
    db = index.db_path()
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not an sqlite file" * 100)
    assert cli.main(["db", "info"]) == 3
    assert "kbisect db rebuild" in capsys.readouterr().err
    assert cli.main(["db", "rebuild", str(EXAMPLES / "demo")]) == 0
    assert len(query.rows()) == 10
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_an_unknown_schema_version_says_rebuild(capsys: pytest.CaptureFixture[str]) -> None:
    db = index.db_path()
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {schema.VERSION + 1}")
    conn.close()
    with pytest.raises(
        schema.UnknownVersion, match=r"schema version 2, this kbisect knows 1.*rebuild"
    ):
        query.rows()
    rebuild.rebuild([EXAMPLES / "demo"])
    assert len(query.rows()) == 10
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("arg", ["{tmp}/nosuch", "{tmp}", str(DEMO_SAMPLE)])
def test_rebuild_refuses_what_is_not_a_run(
    arg: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    given = arg.format(tmp=tmp_path / "empty")
    assert cli.main(["db", "rebuild", given]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and given in err
    assert not index.db_path().exists()


def test_one_bad_sample_does_not_stop_a_rebuild(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Samples the index cannot hold (a figure beyond 64 bits, nesting too deep for json,
    not JSON) or that are not named as samples (a copy): each skipped with one line, the
    others indexed; a huge figure where the index keeps none is no figure (NULL)."""
    run = tmp_path / "results" / "20261201T000000Z-run-x"
    shutil.copytree(EXAMPLES / "demo" / "samples", run / "samples")
    s = json.loads(DEMO_SAMPLE.read_text())
    huge = {"cpu_cores": 10**30, "nproc": 2**63, "mem_total_kb": 10**400}
    big = {**s, "fingerprint": {**s["fingerprint"], **huge}, "tps": 10**400}
    (run / "samples" / "011-A.json").write_text(json.dumps(big))
    (run / "samples" / "012-A.json").write_text("[" * 100_000 + "]" * 100_000)
    (run / "samples" / "013-A.json").write_text("{")
    (run / "samples" / "001 (copy)-A.json").write_bytes(DEMO_SAMPLE.read_bytes())
    (run / "samples" / "99999999999999999999999-A.json").write_bytes(DEMO_SAMPLE.read_bytes())
    assert cli.main(["db", "rebuild"]) == 0
    out = capsys.readouterr().out.splitlines()
    skipped = [line for line in out if line.startswith("skipped ")]
    assert [line.split(": ")[0].rsplit("/", 1)[1] for line in skipped] == [
        "012-A.json", "013-A.json", "001 (copy)-A.json"
    ]  # fmt: skip
    assert out[-1].startswith("indexed 12 samples of 1 runs")
    rows = {Path(r.path).name: r for r in query.rows()}
    assert (rows["011-A.json"].cores, rows["011-A.json"].memory_mb) == (None, None)
    assert rows["011-A.json"].tps is None and rows["011-A.json"].machine is not None
    assert rows["99999999999999999999999-A.json"].boot is None


def test_a_directory_where_the_index_goes_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "results" / schema.FILE
    (db / "inside").mkdir(parents=True)
    for argv in (["db", "rebuild"], ["db", "info"], ["db", "query"], ["export", "--query"]):
        assert cli.main(argv) == 3, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{db}: a directory where the results database goes" in err[0]
    assert (db / "inside").is_dir()  # left for the user to move
