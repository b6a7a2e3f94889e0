"""`kbisect export`: one row per sample, the columns of query.Row, CSV or JSON, or a KCIDB
report (checked with kcidb-io's own validator), of a run directory (from its files) or of
the database (--query)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import kcidb_io
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbisect.commands import cli
from kbisect.db import export, query, runs
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
        ["{tmp}/nosuch", "--format", "kcidb"],
        ["{tmp}", "--format", "kcidb"],
        ["--query", "--format", "kcidb"],
        [str(EXAMPLES / "demo"), "--format", "KCIDB"],
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


def _kcidb(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """The report `kbisect export ... --format kcidb` prints, valid by kcidb-io's schema,
    every reference between its objects resolved and every id unique."""
    return _check_kcidb(_out(capsys, *argv, "--format", "kcidb"))


def _not_json(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


def _check_kcidb(text: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(text, parse_constant=_not_json)
    kcidb_io.schema.LATEST.validate(report)
    assert report["version"] == {"major": 5, "minor": 3}
    checkouts = {c["id"] for c in report["checkouts"]}
    builds = {b["id"] for b in report["builds"]}
    assert len(checkouts) == len(report["checkouts"]) and len(builds) == len(report["builds"])
    assert {b["checkout_id"] for b in report["builds"]} == checkouts
    assert {t["build_id"] for t in report["tests"]} == builds
    assert len({t["id"] for t in report["tests"]}) == len(report["tests"])
    return report


@pytest.mark.parametrize("run", runs.run_dirs(EXAMPLES), ids=lambda d: str(d.relative_to(EXAMPLES)))
def test_every_example_run_is_a_valid_kcidb_report(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _kcidb(capsys, str(run))
    assert len(report["tests"]) == len(export.run_rows(run.absolute()))


def test_kcidb_of_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    report = _kcidb(capsys, str(EXAMPLES / "demo"))
    sample = json.loads(DEMO_SAMPLE.read_text())
    assert len(report["tests"]) == 10 and len(report["builds"]) == 2
    first = report["tests"][0]
    assert (first["path"], first["status"], first["start_time"]) == (
        "simple-update-2vcpu",
        "DONE",
        sample["created"],
    )
    assert first["number"] == {"value": DEMO_TPS, "unit": "tps", "prefix": "metric"}
    assert first["misc"]["fingerprint"] == sample["fingerprint"]
    assert (first["misc"]["label"], first["misc"]["boot"]) == ("A", 1)
    build = next(b for b in report["builds"] if b["id"] == first["build_id"])
    manifest = sample["kernel"]["manifest"]
    assert (build["architecture"], build["compiler"], build["config_name"]) == (
        "x86_64",
        manifest["compiler"],
        manifest["base"],
    )
    checkout = next(c for c in report["checkouts"] if c["id"] == build["checkout_id"])
    assert checkout["git_commit_hash"] == sample["kernel"]["commit"]
    assert checkout["tree_name"] == "linux-6.12-debian"
    objects = report["checkouts"] + report["builds"] + report["tests"]
    assert all(o["id"].startswith("kbisect:") and o["origin"] == "kbisect" for o in objects)


def test_kcidb_ids_do_not_depend_on_where_the_run_lies(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    moved = tmp_path / "elsewhere"
    shutil.copytree(EXAMPLES / "demo", moved)
    here, there = _kcidb(capsys, str(EXAMPLES / "demo")), _kcidb(capsys, str(moved))
    for kind in ("checkouts", "builds", "tests"):
        assert [o["id"] for o in here[kind]] == [o["id"] for o in there[kind]]


def test_kcidb_of_the_database_is_the_run_dirs(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["db", "rebuild", str(EXAMPLES / "founding")]) == 0
    capsys.readouterr()
    from_db = _kcidb(capsys, "--query", "--scenario", "contention-2vcpu")
    assert from_db == _kcidb(capsys, str(EXAMPLES / "founding"))
    assert from_db["checkouts"][1]["misc"]["patches"][0]["sha256"] == "453c4397f65a"
    assert "patchset_hash" not in from_db["checkouts"][1]


TEXT = st.none() | st.text(max_size=12) | st.sampled_from(["x86_64", "a.b", "", "\0", "v6.12"])
NUMBER = st.none() | st.floats(allow_nan=False, allow_infinity=False)
INT = st.none() | st.integers(-(2**63), 2**63 - 1)
PLAIN = st.recursive(
    st.none() | st.booleans() | st.floats() | st.just(math.nan) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


TIMES = ["2026-12-05T10:00:00Z", "2026-13-45T00:00:00Z", "2026-12-05", "2026-12-05 10:00"]
ROW = {f.name: TEXT for f in dataclasses.fields(query.Row)} | {
    "path": st.just("sample.json"),
    "run_id": st.text(max_size=12),
    "disturbed": st.booleans(),
    "tps": NUMBER,
    "tps_runs": st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=3),
    "boot": INT,
    "cores": INT,
    "memory_mb": INT,
    "numa_nodes": INT,
    "ratio": NUMBER,
    "patches": st.none() | st.lists(PLAIN, max_size=2),
    "started": TEXT | st.sampled_from(TIMES),
    "kernel_commit": TEXT | st.just("ab54bdac3a3dab909d94bd2e42026b29e2546036"),
}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    row=st.builds(query.Row, **ROW),
    manifest=st.dictionaries(st.sampled_from(["compiler", "base", "subject"]), PLAIN),
    fingerprint=PLAIN,
)
def test_any_indexed_row_makes_a_valid_kcidb_report(
    row: query.Row, manifest: dict[str, Any], fingerprint: Any, tmp_path: Path
) -> None:
    """Whatever a damaged sample left in the index or in its file (text with a NUL, a
    commit that is no SHA-1, a date that is none, NaN in the fingerprint), the report is
    still KCIDB: such a field is left out. The sample's file may be gone too."""
    sample = {"kernel": {"manifest": manifest}, "fingerprint": fingerprint}
    (tmp_path / "sample.json").write_text(json.dumps(sample))
    gone = dataclasses.replace(row, path=str(tmp_path / "gone.json"))
    there = dataclasses.replace(row, path=str(tmp_path / "sample.json"))
    report = _check_kcidb(export.as_kcidb([there]))
    assert report["tests"][0]["id"] == _check_kcidb(export.as_kcidb([gone]))["tests"][0]["id"]
