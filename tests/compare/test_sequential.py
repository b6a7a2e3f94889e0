"""`kbisect compare --boots auto` on the fake target: it stops early at a big effect, runs
to --max-boots at none, says how it stopped, resumes by the same rule; its options."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.compare import schedule
from kbisect.core import reading
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK, EXIT_USER
from kbisect.measure import results
from kbisect.stats import means, stopping
from tests.fakes import ab_compare_argv, fake_calls, fake_image, fake_target, start_driver

ROOT = Path(__file__).resolve().parents[2]
LEVEL = stopping.Rule().level  # 3..10 boots a side: 8 looks, each at 99.375%


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def auto(tmp_path: Path, tps_b: float, cv: float, *extra: str) -> tuple[int, Path, Path]:
    """An auto compare of A at 1000 tps against B at tps_b: its exit, run dir, target."""
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": tps_b}, cv=cv)
    out = tmp_path / "cmp"
    argv = ab_compare_argv(fake_image(tmp_path / "k"), target, "--boots", "auto", *extra)
    return cli.main([*argv, "--out", str(out)]), out, target


def test_a_halving_stops_after_three_boots_a_side(tmp_path: Path, cache: None) -> None:
    code, out, target = auto(tmp_path, 500, 0.02)
    assert code == EXIT_NEGATIVE and len(fake_calls(target)) == 6
    summary = results.load_summary(out)  # validated against the schema
    assert summary["order"] == schedule.order(3)[0]  # the slots taken, not the 20 planned
    assert summary["confidence"] == pytest.approx(LEVEL)
    assert summary["verdict"]["kind"] == "regression"
    assert summary["verdict"]["ratio"]["confidence"] == pytest.approx(LEVEL)
    seq = summary["sequential"]
    assert (seq["stop"], seq["n"], seq["look"], seq["max_boots"], seq["least"]) == (
        "significant",
        3,
        1,
        10,
        3,
    )
    assert seq["reason"].startswith("stopped after 3 boots a side (look 1): the 99.38% CI [")
    plan = json.loads((out / "plan.json").read_text())
    assert (plan["boots"], plan["max_boots"], plan["least"]) == ("auto", 10, 3)
    assert plan["order"] == schedule.order(10)[0]
    report = (out / "report.md").read_text()
    assert "Sequential (`--boots auto`): stopped after 3 boots a side" in report
    assert "99.375% CI" in report
    assert "interval is wide below" not in report  # no "use --boots 5": it was settled


def test_the_text_report_says_how_it_stopped(
    tmp_path: Path, cache: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert auto(tmp_path, 500, 0.02)[0] == EXIT_NEGATIVE
    out = tmp_path / "cmp"
    capsys.readouterr()
    assert cli.main(["report", str(out), "--format", "text"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "stopped after 3 boots a side (look 1)" in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 72


def test_no_effect_runs_to_max_boots_undecided(tmp_path: Path, cache: None) -> None:
    code, out, target = auto(tmp_path, 1000, 0.05, "--max-boots", "4")
    assert code == EXIT_OK and len(fake_calls(target)) == 8
    summary = results.load_summary(out)
    assert summary["order"] == schedule.order(4)[0]
    assert summary["verdict"]["kind"] == means.NO_DIFFERENCE
    seq = summary["sequential"]
    assert (seq["stop"], seq["n"], seq["looks"]) == ("undecided", 4, 2)
    assert summary["confidence"] == pytest.approx(1 - 0.05 / 2)
    assert "undecided after 4 boots a side (look 2)" in (out / "report.md").read_text()


def test_tight_equal_sides_stop_as_equivalent(tmp_path: Path, cache: None) -> None:
    code, out, target = auto(tmp_path, 1000, 0.002)
    assert code == EXIT_OK and len(fake_calls(target)) == 6
    seq = results.load_summary(out)["sequential"]
    assert seq["stop"] == "equivalent"
    assert "no difference larger than 2%" in seq["reason"]


def no_compare_boots(tmp_path: Path) -> Path:
    """The smoke scenario without its [compare] section."""
    text = (ROOT / "harness" / "scenarios" / "smoke.toml").read_text()
    folder = tmp_path / "scen"
    folder.mkdir()
    (folder / "smoke.toml").write_text(text.replace("[compare]\nboots = 3\n", ""))
    return folder / "smoke.toml"


def test_auto_is_the_default_only_without_a_count(tmp_path: Path, cache: None) -> None:
    target = fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 500}, cv=0.02)
    image, scen = fake_image(tmp_path / "k"), no_compare_boots(tmp_path)
    sides = ["--append-a", "x=1", "--append-b", "x=2", "--target", str(target)]
    base = ["compare", "--kernel", str(image), *sides]
    out = tmp_path / "default"
    assert cli.main([*base, "--scenario", str(scen), "--out", str(out)]) == EXIT_NEGATIVE
    assert results.load_summary(out)["sequential"]["stop"] == "significant"
    out = tmp_path / "scenario"  # smoke sets [compare] boots = 3: fixed, as before
    assert cli.main([*base, "--scenario", "smoke", "--out", str(out)]) == EXIT_NEGATIVE
    summary = results.load_summary(out)
    assert "sequential" not in summary and summary["confidence"] == 0.95
    assert "boots" not in json.loads((out / "plan.json").read_text())
    out = tmp_path / "fixed"  # --boots N is fixed even where auto would be the default
    argv = [*base, "--scenario", str(scen), "--boots", "4", "--out", str(out)]
    assert cli.main(argv) == EXIT_NEGATIVE
    assert results.load_summary(out)["order"] == schedule.order(4)[0]
    out = tmp_path / "most"  # --max-boots alone means auto, over the scenario's count
    argv = [*base, "--scenario", "smoke", "--max-boots", "5", "--out", str(out)]
    assert cli.main(argv) == EXIT_NEGATIVE
    assert results.load_summary(out)["sequential"]["max_boots"] == 5


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--boots", "0"], "--boots: 0 is not in 2..1000 (or auto)"),
        (["--boots", "automatic"], "--boots: 'automatic' is not a whole number (or auto)"),
        (["--boots", "auto", "--max-boots", "1"], "--max-boots: 1 is not in 2..1000"),
        (["--max-boots", "x"], "--max-boots: 'x' is not a whole number"),
        (["--max-boots", "6"], "--max-boots goes with --boots auto, not --boots 3"),
    ],
)
def test_bad_sequential_options_are_one_line_and_exit_2(
    tmp_path: Path, cache: None, capsys: pytest.CaptureFixture[str], extra: list[str], words: str
) -> None:
    target = fake_target(tmp_path)
    assert cli.main(ab_compare_argv(fake_image(tmp_path / "k"), target, *extra)) == EXIT_USER
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert fake_calls(target) == []


def test_a_killed_auto_compare_resumes_by_the_same_rule(
    tmp_path: Path, cache: None, capsys: pytest.CaptureFixture[str]
) -> None:
    image, out, pid_file = fake_image(tmp_path / "k"), tmp_path / "cmp", tmp_path / "pid"
    target = fake_target(
        tmp_path,
        append_tps={"x=1": 1000, "x=2": 500},
        cv=0.02,
        kill_at=4,
        kill_pid_file=str(pid_file),
    )
    argv = ab_compare_argv(image, target, "--boots", "auto", "--out", str(out))
    assert start_driver(argv, pid_file).wait(timeout=120) == -signal.SIGKILL
    fake_target(tmp_path, append_tps={"x=1": 1000, "x=2": 500}, cv=0.02)
    assert len(results.load_samples(out)) == 3
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_NEGATIVE
    summary = results.load_summary(out)
    assert summary["resumed"] == 1 and summary["sequential"]["n"] == 3
    assert [s.label for s in results.load_samples(out)] == schedule.order(3)[0]
    assert len(fake_calls(target)) == 7  # 6 slots, the killed one taken again
    # interrupted after its last sample, before its summary: the resume looks first
    (out / "summary.json").unlink()
    (out / "report.md").unlink()
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_NEGATIVE
    assert len(fake_calls(target)) == 7 and results.load_summary(out)["sequential"]["n"] == 3
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_USER
    assert "has finished" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"boots": "many"}, 'boots must be auto when given, got "many"'),
        ({"boots": "auto"}, "max_boots is missing"),
        ({"boots": "auto", "max_boots": 10, "least": 1}, "least must be 2 to 10, got 1"),
        ({"boots": "auto", "max_boots": 4, "least": 3}, "order must hold 2 x max_boots (4)"),
    ],
)
def test_a_plan_with_a_wrong_rule_names_the_field(
    tmp_path: Path, fields: dict[str, object], problem: str
) -> None:
    plan = json.loads((ROOT / "docs" / "examples" / "demo" / "plan.json").read_text())
    (tmp_path / "plan.json").write_text(json.dumps({**plan, **fields}))
    with pytest.raises(reading.CorruptFile) as info:
        schedule.load(tmp_path)
    assert problem in str(info.value)
