"""`kbisect compare --boots auto` with a noise prior, on the fake target: an earlier run of
the scenario on the same machine gives the prior (chosen once, after the first pair, and
recorded in the plan), the first look is at 2 boots a side, the reports say it; off, or
no earlier run, is today's rule; a resume reads the plan's prior, not the index."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.compare import schedule, sequential
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK, EXIT_USER
from kbisect.db import index
from kbisect.measure import results
from kbisect.stats import prior as priors
from kbisect.stats import ratio
from tests.fakes import ab_compare_argv, fake_calls, fake_image, fake_target, start_driver


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def _argv(tmp_path: Path, target: Path, out: str, *extra: str) -> list[str]:
    image = fake_image(tmp_path / "k")
    argv = ab_compare_argv(image, target, "--boots", "auto", *extra)
    return [*argv, "--out", str(tmp_path / out)]


def _history(tmp_path: Path) -> Path:
    """An earlier run of the scenario on the fake machine: 4 boots a side, no effect."""
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 1000}, cv=0.02)
    assert cli.main(_argv(tmp_path, target, "earlier", "--max-boots", "4")) == EXIT_OK
    seq = results.load_summary(tmp_path / "earlier")["sequential"]
    assert seq["least"] == 3 and seq["noise_prior"]["none"].startswith(
        "no earlier runs of this scenario on this machine"
    )
    return target


def test_an_earlier_run_gives_the_prior_and_a_halving_stops_at_two(
    tmp_path: Path, cache: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _history(tmp_path)
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 500}, cv=0.02)
    calls = len(fake_calls(target))
    assert cli.main(_argv(tmp_path, target, "now")) == EXIT_NEGATIVE
    assert len(fake_calls(target)) - calls == 4  # 2 boots a side
    out = tmp_path / "now"
    plan = json.loads((out / "plan.json").read_text())
    assert plan["least"] == 2
    prior = priors.Prior.from_dict(plan["noise_prior"])
    assert (prior.df, prior.pooled_df, prior.boots, prior.runs) == (6, 6, 8, 1)
    assert str(index.db_path()) in prior.source
    seq = results.load_summary(out)["sequential"]  # validated against the schema
    assert (seq["stop"], seq["n"], seq["look"], seq["least"], seq["looks"]) == (
        "significant",
        2,
        1,
        2,
        9,
    )
    assert seq["noise_prior"] == plan["noise_prior"]
    line = prior.line()
    assert line.startswith("noise prior: CV ")
    assert line.endswith("over ν0 = 6 df from 8 boots of 1 earlier run")
    assert seq["reason"].endswith(f"; {line}")
    summary = results.load_summary(out)
    assert summary["verdict"]["ratio"]["method"] == priors.METHOD
    assert line in " ".join((out / "report.md").read_text().split())
    capsys.readouterr()
    assert cli.main(["report", str(out), "--format", "text"]) == EXIT_OK
    text = capsys.readouterr().out
    assert line in " ".join(text.split()) and max(len(x) for x in text.splitlines()) <= 72


def test_off_is_todays_rule_and_says_so(tmp_path: Path, cache: None) -> None:
    _history(tmp_path)
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 500}, cv=0.02)
    assert cli.main(_argv(tmp_path, target, "off", "--noise-prior", "off")) == EXIT_NEGATIVE
    plan = json.loads((tmp_path / "off" / "plan.json").read_text())
    assert plan["least"] == 3
    assert plan["noise_prior"] == {"none": "turned off (--noise-prior off)"}
    seq = results.load_summary(tmp_path / "off")["sequential"]
    assert seq["n"] == 3 and "prior_dropped" not in seq
    assert seq["reason"].endswith("; noise prior: none (turned off (--noise-prior off))")


def test_a_bad_value_is_one_line_and_exit_2(
    tmp_path: Path, cache: None, capsys: pytest.CaptureFixture[str]
) -> None:
    target = fake_target(tmp_path)
    assert cli.main(_argv(tmp_path, target, "x", "--noise-prior", "on")) == EXIT_USER
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'on' is not one of auto, off" in err[0]
    assert fake_calls(target) == []


def test_a_resume_reads_the_plans_prior_not_the_index(tmp_path: Path, cache: None) -> None:
    calls = len(fake_calls(_history(tmp_path)))  # the fake counts calls across runs
    pid_file = tmp_path / "pid"
    kill = fake_target(
        tmp_path,
        append_tps={"x=1": 1000, "x=2": 500},
        cv=0.02,
        kill_at=calls + 3,  # after the first pair, when the prior is chosen
        kill_pid_file=str(pid_file),
    )
    assert start_driver(_argv(tmp_path, kill, "killed"), pid_file).wait(timeout=120) == (
        -signal.SIGKILL
    )
    out = tmp_path / "killed"
    chosen = json.loads((out / "plan.json").read_text())
    assert chosen["least"] == 2 and isinstance(chosen["noise_prior"], dict)
    index.db_path().unlink()  # the index is gone: the plan's prior must be the one used
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 500}, cv=0.02)
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_NEGATIVE
    seq = results.load_summary(out)["sequential"]
    assert seq["noise_prior"] == chosen["noise_prior"] and seq["n"] == 2
    assert len(fake_calls(target)) - calls == 5  # 4 slots, the killed one taken again
    plan = schedule.load(out)
    assert plan.rule == sequential.rule_of(chosen)


def test_a_plan_with_a_bad_prior_names_the_field(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    plan = json.loads((root / "docs" / "examples" / "demo" / "plan.json").read_text())
    bad = {"boots": "auto", "max_boots": 5, "least": 2, "order": schedule.order(5)[0]}
    (tmp_path / "plan.json").write_text(json.dumps({**plan, **bad, "noise_prior": {"var": -1}}))
    with pytest.raises(Exception, match="noise_prior must be auto, a prior or none"):
        schedule.load(tmp_path)


def test_the_report_recomputes_with_the_recorded_prior_and_its_guard() -> None:
    quiet = priors.Prior(0.0004, 8, 30, 40, 4, "test")  # CV 2%
    summary = {"sequential": {"least": 2, "noise_prior": quiet.as_dict()}}
    a, b = [1000.0, 1010.0, 995.0], [500.0, 505.0, 498.0]
    got = sequential.recorded_interval(summary, a, b)
    assert got is not None and got(a, b, 0.95) == ratio.ratio_ci(a, b, 0.95, prior=quiet)
    noisy_a, noisy_b = [1000.0, 1200.0, 850.0], [500.0, 600.0, 420.0]
    assert sequential.recorded_interval(summary, noisy_a, noisy_b) is None  # dropped
    none = {"sequential": {"least": 3, "noise_prior": {"none": "turned off"}}}
    assert sequential.recorded_interval(none, a, b) is None
    assert sequential.recorded_interval({}, a, b) is None  # a fixed count
