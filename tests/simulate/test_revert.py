"""The simulator's revert check: the bad endpoint with commits reverted in the modelled
world (each setting's reverted level), and the simulator's bench implementing the three
methods of the revert check (revert, verify_round, verify_tps) with the world's noise,
counted apart from the search."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from kbisect.bisect import verify
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.state import Run, Verification
from kbisect.simulate import bench as simbench
from kbisect.simulate import histories, matrix, methods, tables, tally
from kbisect.simulate.world import Noise, World, machine_offsets


def world(h: histories.History, undone: str = "conflicts", noise: Noise | None = None) -> World:
    return World(h, noise or Noise(), random.Random("revert"), undone=undone)


def linear(*changes: tuple[str, float], n: int = 24) -> histories.History:
    g = Graph.from_parents(histories.linear(n), f"c{n - 1}", ["good"])
    return histories.History(g, tuple(c for c, _ in changes), tuple(e for _, e in changes))


FIXED = (("c10", 0.15), ("c15", -0.15), ("c19", 0.15))  # a regression, its fix, the culprit


# --- the world's revert model -------------------------------------------------------------


def test_reverting_the_step_that_persists_gives_the_good_level_back():
    w = world(linear(("c12", 0.25)))
    assert w.history.tps("c23") == pytest.approx(750.0)
    assert w.reverted(["c12"]) == pytest.approx(1000.0)


@pytest.mark.parametrize("wrong", ["c3", "c11", "c13", "c23"])
def test_a_wrong_answer_reverts_with_no_effect(wrong):
    assert world(linear(("c12", 0.25))).reverted([wrong]) == pytest.approx(750.0)


def test_a_fixed_regression_reverted_does_not_apply_or_has_no_effect():
    h = linear(*FIXED)
    assert h.kinds()["c10"] == "fixed"
    why = world(h, "conflicts").reverted(["c10"])
    assert why == "the revert of c10 does not apply on bad c23"
    assert world(h, "no effect").reverted(["c10"]) == pytest.approx(850.0)
    for undone in ("conflicts", "no effect"):
        w = world(h, undone)
        assert w.reverted(["c19"]) == pytest.approx(1000.0)  # the culprit
        assert w.reverted(["c15"]) == pytest.approx(850.0 * 0.85)  # the fix: slower still
        assert w.reverted(["c4"]) == pytest.approx(850.0)  # no change


def test_an_unknown_undone_setting_is_refused():
    with pytest.raises(ValueError, match="undone 'maybe'"):
        world(linear(("c12", 0.25)), "maybe")


def test_two_culprits_each_reverted_restore_part_and_both_all():
    w = world(linear(("c8", 0.15), ("c16", 0.15)))
    assert w.history.tps("c23") == pytest.approx(722.5)
    assert w.reverted(["c8"]) == w.reverted(["c16"]) == pytest.approx(850.0)
    assert w.reverted(["c8", "c16"]) == pytest.approx(1000.0)


def test_a_merge_reverted_against_its_first_parent_takes_out_its_branch():
    parents = {"good": [], "c0": ["good"], "c1": ["good"], "c2": ["c0", "c1"], "c3": ["c2"]}
    g = Graph.from_parents(parents, "c3", ["good"])
    w = world(histories.History(g, ("c1",), (0.25,)))
    assert w.reverted(["c2"]) == w.reverted(["c1"]) == pytest.approx(1000.0)
    assert w.reverted(["c0"]) == w.reverted(["c3"]) == pytest.approx(750.0)


def test_a_fixed_regression_reverted_with_its_fix_has_no_effect():
    """A merge that brought in a regression and its fix both: out together, no conflict."""
    parents = {"good": [], "c0": ["good"], "c1": ["good"], "c2": ["c1"], "c3": ["c0", "c2"]}
    parents["c4"] = ["c3"]
    g = Graph.from_parents(parents, "c4", ["good"])
    h = histories.History(g, ("c1", "c2", "c4"), (0.15, -0.15, 0.15))
    assert h.kinds() == {"c1": "fixed", "c2": "fix", "c4": "culprit"}
    assert world(h, "conflicts").reverted(["c3"]) == pytest.approx(850.0)


# --- the bench: revert, verify_round, verify_tps ----------------------------------------------


def test_the_bench_builds_a_revert_once_and_refuses_one_that_does_not_apply():
    bench = simbench.Sim(world(linear(*FIXED)))
    assert bench.revert("c10") == "the revert of c10 does not apply on bad c23"
    assert bench.reverts == {}
    assert bench.revert("c19") is None and bench.revert("c19") is None
    assert list(bench.reverts) == ["c19"] and bench.reverts["c19"][1] == ("c19",)
    assert bench.reverts["c19"][0] == pytest.approx(1000.0)
    assert bench.world.builds == 0  # the revert's build is the check's, not the search's


def test_the_passes_earlier_reverts_stay_on_top():
    bench = simbench.Sim(world(linear(("c8", 0.15), ("c16", 0.15))))
    assert bench.revert("c16") is None and bench.revert("c8") is None
    levels = {x: level for x, (level, _) in bench.reverts.items()}
    assert levels == {"c16": pytest.approx(850.0), "c8": pytest.approx(1000.0)}
    assert [commits for _, commits in bench.reverts.values()] == [("c16",), ("c8",)]


def test_verify_rounds_are_drawn_by_the_worlds_noise_and_counted_apart():
    """Each boot of the check is the world's draw at the revert's level or bad's (the
    noise, the outlier boots, the drift clock), one after the other; counted as the
    check's boots, not the search's; verify_tps gives good's stored samples, bad's stored
    and fresh ones, and the revert's."""
    h = linear(("c12", 0.25))
    noise = Noise(0.15, heavy=True, shape="t3")
    bench = simbench.Sim(world(h, noise=noise))
    for _ in range(3):
        bench.take("good"), bench.take("c23")
    bench.start = bench.world.boots
    assert bench.revert("c12") is None
    got = bench.verify_round("c12", ["revert", "bad", "revert", "revert"])
    twin = world(h, noise=noise)
    for _ in range(3):
        twin.boot("good"), twin.boot("c23")
    levels = (1000.0, 750.0, 1000.0, 1000.0)
    assert got == [twin.draw(level, 0)[1] for level in levels]
    assert bench.verify_boots == 4 and bench.boots() == 0 and bench.world.boots == 10
    good, bad, reverted = bench.verify_tps("c12")
    assert good == bench.tps("good") and len(good) == 3
    assert bad == [*bench.tps("c23"), got[1]]
    assert reverted == [got[0], got[2], got[3]]
    assert bench.verify_tps("c4") == (good, bench.tps("c23"), [])


def test_a_pools_verify_round_spreads_over_its_machines():
    h = linear(("c12", 0.25))
    offsets = machine_offsets(2, 0.05, random.Random("m"))
    w = World(h, Noise(cv=0.0), random.Random("p"), offsets=offsets)
    bench = simbench.Sim(w)
    assert bench.revert("c12") is None
    got = [x for x in bench.verify_round("c12", ["revert", "revert"]) if isinstance(x, float)]
    assert sorted(got) == pytest.approx(sorted(1000.0 * o for o in offsets))
    assert w.rounds == 1 and w.machine_log == [1, 0]


# --- the revert check (bisect/verify.py) through the simulator's bench ------------------------


@pytest.mark.parametrize(
    "culprit, undone, kind",
    [
        ("c19", "conflicts", "all"),  # the culprit
        ("c4", "conflicts", "none"),  # no change: a wrong answer
        ("c10", "conflicts", "no-revert"),  # the fixed regression: does not apply
        ("c10", "no effect", "none"),  # ... or applies with no effect
    ],
)
def test_the_revert_check_runs_on_the_bench_and_judges_each_setting(culprit, undone, kind):
    h = linear(("c10", 0.25), ("c15", -0.25), ("c19", 0.25))
    bench = simbench.Sim(world(h, undone, Noise(cv=0.05)))
    for _ in range(5):
        bench.take("good"), bench.take("c23")
    bench.start = bench.world.boots
    opts = methods.Settings().options("c23", "posterior", False)
    run = Run(opts, {}, Path(), "good", "c23", Path())
    run.verification = Verification(culprit)
    v = verify.verify(bench, run, lambda: None)
    assert v.kind == kind
    # the check's boots: the revert's and bad's fresh ones (bad's 5 stored count), apart
    assert bench.boots() == 0 and len(bench.reverts) == (kind != "no-revert")
    if kind == "no-revert":
        assert v.error == "the revert of c10 does not apply on bad c23"
        assert bench.verify_boots == 0
    else:
        fresh = len(v.reverted_tps or ()) + len(v.bad_tps or ()) - 5
        assert bench.verify_boots == fresh >= 2


def test_a_quick_matrix_through_the_real_loop_verifies_the_design_point():
    """The story matrix's design point and two culprits, a few bisections each, through
    the posterior search and the revert check: the tallies have every field the tables
    show, and the design point's answer is verified "all" in most runs."""
    cells = {c.name: c for c in matrix.cells("story")}
    design = matrix.simulate(cells["design"], 8, 1, ["posterior"], methods.Settings())
    t = design["posterior"]
    assert t.runs == 8 and t.wrong_single == t.wrong_confirmed == 0
    assert t.verified_all >= 6 and t.exit_ok >= 6
    assert t.boots_verify >= 2 * t.builds_verify and 6 <= t.builds_verify <= t.answered
    assert t.boots_bisect > 0 and t.named_verified == [0, 0]
    row = tables.story_table({cells["design"]: design}).splitlines()[-1]
    assert f"| {t.verified_all}/{t.answered} (" in row


def test_a_fixed_regression_named_is_caught_by_its_revert_only_where_it_applies():
    """A fix inside the range: the default search mostly names the fixed regression (the
    first change on the way). Where its revert applies (with no effect) the check says
    none and the rest, bisected with it reverted, finds the regression that persists;
    where it does not apply, the culprit/parent re-check confirms the step the fixed
    regression is, and that alone never exits 0."""
    fix = {c.undone: c for c in matrix.cells("story") if c.name.startswith("fix inside")}
    got = {u: matrix.simulate(c, 6, 1, ["posterior"], methods.Settings()) for u, c in fix.items()}
    applies, conflicts = got["no effect"]["posterior"], got["conflicts"]["posterior"]
    assert conflicts.wrong_single >= 3 and conflicts.boots_recheck > 0
    assert conflicts.wrong_confirmed == applies.wrong_confirmed == 0
    assert applies.wrong_single < conflicts.wrong_single and applies.checks.get("none", 0) >= 3
    assert applies.verified_all >= 3  # the rest's answers, verified by their reverts


# --- the settings ------------------------------------------------------------------------------


def test_the_fix_inside_settings_share_histories_and_differ_in_the_revert():
    fix = [c for c in matrix.cells("story") if c.name.startswith("fix inside")]
    assert [c.undone for c in fix] == ["conflicts", "no effect"]
    assert len({c.seeds for c in fix}) == 1
    h = [c.history(random.Random(f"1-{c.seeds}-0")) for c in fix]
    assert h[0] == h[1]


def test_the_tallies_count_the_revert_checks_boots_builds_and_what_it_verified():
    two = linear(("c8", 0.15), ("c16", 0.15))
    t = tally.Tally()
    r = methods.Result(["c8"], "culprit", 0.99, 20, 60, 6, verify_boots=12, verify_builds=2)
    t.add(replace(r, candidates=["c8", "c16"], verified={"c8": "part", "c16": "all"}), two)
    t.add(replace(r, verified={"c8": "part"}), two)
    t.add(methods.Result([], "refused", boots=12), two)
    assert (t.boots_verify, t.builds_verify, t.verified_all) == (24, 4, 1)
    assert t.named_verified == [2, 1] and t.checks == {"part": 2, "all": 1}
    row = tables.story_table({matrix.Cell("two"): {"posterior": t}}).splitlines()[-1]
    assert "| 12.0 | 2.00 |" in row and "| 1/2 (50.0%) | 1/2 (50.0%) | 1, 2, 0, 0, 0 |" in row


def test_a_ranges_revert_reverts_every_member_and_a_rests_check_boots_bad_afresh():
    """A revert of a range's members together restores what each brings; in a rest, the
    check's bad samples are its own (the earlier check's revert samples chose the rest)."""
    h = linear(("c8", 0.15), ("c16", 0.15))
    bench = simbench.Sim(world(h))
    assert bench.revert("c9", ("c7", "c8", "c9")) is None
    assert bench.reverts["c9"][0] == pytest.approx(850.0)
    assert bench.reverts["c9"][1] == ("c7", "c8", "c9")
    for _ in range(3):
        bench.take("good"), bench.take("c23")
    bench.verify_round("c9", ["revert", "revert", "bad"])
    assert len(bench.verify_tps("c9")[1]) == 4  # the endpoint's 3 and the check's 1
    bench.rest("c9", lambda r: [m for m in ("c9", "c8", "c7") if h.graph.is_bad(r, m)])
    assert bench.without == ["c9", "c8", "c7"] and bench.level("c8") == pytest.approx(1000.0)
    assert bench.revert("c16") is None and bench.reverts["c16"][0] == pytest.approx(1000.0)
    assert bench.verify_tps("c16")[1] == []
    bench.verify_round("c16", ["bad"])
    assert len(bench.verify_tps("c16")[1]) == 1
