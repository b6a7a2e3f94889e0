"""`kbisect export`: one row per sample, the columns of query.Row, CSV or JSON, of a run
directory (from its files) or of the database (--query)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.db import query
from tests.db.conftest import DEMO_SAMPLE, DEMO_TPS, EXAMPLES
from tests.report import golden


def _out(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(["export", *argv]) == 0
    return capsys.readouterr().out


def test_csv_of_a_run_dir(capsys: pytest.CaptureFixture[str]) -> None:
    rows = list(csv.DictReader(io.StringIO(_out(capsys, str(EXAMPLES / "demo")))))
    assert len(rows) == 10
    assert tuple(rows[0]) == query.COLUMNS
    first = next(r for r in rows if r["path"] == str(DEMO_SAMPLE.resolve()))
    assert float(first["tps"]) == pytest.approx(DEMO_TPS)
    assert json.loads(first["tps_runs"]) == pytest.approx([479.430798, 500.949749, 486.606334])
    assert (first["label"], first["boot"], first["disturbed"], first["numa_nodes"]) == (
        "A",
        "1",
        "0",
        "",
    )
    assert first["verdict"] == "improvement" and first["run_kind"] == "compare"


def test_json_of_a_bisect_run(capsys: pytest.CaptureFixture[str]) -> None:
    got = json.loads(_out(capsys, str(EXAMPLES / "machine-bisect"), "--format", "json"))
    assert len(got) == len(list((EXAMPLES / "machine-bisect").rglob("samples/*.json")))
    assert list(got[0]) == list(query.COLUMNS)
    assert {g["target_kind"] for g in got} == {"ssh"}
    assert all(isinstance(g["tps_runs"], list) for g in got)


def test_export_query_reads_the_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli.main(["db", "rebuild", str(EXAMPLES)]) == 0
    capsys.readouterr()
    out = tmp_path / "smoke.json"
    assert (
        cli.main(["export", "--query", "--scenario", "smoke", "--format", "json", "-o", str(out)])
        == 0
    )
    got = json.loads(out.read_text())
    assert got and {g["scenario_name"] for g in got} == {"smoke"}
    assert len(got) == len(query.rows(scenario="smoke"))


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["{tmp}/nosuch"],
        ["{tmp}"],
        [str(EXAMPLES / "demo"), "--format", "xml"],
        [str(EXAMPLES / "demo"), "--query"],
        [str(EXAMPLES / "demo"), "--scenario", "x"],
        ["--query", "--status", "bogus"],
        ["--query", "--commit", "not-hex"],
        [str(EXAMPLES / "demo"), "-o", "{tmp}"],
    ],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["export", *(a.format(tmp=tmp_path) for a in argv)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err


@pytest.mark.parametrize(("name", "fmt"), golden.EXPORTS)
def test_an_example_exports_as_the_golden_file(name: str, fmt: str) -> None:
    """Regenerate with `python -m tests.report.golden` after a deliberate change."""
    code, out = golden.render_export(name, fmt)
    assert code == 0
    assert out == golden.export_golden(name, fmt).read_text()
