"""`kbisect compare --boots auto` over a pool of fake machines: a look per round of the
machines (every machine one more pair) with the blocked interval at the level looks.py
gives, the single-target rule's three outcomes, a resumed run looking first, a
quarantined machine's slots moved; the rule's pieces (sequential.rounds, over_pool,
play); the report's per-machine sides and CV warnings within machines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.compare import schedule, sequential
from kbisect.core import reading
from kbisect.core.exceptions import EXIT_NEGATIVE, EXIT_OK
from kbisect.measure import results
from kbisect.stats import blocked, means, ratio, stopping
from tests.fakes import ab_compare_argv, fake_calls, fake_image, fake_pool

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def two(tmp_path: Path, tps_b: float, cv: float, **second: object) -> Path:
    """m1 and m2 (5% faster), A at 1000 tps and B at tps_b on each, noise cv."""
    tps = {"x=1": 1000, "x=2": tps_b}
    return fake_pool(
        tmp_path,
        {
            "m1": {"seed": 1, "cv": cv, "append_tps": tps},
            "m2": {"seed": 2, "cv": cv, "scale": 1.05, "append_tps": tps, **second},
        },
    )


def auto(tmp_path: Path, pool: Path, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "out"
    argv = ab_compare_argv(fake_image(tmp_path / "k"), pool, "--boots", "auto", *extra)
    return cli.main([*argv, "--out", str(out)]), out


def calls(tmp_path: Path, *names: str) -> int:
    """The boots the pool's fake members played."""
    return sum(len(fake_calls(tmp_path / f"{n}.toml")) for n in names)


# --- the rule's pieces -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("boots", "n", "ends", "at"),
    [
        (10, 2, [2, 4, 6, 8, 10], (4, 6, 8, 10)),
        (10, 4, [4, 8, 10], (4, 8, 10)),
        (5, 3, [3, 5], (3, 5)),
        (5, 2, [2, 4, 5], (4, 5)),
    ],
)
def test_a_round_is_a_pair_on_every_machine_and_looks_start_at_least(
    boots: int, n: int, ends: list[int], at: tuple[int, ...]
) -> None:
    names = [f"m{j}" for j in range(n)]
    sides, where = schedule.order(boots, machines=names)
    assert sequential.rounds(where) == ends
    # after each round every machine has measured both sides equally often
    for end in ends:
        took = Counter(zip(where[: 2 * end], sides[: 2 * end], strict=True))
        assert all(took[(m, "A")] == took[(m, "B")] for m in names)
    rule = sequential.over_pool(stopping.Rule.upto(boots), where)
    assert rule.at == at and rule.looks == len(at)
    assert rule.level == pytest.approx(1 - 0.05 / len(at))  # looks.py: α/K, two-sided


def test_a_pool_rule_with_looks_out_of_order_is_refused() -> None:
    with pytest.raises(stopping.BadStoppingRule, match="must rise"):
        stopping.Rule(at=(6, 4, 10)).check()
    with pytest.raises(stopping.BadStoppingRule, match="must rise"):
        stopping.Rule(at=(4, 8)).check()  # the last look is not at the most boots


def halves(n: int) -> tuple[list[float], list[float], None]:
    return [1000.0 + k for k in range(n)], [500.0 + k for k in range(n)], None


def test_play_takes_a_round_then_looks_and_stops_when_final() -> None:
    rule = stopping.Rule(at=(4, 6, 8, 10))
    taken: list[tuple[int, int]] = []
    stop, reached = sequential.play(
        rule, [20], 0, lambda lo, hi: taken.append((lo, hi)), lambda: halves(taken[-1][1] // 2)
    )
    assert taken == [(0, 8)]  # the rounds before the first look in one go
    assert stop is not None and (stop.kind, stop.look, stop.n, reached) == (
        stopping.SIGNIFICANT,
        1,
        4,
        8,
    )


def test_play_runs_every_round_when_nothing_settles() -> None:
    rule = stopping.Rule(at=(4, 6, 8, 10))
    taken: list[tuple[int, int]] = []

    def wide() -> sequential.Looked:
        n = taken[-1][1] // 2
        return [1000.0, 800.0] * (n // 2), [900.0, 1100.0] * (n // 2), None

    stop, reached = sequential.play(rule, [20], 0, lambda lo, hi: taken.append((lo, hi)), wide)
    assert taken == [(0, 8), (8, 12), (12, 16), (16, 20)]
    assert stop is not None and (stop.kind, stop.look, reached) == (stopping.UNDECIDED, 4, 20)


def test_a_resumed_pool_run_looks_before_booting_at_a_looks_end() -> None:
    rule = stopping.Rule(at=(4, 6, 8, 10))
    taken: list[tuple[int, int]] = []
    stop, reached = sequential.play(
        rule, [20], 8, lambda lo, hi: taken.append((lo, hi)), lambda: halves(4)
    )
    assert (
        stop is not None
        and taken == []
        and (stop.kind, stop.look, reached) == (stopping.SIGNIFICANT, 1, 8)
    )
    # resumed inside a round: the rest of that round, then its look
    stop, reached = sequential.play(
        rule, [20], 10, lambda lo, hi: taken.append((lo, hi)), lambda: halves(6)
    )
    assert stop is not None and taken == [(10, 12)] and (stop.look, reached) == (2, 12)


def test_a_look_uses_the_given_interval_at_the_rules_level() -> None:
    rule = stopping.Rule(at=(4, 6, 8, 10))
    seen: list[float] = []

    def interval(a: object, b: object, level: float) -> means.RatioCI:
        seen.append(level)
        return means.RatioCI(0.5, 0.45, 0.55, blocked.METHOD, level, 5.0)

    stop = stopping.decide([1.0] * 4, [1.0] * 4, rule, interval=interval, look=2)
    assert seen == [pytest.approx(0.9875)] and (stop.kind, stop.look) == ("significant", 2)
    assert "the 98.75% CI within machines [0.450, 0.550]" in stopping.reason(stop, rule)

    def no_machine_both(a: object, b: object, level: float) -> means.RatioCI:
        raise means.StatsError("no machine measured both sides")

    stop = stopping.decide([1.0] * 4, [1.0] * 4, rule, interval=no_machine_both, look=1)
    assert stop is not None and (stop.kind, stop.ratio) == (stopping.MORE, None)


# --- the CLI over a pool -----------------------------------------------------------------


def test_a_halving_over_two_machines_stops_at_the_first_round_look(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = auto(tmp_path, two(tmp_path, 500, 0.02))
    assert code == EXIT_NEGATIVE
    assert "is not used" not in capsys.readouterr().err  # no fallback to a fixed count
    plan = json.loads((out / "plan.json").read_text())
    assert (plan["boots"], plan["max_boots"], plan["look_at"]) == ("auto", 10, [4, 6, 8, 10])
    summary = results.load_summary(out)
    seq = summary["sequential"]
    assert (seq["stop"], seq["n"], seq["look"], seq["looks"]) == ("significant", 4, 1, 4)
    assert seq["look_at"] == [4, 6, 8, 10]
    assert summary["confidence"] == pytest.approx(1 - 0.05 / 4)
    assert summary["verdict"]["ratio"]["method"] == blocked.METHOD
    assert summary["order"] == plan["order"][:8]  # two rounds of the plan's 20 slots
    assert seq["reason"].startswith("stopped after 4 boots a side (look 1): the 98.75% CI within")
    stored = results.load_samples(out)
    took = Counter((s.target["machine"], s.label) for s in stored)
    assert took == {(m, x): 2 for m in ("m1", "m2") for x in "AB"}
    assert calls(tmp_path, "m1", "m2") == 8  # no boot past the stop
    report = (out / "report.md").read_text()
    assert "Sequential (`--boots auto`): stopped after 4 boots a side (look 1)" in report


def test_no_effect_over_a_pool_runs_every_round_undecided(tmp_path: Path) -> None:
    code, out = auto(tmp_path, two(tmp_path, 1000, 0.05), "--max-boots", "5")
    assert code == EXIT_OK
    seq = results.load_summary(out)["sequential"]
    assert (seq["stop"], seq["n"], seq["look"], seq["look_at"]) == ("undecided", 5, 2, [4, 5])
    assert len(results.load_samples(out)) == 10
    assert "undecided after 5 boots a side (look 2)" in (out / "report.md").read_text()


def test_tight_equal_sides_over_a_pool_stop_as_equivalent(tmp_path: Path) -> None:
    code, out = auto(tmp_path, two(tmp_path, 1000, 0.002))
    assert code == EXIT_OK
    seq = results.load_summary(out)["sequential"]
    assert (seq["stop"], seq["n"]) == ("equivalent", 4)
    assert "lies within ±2%" in seq["reason"]


def test_a_resumed_pool_run_looks_first_then_takes_only_what_the_rule_needs(
    tmp_path: Path,
) -> None:
    pool = two(tmp_path, 500, 0.02)
    code, out = auto(tmp_path, pool)
    assert code == EXIT_NEGATIVE
    # interrupted after its last sample, before its summary: the resume looks first and
    # boots nothing
    samples = results.sample_paths(out)
    assert len(samples) == 8
    for p in (out / "summary.json", out / "report.md"):
        p.unlink()
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_NEGATIVE
    assert len(results.sample_paths(out)) == 8 and calls(tmp_path, "m1", "m2") == 8
    assert results.load_summary(out)["sequential"]["n"] == 4
    # interrupted inside the second round: the rest of that round, then the look
    dropped = sorted(json.loads(p.read_text())["slot"] for p in samples[-2:])
    for p in [*samples[-2:], out / "summary.json", out / "report.md"]:
        p.unlink()
    assert cli.main(["compare", "--resume", str(out)]) == EXIT_NEGATIVE
    stored = results.load_samples(out)
    assert sorted(s.data["slot"] for s in stored) == list(range(8))
    assert all(4 <= slot < 8 for slot in dropped) and calls(tmp_path, "m1", "m2") == 10
    summary = results.load_summary(out)
    assert summary["resumed"] == 2 and summary["sequential"]["look"] == 1


def test_a_quarantined_machines_rounds_go_to_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = auto(tmp_path, two(tmp_path, 500, 0.02, mode="panic"), "--retries", "0")
    assert code == EXIT_NEGATIVE
    assert "machine m2 quarantined" in capsys.readouterr().err
    stored = results.load_samples(out)
    assert {s.machine for s in stored if s.status == "ok"} == {"m1"}
    seq = results.load_summary(out)["sequential"]
    assert seq["stop"] == "significant" and seq["look_at"] == [4, 6, 8, 10]


def test_one_machine_in_a_pool_keeps_the_single_target_rule(tmp_path: Path) -> None:
    tps = {"x=1": 1000, "x=2": 500}
    pool = fake_pool(tmp_path, {"m1": {"seed": 1, "cv": 0.02, "append_tps": tps}})
    code, out = auto(tmp_path, pool)
    assert code == EXIT_NEGATIVE
    plan = json.loads((out / "plan.json").read_text())
    assert "look_at" not in plan and "machines" not in plan
    seq = results.load_summary(out)["sequential"]
    assert (seq["n"], seq["looks"]) == (3, 8) and "look_at" not in seq


@pytest.mark.parametrize("look_at", [[], [2, 10], [4, 6, 8], [6, 4, 10], ["4", 10]])
def test_a_plan_with_wrong_looks_names_the_field(tmp_path: Path, look_at: object) -> None:
    plan = json.loads((ROOT / "docs" / "examples" / "demo" / "plan.json").read_text())
    order = schedule.order(10)[0]
    rule = {"boots": "auto", "max_boots": 10, "least": 3, "look_at": look_at, "order": order}
    (tmp_path / "plan.json").write_text(json.dumps({**plan, **rule}))
    with pytest.raises(reading.CorruptFile, match="look_at"):
        schedule.load(tmp_path)


# --- the report over a pool --------------------------------------------------------------


def test_the_cv_warnings_are_within_machines() -> None:
    a = [1000.0, 1010.0, 2000.0, 2020.0]  # two machines 2x apart, 1% noise within
    b = [1005.0, 995.0, 2010.0, 1990.0]
    where = (["m1", "m1", "m2", "m2"], ["m1", "m1", "m2", "m2"])
    mixed = ratio.verdict(a, b)
    assert any("side A: CV" in w for w in mixed.warnings)  # the machines' spread
    within = ratio.verdict(a, b, blocks=where)
    assert not any("CV" in w for w in within.warnings)
    noisy = ratio.verdict([1000.0, 1300.0, 2000.0, 2020.0], b, blocks=where)
    assert next(w for w in noisy.warnings if "CV" in w).startswith("side A on m1: CV 18.4%")


def test_a_pool_report_shows_each_side_per_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """m2 twice as fast as m1: mixed, each side's CV would be about 40%."""
    code, out = auto(tmp_path, two(tmp_path, 1000, 0.01, scale=2.0), "--max-boots", "4")
    assert code == EXIT_OK
    report = (out / "report.md").read_text()
    assert "| machine | boots ok / failed |" in report
    rows = [line for line in report.splitlines() if line.startswith(("| A |", "| B |"))]
    named = [row.split(" | ")[4] for row in rows]  # each side per machine, same order
    assert sorted(named[:2]) == ["m1", "m2"] and named[2:] == named[:2]
    assert "CV" not in report.split("## Warnings")[1].split("##")[0]
    capsys.readouterr()
    assert cli.main(["report", str(out), "--format", "text"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "  A on m1: " in text and "  B on m2: " in text
    assert "  A: " not in text.split("kernels:")[0]  # no figures mixing the machines
