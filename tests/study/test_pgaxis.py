"""The `postgres` study axis (kbisect/study/pgaxis.py): values read and checked before
anything is built, `+` split where the pieces name a source and files, each value built
once (pgbuild/build.py stood in by tests/pgbuild/fakebuild.py) and run by its key in
every cell, on the fake target, through a resume and into the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbisect.pgbuild import request
from kbisect.study import axes, pgaxis, spec, store
from kbisect.study.axes import AxisError
from tests.fakes import git
from tests.pgbuild import fakebuild
from tests.pgbuild.test_pgbuild import BATCH, pg_repo
from tests.study.test_cli import fake_target, image, kbisect, ok_units, run_dir, study_args


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> fakebuild.Builds:
    return fakebuild.install(monkeypatch)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory, holding batch.mbox (a patch)."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "batch.mbox").write_text(BATCH)
    monkeypatch.chdir(cwd)
    return cwd


def test_values_are_a_source_and_patch_files_labelled_as_typed(here: Path) -> None:
    axis = spec.parse_axis("postgres=debian:17, debian:17+batch.mbox")
    assert axis.name == "postgres" and axis.short == "postgres"
    assert [lv.label for lv in axis.levels] == ["debian:17", "debian:17+batch.mbox"]
    plain, patched = (lv for lv in axis.levels if isinstance(lv, pgaxis.PgLevel))
    assert plain.request is not None and patched.request is not None
    assert (plain.request.source, plain.request.patches) == ("debian:17", ())
    assert patched.request.patches == (here / "batch.mbox",)
    assert plain.sets == patched.sets == ()  # nothing is built yet
    assert patched.as_dict()["postgres"] == {
        "source": "debian:17",
        "patches": [str(here / "batch.mbox")],
    }
    cells = axes.cells([axis])
    assert [c.label([axis]) for c in cells] == [
        "postgres=debian:17",
        "postgres=debian:17+batch.mbox",
    ]


def test_a_tree_at_a_revision_under_home_and_a_patch_by_its_full_path(
    isolated_env: Path, here: Path
) -> None:
    pg_repo(isolated_env / "src")
    value = f"~/src/postgres@REL_17_6+{here / 'batch.mbox'}"
    axis = spec.parse_axis(f"postgres=~/src/postgres@REL_17_6,{value}")
    assert [lv.label for lv in axis.levels] == [
        "~/src/postgres@REL_17_6",
        "~/src/postgres@REL_17_6+batch.mbox",  # the patch by its name, not its path
    ]


def test_a_plus_splits_only_where_the_pieces_name_a_source_and_files(
    tmp_path: Path, here: Path
) -> None:
    fork = tmp_path / "pg+fork"
    fork.mkdir()
    repo, _ = pg_repo(fork)
    (here / "fix+more.patch").write_text(BATCH)
    for value, source, files in (
        (f"{repo}@HEAD", f"{repo}@HEAD", ()),
        (f"{repo}+batch.mbox", str(repo), ("batch.mbox",)),
        (
            f"{repo}@HEAD+fix+more.patch+batch.mbox",
            f"{repo}@HEAD",
            ("fix+more.patch", "batch.mbox"),
        ),
        ("debian:17 + batch.mbox", "debian:17", ("batch.mbox",)),
    ):
        read = pgaxis.read(value, "--axis postgres")
        assert (read.source, tuple(p.name for p in read.patches)) == (source, files), value


def test_a_value_two_readings_fit_is_refused_in_one_line(tmp_path: Path, here: Path) -> None:
    pg_repo(tmp_path / "a")
    pg_repo(tmp_path / "b")
    git(tmp_path, "clone", "-q", str(tmp_path / "a/postgres"), str(tmp_path / "a/postgres+x"))
    (here / "x").write_text(BATCH)
    with pytest.raises(AxisError) as info:
        pgaxis.read(f"{tmp_path}/a/postgres+x", "--axis postgres")
    message = str(info.value)
    assert "reads two ways" in message and "(PATH@HEAD)" in message and "\n" not in message
    assert f"{tmp_path}/a/postgres with x, or {tmp_path}/a/postgres+x" in message
    plain = pgaxis.read(f"{tmp_path}/a/postgres+x@HEAD", "--axis postgres")
    assert (plain.source, plain.patches) == (f"{tmp_path}/a/postgres+x@HEAD", ())


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("debian:16", "debian:16: no Debian suite kbisect knows carries it"),
        ("debian:17+nosuch.patch", "debian:17+nosuch.patch: "),
        ("debian:17+notes.txt", "not a patch"),
        ("debian:17+", "a source or a patch name is empty"),
        ("{repo}@REL_17_6+nosuch.patch", "nosuch.patch: "),  # never a revision with a +
        ("nowhere+batch.mbox", "nowhere is not a git repository"),
        ("no\nwh\u2028ere", "no\\nwh\\u2028ere is not a git repository"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(
    tmp_path: Path, here: Path, value: str, why: str
) -> None:
    (here / "notes.txt").write_text("not a patch\n")
    repo, _ = pg_repo(tmp_path)
    value = value.replace("{repo}", str(repo))
    with pytest.raises(AxisError) as info:
        spec.parse_axis(f"postgres=debian:17,{value}")
    message = str(info.value)
    assert message.startswith(f"--axis postgres: {request.shown(value)}: ")
    assert why in message and len(message.splitlines()) == 1


def test_two_patches_of_one_name_are_told_apart_by_the_values_as_typed(
    tmp_path: Path, here: Path
) -> None:
    for d in ("v1", "v2"):
        (here / d).mkdir()
        (here / d / "batch.mbox").write_text(BATCH)
    axis = spec.parse_axis("postgres=debian:17+v1/batch.mbox,debian:17+v2/batch.mbox")
    assert [lv.label for lv in axis.levels] == [
        "debian:17+v1/batch.mbox",
        "debian:17+v2/batch.mbox",
    ]


def test_a_study_file_names_the_axis_by_its_key(here: Path) -> None:
    data = {
        "name": "pg",
        "scenario": "smoke",
        "kernels": {"revs": ["v6.12-debian"]},
        "axes": [{"key": "postgres", "values": ["debian:17", "debian:17+batch.mbox"]}],
    }
    study = spec.from_dict(data, "pg.toml")
    assert [lv.label for lv in study.axes[0].levels] == ["debian:17", "debian:17+batch.mbox"]
    data["axes"] = [{"key": "postgres", "values": ["debian:16"]}]
    with pytest.raises(AxisError, match=r"^pg\.toml: axis postgres: debian:16: "):
        spec.from_dict(data, "pg.toml")
    data["axes"] = [{"key": "postgres", "values": ["debian:17"], "needs": {}}]
    with pytest.raises(spec.StudyFileError, match="needs"):
        spec.from_dict(data, "pg.toml")
    data["axes"] = [{"name": "postgres", "levels": [{"label": "x", "set": []}]}]
    with pytest.raises(spec.StudyFileError, match=r'axes\.name "postgres" names the PostgreSQL'):
        spec.from_dict(data, "pg.toml")


def study_argv(tmp_path: Path, *extra: str) -> list[str]:
    """test_cli's study of kernel images on the fake target, over the two servers."""
    if not (tmp_path / "k0").exists():
        for i, tps in enumerate((1000, 1004)):
            image(tmp_path / f"k{i}", tps)
    argv = study_args(f"{tmp_path / 'k0'},{tmp_path / 'k1'}", *extra)
    argv[argv.index("--axis") + 1] = "postgres=debian:17,debian:17+batch.mbox"
    return argv


def test_each_server_is_built_once_and_every_cell_runs_its_key(
    isolated_env: Path,
    tmp_path: Path,
    here: Path,
    builds: fakebuild.Builds,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = fake_target(isolated_env, cv=0.01, script=["ok", "panic"])
    assert kbisect(*study_argv(tmp_path, "--retries", "0")) == 5  # one boot failed
    assert builds.calls == [("debian:17", ()), ("debian:17", (here / "batch.mbox",))]
    out = capsys.readouterr().out
    assert "2 kernel(s) x 2 cell(s), 2 build(s), 12 boots" in out
    run = run_dir(tmp_path / "results")
    d = store.load_definition(run)
    keys = [c["set"][0].removeprefix("postgres.build=") for c in d["cells"]]
    assert keys[0] != keys[1] and all(k.startswith("pg17-") for k in keys)
    assert [c["set"] for c in d["cells"]] == [
        [f"postgres.build={k}", "postgres.major=17"] for k in keys
    ]
    assert [c["label"] for c in d["cells"]] == [
        "postgres=debian:17",
        "postgres=debian:17+batch.mbox",
    ]
    assert d["axes"][0]["levels"][1]["postgres"]["patches"] == [str(here / "batch.mbox")]
    plan = json.loads((run / store.SCHEDULE).read_text())
    target.write_text('kind = "fake"\ncv = 0.01\n')
    assert kbisect("study", "--resume", str(run)) == 0
    assert builds.calls == [("debian:17", ()), ("debian:17", (here / "batch.mbox",))]  # no more
    assert json.loads((run / store.SCHEDULE).read_text()) == plan
    assert store.load_definition(run)["cells"] == d["cells"]  # the same cells, same keys
    assert ok_units(run) == {(k, c): 3 for k in range(2) for c in range(2)}
    for s in store.samples(run):
        cell = store.unit_of(s.label)
        assert cell is not None
        assert s.settings["postgres"]["build"] == keys[cell[1]]
        assert s.settings["postgres"]["major"] == 17
    text = (run / "report.txt").read_text()
    assert "postgres=debian:17+batch.mbox" in text


@pytest.mark.usefixtures("here")
def test_a_dry_run_and_bad_input_build_nothing(
    isolated_env: Path, tmp_path: Path, builds: fakebuild.Builds, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_target(isolated_env)
    assert kbisect(*study_argv(tmp_path, "--dry-run")) == 0
    assert "2 build(s)" in capsys.readouterr().out
    bad = [
        ["--axis", "postgres=debian:17,debian:17+nosuch.patch"],
        ["--axis", "postgres.major=15,17"],
        ["--set", "postgres.source=host"],
        ["--set", "postgres.version=17.6-1"],
    ]
    messages = [
        "--axis postgres: debian:17+nosuch.patch: ",
        "axes postgres.major and postgres both say which server runs: keep one",
        "postgres.build runs a build on an image's root",
        "postgres.build and postgres.version pin two different servers",
    ]
    for extra, message in zip(bad, messages, strict=True):
        assert kbisect(*study_argv(tmp_path), *extra) == 2, extra
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
        assert extra[0] == "--axis" or "cell c0 (postgres=debian:17): " in err
    assert builds.calls == []
    assert not (tmp_path / "results").exists()
