"""query.rows and `kbisect db query`: each filter against the same filter done in
Python over every indexed sample of docs/examples."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbisect.commands import cli
from kbisect.db import query, rebuild
from tests.db.conftest import EXAMPLES, example_sample_files


@pytest.fixture(scope="module")
def examples_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("db") / "kbisect.sqlite"
    rebuild.rebuild([EXAMPLES], db)
    return db


def test_filters(examples_db: Path) -> None:
    every = query.rows(examples_db)
    assert len(every) == len(example_sample_files()) > 100
    smoke = query.rows(examples_db, scenario="smoke")
    assert smoke and {r.scenario_name for r in smoke} == {"smoke"}
    # Two versions of smoke are stored (the host's PostgreSQL, then the image's).
    old = [r for r in smoke if str(r.scenario_hash).startswith("939d9029")]
    assert old and len(old) < len(smoke)
    assert query.rows(examples_db, scenario_hash="939d9029") == old
    assert {r.run_kind for r in query.rows(examples_db, kind="study")} == {"study"}
    ok = query.rows(examples_db, status="ok")
    failed = query.rows(examples_db, status="failed")
    assert all(r.status == "ok" for r in ok) and all("failed" in str(r.status) for r in failed)
    culprit = query.rows(examples_db, commit="d59fc219")
    assert culprit and {r.kernel_commit for r in culprit} == {
        "d59fc21905a7ff5325cb312e4844db6234233832"
    }
    base = query.rows(examples_db, tag="v6.12-debian")
    assert base and all(str(r.kernel_tag).startswith("v6.12-debian") for r in base)
    assert query.rows(examples_db, tag="v6.12-deb") == []  # whole describe parts only
    machine = every[0].machine
    assert machine and query.rows(examples_db, machine=machine[:6]) == [
        r for r in every if r.machine == machine
    ]
    assert len(query.rows(examples_db, run=str((EXAMPLES / "demo").resolve()))) == 10


def test_since(examples_db: Path) -> None:
    later = query.rows(examples_db, since="2026-11-28")
    assert later and all(str(r.started) >= "2026-11-28" for r in later)


@pytest.mark.parametrize(
    ("name", "value"),
    [("commit", "xyz"), ("scenario_hash", "ABC!"), ("status", "great"), ("since", "yesterday")],
)
def test_a_bad_filter_value_is_one_line(examples_db: Path, name: str, value: str) -> None:
    with pytest.raises(query.BadFilter):
        query.rows(examples_db, **{name: value})


FIELDS = ("scenario_name", "run_kind", "status", "kernel_commit", "machine")
FILTER = {"scenario_name": "scenario", "run_kind": "kind", "kernel_commit": "commit"}


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_select_is_the_python_filter(examples_db: Path, data: st.DataObject) -> None:
    every = query.rows(examples_db)
    chosen = data.draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=3))
    picks = {f: getattr(data.draw(st.sampled_from(every)), f) for f in chosen}
    picks = {f: v for f, v in picks.items() if v is not None}
    want = [r for r in every if all(getattr(r, f) == v for f, v in picks.items())]
    got = query.rows(examples_db, **{FILTER.get(f, f): v for f, v in picks.items()})
    assert got == want


def test_db_query_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["db", "rebuild", str(EXAMPLES / "demo")]) == 0
    capsys.readouterr()
    assert cli.main(["db", "query", "--status", "ok", "--scenario", "simple-update-2vcpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["started", "kind", "label"]
    assert lines[-1] == "10 samples" and len(lines) == 12
    assert cli.main(["db", "info"]) == 0
    assert "samples: 10" in capsys.readouterr().out


def test_db_query_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["db", "query"]) == 2  # no database yet
    assert "kbisect db rebuild" in capsys.readouterr().err
    assert cli.main(["db", "query", "--since", "last week"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
