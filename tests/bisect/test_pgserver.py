"""`kbisect bisect --pg-build SPEC --pg-patch FILE`: a patched PostgreSQL server on every
revision. Checked before anything is built (exit 2, one line), built once before the
bisection starts (pgbuild/build.py stood in by tests/pgbuild/fakebuild.py), and run by
its key on every step: the git method's steps (separate processes, where the stand-in is
not) get `--set postgres.build=KEY` and build nothing. `kbisect bisect-step` takes the
same options and builds through the cache itself."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from kbisect.bisect import driver, request, state
from kbisect.bisect.git import step as bisect_step
from kbisect.commands import bisect as bisect_args
from kbisect.commands import bisect_step as step_command
from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_USER
from kbisect.measure import results
from tests.bisect.test_bisect import args, env, history, kbisect, run_dirs, summary
from tests.bisect.test_step import at, repo, step
from tests.bisect.test_step import env as step_env
from tests.fakes import fake_calls
from tests.pgbuild import fakebuild
from tests.pgbuild.test_pgbuild import BATCH, pg_repo

__all__ = ["env", "repo", "step_env"]  # fixtures, used by name


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> fakebuild.Builds:
    return fakebuild.install(monkeypatch)


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    path = tmp_path / "batch.mbox"
    path.write_text(BATCH)
    return path


def options(batch: Path, **given: object) -> request.Options:
    base = request.Options("/t", "v1", "v2", "smoke", pg_build="debian:17")
    return replace(base, pg_patches=(str(batch),), **given)  # type: ignore[arg-type]


def test_the_reproduce_line_asks_for_the_server_and_every_step_gets_its_key(
    batch: Path,
) -> None:
    opts = options(batch)
    ns = cli.build_parser().parse_args(opts.argv())
    assert (ns.pg_build, ns.pg_patch) == ("debian:17", [batch])
    assert bisect_args.options_from_args(ns) == opts
    built = replace(opts, pg_sets=("postgres.build=pg17-0123456789ab", "postgres.major=17"))
    assert built.argv() == opts.argv()  # the line asks for the server, not its key
    step_argv = built.step_argv(800.0, Path("/s"), 10)
    assert "--pg-build" not in step_argv and "--pg-patch" not in step_argv
    parser = argparse.ArgumentParser()
    step_command.configure(parser)
    parsed = parser.parse_args(step_argv)
    assert parsed.set == ["postgres.build=pg17-0123456789ab", "postgres.major=17"]
    assert parsed.pg_build is None
    assert built.overrides() == ["postgres.build=pg17-0123456789ab", "postgres.major=17"]
    assert request.Options.from_dict(built.as_dict()) == built
    plain = request.Options(None, "v1", "v2", "smoke")
    assert not {"pg_build", "pg_patches", "pg_sets"} & set(plain.as_dict())  # as before


def test_the_server_is_built_once_and_a_resume_builds_none(
    batch: Path, builds: fakebuild.Builds
) -> None:
    opts = options(batch)
    built = driver.build_server(opts)
    assert builds.calls == [("debian:17", (batch,))]
    key = built.pg_sets[0].removeprefix("postgres.build=")
    assert built.pg_sets == (f"postgres.build={key}", "postgres.major=17")
    assert driver.build_server(built) is built and len(builds.calls) == 1
    plain = request.Options(None, "v1", "v2", "smoke")
    assert driver.build_server(plain) is plain and len(builds.calls) == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pg-patch", "{batch}"], "--pg-patch needs a PostgreSQL source to patch: --pg-build"),
        (["--pg-build", "debian:16"], "--pg-build debian:16: no Debian suite"),
        (["--pg-build", "debian:17", "--pg-patch", "{nosuch}"], "nosuch.patch"),
        (["--pg-build", "debian:17", "--set", "postgres.source=host"], 'source = "image"'),
    ],
)
def test_bad_pg_options_are_one_line_before_any_build_or_run(
    env: dict[str, Path],
    batch: Path,
    builds: fakebuild.Builds,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    shas = history(env["repo"], 4, 3)
    where = {"{batch}": str(batch), "{nosuch}": str(batch.parent / "nosuch.patch")}
    given = [where.get(x, x) for x in extra]
    assert kbisect(*args(env, shas[1], shas[-1], *given)) == EXIT_USER
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("[kbisect")]
    assert len(err) == 1 and message in err[0], err
    assert builds.calls == [] and run_dirs(env["results"]) == []
    assert fake_calls(env["log"]) == []


@pytest.mark.parametrize("method", ["git", "posterior"])
def test_every_revision_runs_the_server_built_once(
    env: dict[str, Path],
    batch: Path,
    builds: fakebuild.Builds,
    capsys: pytest.CaptureFixture[str],
    method: str,
) -> None:
    shas = history(env["repo"], 8, 5)
    extra = ["--pg-build", "debian:17", "--pg-patch", str(batch), "--recheck-samples", "3"]
    assert kbisect(*args(env, shas[1], shas[-1], *extra, method=method)) == 0
    assert f"first bad commit: {shas[5]}" in capsys.readouterr().out
    assert builds.calls == [("debian:17", (batch,))]  # once, for every step
    s = summary(env["results"])
    key = s["options"]["pg_sets"][0].removeprefix("postgres.build=")
    assert s["options"]["pg_sets"] == [f"postgres.build={key}", "postgres.major=17"]
    assert f"--pg-build debian:17 --pg-patch {batch}" in s["command"]
    (run,) = run_dirs(env["results"])
    store = Path(state.load(run).store)
    taken = [x for c in store.iterdir() if c.is_dir() for x in results.load_samples(c)]
    assert len(taken) >= 4 + 3
    servers = {
        (x.settings["postgres"].get("build"), x.settings["postgres"]["major"]) for x in taken
    }
    assert servers == {(key, 17)}


def test_a_step_builds_its_server_through_the_cache(
    repo: list[str], step_env: dict[str, Path], builds: fakebuild.Builds, batch: Path
) -> None:
    at(repo[1])
    extra = ["--pg-build", "debian:17", "--pg-patch", str(batch)]
    assert step(step_env["scenario"], *extra) == bisect_step.GOOD
    assert builds.calls == [("debian:17", (batch,))]
    taken = results.load_samples(step_env["store"] / repo[1])
    assert {x.settings["postgres"]["build"] for x in taken} == set(builds.keys)
    assert step(step_env["scenario"], "--pg-patch", str(batch)) == bisect_step.ABORT
    booted = ["--booted", "--kernel", str(batch), *extra]
    assert step(step_env["scenario"], *booted) == bisect_step.ABORT
    assert len(builds.calls) == 1  # neither got as far as a build


def test_a_tree_is_saved_by_its_absolute_path_and_revision(
    tmp_path: Path, batch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = pg_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    given = request.Options(None, "v1", "v2", "smoke", pg_build="postgres@REL_17_6")
    ns = cli.build_parser().parse_args(given.argv())
    assert bisect_args.options_from_args(ns).pg_build == f"{repo}@REL_17_6"
