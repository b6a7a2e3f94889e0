"""The simulator's noise models, histories with several changes, the real residuals and
the story tallies: moments of seeded draws, levels, the committed file, counts."""

from __future__ import annotations

import json
import math
import random
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.story import Change, Story
from kbisect.simulate import bench as simbench
from kbisect.simulate import histories, matrix, methods, residuals, tables, tally
from kbisect.simulate.world import Noise, World
from tests import scripts

ROOT = Path(__file__).resolve().parents[2]


def one_step(n: int = 24, culprit: str = "c12", effect: float = 0.25) -> histories.History:
    g = Graph.from_parents(histories.linear(n), f"c{n - 1}", ["good"])
    return histories.History(g, (culprit,), (effect,))


def relative(world: World, commit: str, k: int) -> list[float]:
    level = world.history.tps(commit)
    return [world.boot(commit)[1] / level for _ in range(k)]


# --- noise models -----------------------------------------------------------------------


def test_t3_noise_has_the_cv_and_the_tails_of_t3():
    world = World(one_step(), Noise(cv=0.15, shape="t3"), random.Random(1))
    x = relative(world, "good", 40000)
    q1, _, q3 = statistics.quantiles(x, n=4)
    # t(3): interquartile range 2 x 0.7649, sd sqrt(3); scaled by cv / sqrt(3)
    assert q3 - q1 == pytest.approx(2 * 0.7649 * 0.15 / math.sqrt(3), rel=0.04)
    assert statistics.pstdev(x) == pytest.approx(0.15, rel=0.12)
    assert statistics.median(x) == pytest.approx(1.0, abs=0.005)
    # heavier tails than a normal of that CV: beyond 3 sd, ~1.4% not 0.27%
    far = sum(abs(v - 1) > 3 * 0.15 for v in x) / len(x)
    assert 0.008 < far < 0.025
    assert min(x) >= 0.1


def test_outlier_boots_are_five_percent_at_half_speed():
    world = World(one_step(), Noise(cv=0.01, heavy=True), random.Random(2))
    x = relative(world, "good", 20000)
    slow = [v for v in x if v < 0.75]
    assert len(slow) / len(x) == pytest.approx(0.05, abs=0.006)
    assert statistics.mean(slow) == pytest.approx(0.5, abs=0.01)


def test_noise_per_side_gives_the_fast_level_its_own_cv():
    h = one_step()
    world = World(h, Noise(cv=0.07, fast_cv=0.13), random.Random(3))
    assert statistics.stdev(relative(world, "c3", 20000)) == pytest.approx(0.13, rel=0.04)
    assert statistics.stdev(relative(world, h.graph.bad, 20000)) == pytest.approx(0.07, rel=0.04)


def test_a_fixed_level_back_at_the_good_one_is_fast_too():
    h = histories.fix_inside(random.Random(4), "linear", 24, 24, 0.0, 0.15)
    world = World(h, Noise(cv=0.07, fast_cv=0.13), random.Random(4))
    reg, fix, _ = h.culprits
    assert statistics.stdev(relative(world, fix, 10000)) == pytest.approx(0.13, rel=0.05)
    assert statistics.stdev(relative(world, reg, 10000)) == pytest.approx(0.07, rel=0.05)


def test_stale_endpoints_are_slower_only_until_the_endpoint_check_ends():
    h = one_step()
    world = World(h, Noise(cv=0.0, stale=0.10), random.Random(5))
    assert world.boot("good")[1] == pytest.approx(900.0)
    assert world.boot(h.graph.bad)[1] == pytest.approx(675.0)
    world.endpoints_done()
    assert world.boot("good")[1] == pytest.approx(1000.0)
    assert world.boot("c3")[1] == pytest.approx(1000.0)


def test_the_endpoint_check_of_every_method_ends_the_stale_state():
    h = one_step()
    world = World(h, Noise(cv=0.02, stale=0.10), random.Random(6))
    bench = simbench.Sim(world)
    settings = methods.Settings()
    assert methods.endpoints(bench, settings, settings.options(h.graph.bad, "posterior", False))
    ends = bench.tps("good")
    assert statistics.mean(ends) == pytest.approx(900.0, rel=0.03)
    assert not world.stale
    assert statistics.mean(relative(world, "good", 50)) == pytest.approx(1.0, abs=0.02)


def test_empirical_noise_resamples_one_real_side_per_level():
    h = one_step()
    pool = residuals.sides()
    seen = set()
    for seed in range(12):
        world = World(h, Noise(shape="empirical"), random.Random(seed))
        assert set(world.sides) == {1000.0, 750.0}
        good, bad = world.sides[1000.0], world.sides[750.0]
        assert good in pool and bad in pool
        seen.add(good != bad)
        n = len(good.residuals)
        allowed = {round(1000 * math.exp(r * math.sqrt(n / (n - 1))), 6) for r in good.residuals}
        assert {round(world.boot("c0")[1], 6) for _ in range(30)} <= allowed
    assert True in seen  # the good and the bad side differ in some worlds
    again = World(h, Noise(shape="empirical"), random.Random(3))
    assert again.sides == World(h, Noise(shape="empirical"), random.Random(3)).sides


def test_an_unknown_noise_shape_is_refused():
    with pytest.raises(ValueError, match="noise shape"):
        World(one_step(), Noise(shape="cauchy"), random.Random(0))


def test_the_normal_noise_draws_as_before():
    """The default model's stream is unchanged: gauss, then the heavy-tail coin."""
    h = one_step()
    world = World(h, Noise(cv=0.1, heavy=True), random.Random(7))
    rng = random.Random(7)
    for t in range(50):
        tps = 1000.0 * (1.0 + 0.1 * rng.gauss(0.0, 1.0))
        tps *= 0.5 if rng.random() < 0.05 else 1.0
        when, got = world.boot("c1")
        assert when == t and got == pytest.approx(tps)


# --- histories ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_fix_inside_the_range_has_the_right_levels(seed):
    h = histories.fix_inside(random.Random(seed), "linear", 24, 24, 0.0, 0.15)
    reg, fix, culprit = h.culprits
    at = [int(c[1:]) for c in h.culprits]
    assert at == sorted(at) and 8 <= at[0] <= 11 and 13 <= at[1] <= 16 and 17 <= at[2] <= 21
    assert h.kinds() == {reg: "fixed", fix: "fix", culprit: "culprit"}
    assert h.truth() == {culprit}
    levels = [round(h.tps(c), 6) for c in ("good", *h.graph.commits)]
    expected = [850.0 if at[0] <= i < at[1] or i >= at[2] else 1000.0 for i in range(-1, 24)]
    assert levels == expected


@pytest.mark.parametrize("seed", range(4))
def test_fix_inside_a_merge_history_descends_from_its_regression(seed):
    h = histories.fix_inside(random.Random(seed), "merges", 200, 200, 0.0, 0.15)
    reg, fix, culprit = h.culprits
    assert h.graph.is_bad(fix, reg)
    assert h.tps("good") == 1000.0
    assert h.tps(h.graph.bad) == pytest.approx(850.0)
    assert h.kinds()[culprit] == "culprit"


def test_two_culprits_are_both_the_truth():
    h = matrix.Cell("two", regression=0.15, culprits=2).history(random.Random(1))
    assert h.truth() == set(h.culprits) and len(h.culprits) == 2
    assert h.tps(h.graph.bad) == pytest.approx(1000.0 * 0.85 * 0.85)


# --- the residuals file -------------------------------------------------------------------


def test_the_committed_residuals_load_and_say_where_they_came_from():
    sides = residuals.load()
    assert len(sides) >= 20
    data = json.loads(residuals.RESIDUALS.read_text())
    assert "scripts/residuals" in data["about"]
    for side in sides:
        assert len(side.residuals) >= residuals.MIN_SAMPLES
        assert abs(sum(side.residuals)) < 1e-4  # centred on the side's mean log
        assert 0.0 < side.cv < 0.5
        run = side.source.split(":")[0]
        assert run.startswith(("docs/examples/", "results/")), run
        assert "drift-bisect" not in run
    demo = [s for s in sides if s.source.startswith("docs/examples/")]
    assert all((ROOT / s.source.split(":")[0]).is_dir() for s in demo)


def test_a_side_draws_with_its_sample_variance():
    side = residuals.Side("x", "here", tuple(residuals.relative([900.0, 1000.0, 1100.0])))
    rng = random.Random(8)
    logs = [math.log(side.draw(rng)) for _ in range(30000)]
    assert statistics.pvariance(logs) == pytest.approx(side.cv**2, rel=0.03)


def test_collect_reads_stored_runs_once_and_leaves_drift_out():
    examples = ROOT / "docs" / "examples"
    sides, notes = residuals.collect([examples / "demo", examples / "demo", examples])
    demo = [s.source for s in sides if s.source.startswith("docs/examples/demo:")]
    assert demo == [
        "docs/examples/demo: side A (497e2bae621e)",
        "docs/examples/demo: side B (ab54bdac3a3d)",
    ]
    assert any("10 samples repeat" in n for n in notes)
    assert any("drift-bisect: left out" in n for n in notes)
    # A pool's sides are per machine, and the fake target's samples are not noise.
    assert "docs/examples/pool-fake-vng: 4 samples from the fake target, left out" in notes
    assert not [s for s in sides if "pool-fake-vng" in s.source and " on " not in s.source]
    committed = {s.source: s.residuals for s in residuals.load()}
    for s in sides:
        assert committed[s.source] == s.residuals


@pytest.mark.parametrize(
    "content",
    ["{", '{"sides": []}', '{"sides": [{"scenario": "x", "source": "y", "residuals": [0.1]}]}'],
)
def test_a_bad_residuals_file_is_one_clear_error(tmp_path, content):
    path = tmp_path / "residuals.json"
    path.write_text(content)
    with pytest.raises(residuals.BadResiduals, match="scripts/residuals"):
        residuals.load(path)


def test_the_residuals_script_writes_the_file(tmp_path):
    out = tmp_path / "r.json"
    examples = ROOT / "docs" / "examples"
    scripts.load("residuals").main([str(examples / "demo"), "--out", str(out)])
    data = json.loads(out.read_text())
    assert [s["n"] for s in data["sides"]] == [5, 5]
    assert residuals.load(out)[0].source.endswith("side A (497e2bae621e)")


# --- the tallies ------------------------------------------------------------------------


def fixed_history() -> histories.History:
    g = Graph.from_parents(histories.linear(24), "c23", ["good"])
    return histories.History(g, ("c10", "c15", "c19"), (0.15, -0.15, 0.15))


def named_story(kind: str, *steps: tuple[str, float]) -> Story:
    """A story naming each (commit, its ratio) with P 0.99."""
    return Story(kind, tuple(Change((c,), 0.99, r, r, r, 1.0) for c, r in steps), 0.0, 0.5, 0.0)


def test_tally_counts_wrong_confirmed_no_answer_and_the_changes_named():
    h = fixed_history()
    t = tally.Tally()
    several = named_story("several", ("c19", 0.85), ("c10", 0.85), ("c15", 1.18))
    t.add(methods.Result(["c10"], "culprit", 0.9998, 9, 30, 5, "confirmed", confirmed=True), h)
    t.add(methods.Result(["c10"], "culprit", 0.99, 9, 30, 5, "not confirmed"), h)
    told = methods.Result(["c19"], "culprit", 0.99, 12, 40, 5, confirmed=True, story=several)
    t.add(replace(told, after_first=6, tested={"": 4, "story": 6, "probe": 2}), h)
    t.add(methods.Result(["c19", "c10"], "undecided", 0.6, 20, 50, 6, recheck_boots=4), h)
    t.add(methods.Result([], "refused", boots=12), h)
    assert (t.runs, t.refused, t.undecided, t.exit_ok) == (5, 1, 1, 2)
    assert (t.wrong_single, t.wrong_confirmed, t.no_answer) == (2, 1, 3)
    assert t.boots_all == 30 + 30 + 40 + 50 + 12 and t.boots_recheck == 4
    assert t.reported == {"culprit": [4, 2], "fix": [4, 1], "fixed": [4, 4]}
    assert t.bins == {1: [2, 1], 2: [1, 0]}
    row = tables.story_table({matrix.Cell("fix inside"): {"posterior": t}}).splitlines()[-1]
    assert "| 2/5 (40.0%) | 1/5 (20.0%) | 3/5 (60.0%) (1, 1) |" in row
    assert "culprit 2/4, fix 1/4, fixed 4/4" in row
    # boots: search, of which story, probes, after the first stop; re-check, all
    assert "| 12.5 | 1.5 | 0.5 | 1.5 | 1.0 | 32.4 |" in row


def test_boots_after_the_first_stop_are_told_apart():
    """The search boots before the first re-check boot are the one-step search's; the
    rest (another look after a re-check, the story's tests) come after the first stop."""
    for i in range(4):
        h = matrix.Cell("two", regression=0.15, culprits=2).history(random.Random(f"a-{i}"))
        world = World(h, Noise(), random.Random(f"a-{i}-noise"))
        bayes = methods.Bayes(world, methods.Settings(), False)
        r = bayes.run()
        if r.kind == "refused":
            continue
        first = bayes.bench.first_stop
        if first is None:  # no re-check: the search ended before a story was settled
            assert r.after_first == 0
        else:
            assert 0 <= r.after_first == r.boots_bisect - first
        assert r.tested is not None and sum(r.tested.values()) == r.boots_bisect  # no refs


def test_story_tallies_survive_save_and_merge():
    cell = matrix.cells("story")[-1]
    results = {cell: matrix.simulate(cell, 2, 1, ["posterior"], methods.Settings())}
    back = matrix.undump(json.loads(json.dumps(matrix.dump(results))), "story")
    assert back == results


def test_story_matrix_runs_each_setting_apart_and_merges(tmp_path):
    script = scripts.SCRIPTS / "simulate-bisect"
    saved = []
    story = [sys.executable, str(script), "--matrix", "story"]
    for name in ("design", "fix inside"):
        saved.append(tmp_path / f"{name}.json")
        subprocess.run(
            [*story, "--bisections", "1", "--cells", name, "--save", str(saved[-1])],
            capture_output=True,
            text=True,
            check=True,
        )
    out = subprocess.run(
        [*story, "--merge", *map(str, saved)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line for line in out.splitlines() if "| posterior | 1 |" in line]
    fix = ["fix inside 15%, revert conflicts", "fix inside 15%, revert no effect"]
    assert [r.split("|")[1].strip() for r in rows] == ["design", *fix]
    assert "CPU per setting:" in out


def test_exit_0_is_judged_on_the_story_it_claims_and_each_change_on_its_direction():
    """A story of several changes that names the fixed regression, the fix and the culprit,
    each in its direction, is a right exit 0 though git's single answer (the candidates) is
    the fixed regression; a fix named as a regression, or a change that is not one, is
    wrong; each named change's P goes into the story's reliability bins."""
    h = fixed_history()

    whole = named_story("several", ("c10", 0.85), ("c15", 1.18), ("c19", 0.85))
    told = methods.Result(["c10"], "culprit", 0.99, 12, 40, 5, confirmed=True, story=whole)
    assert tally.claim_right(told, h)
    backwards = named_story("several", ("c10", 0.85), ("c15", 0.85), ("c19", 0.85))
    assert not tally.claim_right(replace(told, story=backwards), h)
    stray = named_story("several", ("c10", 0.85), ("c3", 1.18), ("c19", 0.85))
    assert not tally.claim_right(replace(told, story=stray), h)
    single = named_story("single", ("c10", 0.85))
    assert not tally.claim_right(replace(told, story=single), h)
    t = tally.Tally()
    t.add(replace(told, story=stray), h)
    t.add(told, h)
    assert t.wrong_confirmed == 1 and t.story_bins == {1: [6, 5]}


def test_writing_the_residuals_anew_keeps_the_sides_of_runs_not_here(tmp_path):
    here = tmp_path / "runs" / "a"
    here.mkdir(parents=True)
    old = [
        residuals.Side("s", f"{here}: side A (x)", (0.1, -0.1, 0.0)),  # read again below
        residuals.Side("s", "results/elsewhere: side A (y)", (0.2, -0.2, 0.0)),  # not here
    ]
    read = [residuals.Side("s", f"{here}: side A (x)", (0.05, -0.05, 0.0))]
    assert residuals.carried(old, read) == [old[1]]
    assert residuals.carried(old, []) == [old[1]]  # a run that is here is never carried
