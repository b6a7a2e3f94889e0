"""The bisection model of scripts/simulate-bisect, and kbisect's sampling rule in it:
many seeds at a CV of 10% and a 25% regression, in milliseconds each.
"""

from __future__ import annotations

import random
import subprocess
import sys
from types import ModuleType

import pytest

from tests import scripts

SCRIPT = scripts.SCRIPTS / "simulate-bisect"


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    return scripts.load("simulate-bisect")


def options(sim: ModuleType, *argv: str):
    return sim.parse(list(argv))


def test_noiseless_bisection_is_exact_for_every_culprit(sim):
    for commits in (2, 3, 16, 31):
        for culprit in range(1, commits):
            h = sim.History(commits, culprit)
            out = sim.bisect(h, lambda i, h=h: "good" if h.tps(i) > h.threshold else "bad")
            assert out.candidates == [culprit], (commits, culprit)
            assert len(out.tested) <= (commits - 1).bit_length()


def test_skips_next_to_the_culprit_give_a_range_that_holds_it(sim):
    h = sim.History(20, 12, broken=frozenset({11, 12}))
    out = sim.bisect(h, lambda i: "good" if h.tps(i) > h.threshold else "bad")
    assert out.candidates == [11, 12, 13]
    assert all(v == "skip" for i, v in out.tested if i in h.broken)


def test_next_revision_is_the_middle_unskipped_one(sim):
    assert sim.next_revision(0, 16, set()) == 8
    assert sim.next_revision(0, 16, {8}) == 7
    assert sim.next_revision(0, 16, {7, 8}) == 9
    assert sim.next_revision(4, 5, set()) is None


@pytest.mark.parametrize("seed", range(24))
def test_sequential_rule_finds_the_culprit(sim, seed):
    """CV 10%, 25% regression, 16-32 commits, culprit anywhere: the exact culprit."""
    rng = random.Random(seed)
    h = sim.make_history(rng, 16, 32, 0.0, 0.25)
    args = options(sim, "--cv", "0.10", "--runs-min", "3", "--runs-max", "10")
    out = sim.run_strategy("sequential", h, str(seed), args)
    assert out.candidates == [h.culprit], (h, out.tested)
    assert 3 * len(out.tested) <= out.boots <= 20 * len(out.tested)


def test_second_pass_resolves_unclear_neighbours(sim):
    """Without the second pass, unclear skips next to the culprit leave ranges."""
    args = options(
        sim, "--histories", "100", "--seed", "3", "--strategies", "sequential", "sequential-1pass"
    )
    tallies = sim.simulate(args)
    assert tallies["sequential-1pass"].ranges >= 10
    assert tallies["sequential"].ranges <= 3
    assert tallies["sequential"].wrong == tallies["sequential-1pass"].wrong == 0


def test_sequential_beats_fixed_3_on_wrong_culprits(sim):
    args = options(sim, "--histories", "150", "--seed", "7")
    tallies = sim.simulate(args)
    seq, fixed3 = tallies["sequential"], tallies["fixed-3"]
    assert seq.wrong == 0
    assert fixed3.wrong > seq.wrong
    assert seq.runs == fixed3.runs == 150


def test_script_prints_a_markdown_table():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--histories", "20", "--strategies", "sequential", "fixed-5"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stdout.splitlines()
    assert len(lines) == 6
    assert lines[0].startswith("20 histories of 16:32 commits, CV 10%")
    assert lines[2].startswith("| strategy | boots per bisection")
    assert [line.split("|")[1].strip() for line in lines[4:]] == ["sequential", "fixed-5"]


# --- kbisect/simulate and --matrix ------------------------------------------------------


def test_every_method_bisects_the_same_histories_and_endpoint_samples():
    from kbisect.simulate import matrix, methods
    from kbisect.simulate.world import Noise, World

    class Recording(World):  # every boot's level and tps (the revert check's included)
        def draw(self, level: float, machine: int | None = None) -> tuple[float, float]:
            out = super().draw(level, machine)
            seen.append((level, out[1]))
            return out

    cell = matrix.Cell("design")
    h = cell.history(random.Random("1-design-0"))
    assert h == cell.history(random.Random("1-design-0"))
    firsts = []
    for method in matrix.METHODS:
        seen: list[tuple[float, float]] = []
        world = Recording(h, Noise(), random.Random("1-design-0-noise"))
        matrix.run_one(method, world, methods.Settings())
        firsts.append(seen[:6])
        assert len(seen) == world.boots > 6
    assert all(f == firsts[0] for f in firsts)
    assert {c for c, _ in firsts[0]} == {h.tps("good"), h.tps(h.graph.bad)}


def test_posterior_needs_fewer_boots_than_sequential_and_names_the_culprit():
    from kbisect.simulate import matrix, methods

    tallies = matrix.simulate(
        matrix.Cell("design"), 12, 5, ["sequential", "posterior"], methods.Settings()
    )
    seq, post = tallies["sequential"], tallies["posterior"]
    assert seq.runs == post.runs == 12
    assert post.wrong == seq.wrong == 0
    # the one-step search's own boots; the story's probes and tests are counted apart
    assert post.boots_bisect - post.boots_probes - post.boots_story < seq.boots_bisect / 2
    assert sum(a for a, _ in post.bins.values()) == post.answered - post.ranges


def test_merge_history_and_broken_commits_keep_the_answer_honest():
    from kbisect.simulate import matrix, methods

    cell = matrix.Cell("merges", "merges", "60", broken=0.1)
    tallies = matrix.simulate(cell, 6, 2, ["sequential", "posterior"], methods.Settings())
    for t in tallies.values():
        assert t.wrong == 0 and t.answered == 6


def test_fixed_threshold_suffers_from_drift_and_references_repair_it():
    from kbisect.simulate import matrix, methods

    cell = matrix.Cell("drift", drift=-0.20)
    tallies = matrix.simulate(cell, 12, 3, ["sequential", "sequential+refs"], methods.Settings())
    assert tallies["sequential"].wrong >= 3
    assert tallies["sequential+refs"].wrong <= 1


def test_matrix_quick_prints_the_tables():
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--matrix",
            "quick",
            "--bisections",
            "1",
            "--methods",
            "sequential",
            "posterior",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = result.stdout
    assert out.startswith("--matrix quick: 1 bisections per setting")
    rows = [line for line in out.splitlines() if line.startswith("| design |")]
    assert [r.split("|")[2].strip() for r in rows] == ["sequential", "posterior"]
    assert "reliability, posterior, final answers" in out


# --- the simulator drives the driver's code through its port ---------------------------


@pytest.mark.parametrize("seed", range(4))
def test_endpoints_are_sampled_as_the_driver_does_good_then_bad(seed):
    from kbisect.simulate import bench as simbench
    from kbisect.simulate import matrix, methods
    from kbisect.simulate.world import Noise, World

    h = matrix.Cell("design").history(random.Random(f"e-{seed}"))
    world = World(h, Noise(), random.Random(f"e-{seed}-noise"))
    bench = simbench.Sim(world)
    opts = methods.Settings().options(h.graph.bad, "git", False)
    v = methods.endpoints(bench, methods.Settings(), opts)
    rows = sorted(bench.rows("good", h.graph.bad), key=lambda r: r.t)
    n = len(rows) // 2
    assert [r.revision for r in rows] == ["good", h.graph.bad] * n
    assert 3 <= n <= 10 and (v is not None or n == 10)


@pytest.mark.parametrize("samples", [3, 5, 8])
def test_git_recheck_takes_exactly_recheck_samples_pairs(samples):
    from kbisect.simulate import matrix, methods
    from kbisect.simulate.world import Noise, World

    h = matrix.Cell("design").history(random.Random("r-1"))
    world = World(h, Noise(), random.Random("r-1-noise"))
    seq = methods.Sequential(world, methods.Settings(recheck_samples=samples), False)
    result = seq.run()
    fresh = seq.bench.rechecked
    assert len(fresh) == 2 and all(len(v) == samples for v in fresh.values())
    assert seq.bench.recheck_boots == 2 * samples
    assert result.boots - result.boots_bisect - 2 * samples == sum(
        len(seq.bench.store[c]) for c in ("good", h.graph.bad)
    )


def test_posterior_recheck_stops_by_recheck_samples_and_feeds_the_posterior():
    from kbisect.simulate import matrix, methods
    from kbisect.simulate.world import Noise, World

    answered = 0
    for i in range(6):
        h = matrix.Cell("design").history(random.Random(f"p-{i}"))
        world = World(h, Noise(cv=0.15), random.Random(f"p-{i}-noise"))
        full = methods.Settings(recheck_samples=4, story="full")  # the story's re-checks
        bayes = methods.Bayes(world, full, False)
        result = bayes.run()
        fresh = bayes.bench.rechecked
        if result.kind == "refused" or not fresh:
            continue  # refused, or stopped without a re-check (the story's doubts, budget)
        answered += 1
        assert all(3 <= len(v) <= 4 for v in fresh.values())
        assert result.boots_bisect == bayes.bench.boots() - bayes.bench.recheck_boots
    assert answered >= 3


def test_a_range_answer_is_rechecked_as_the_driver_does():
    """--story full: the range's re-check against the last good one's (the default search
    re-checks only where the revert check cannot be measured)."""
    from kbisect.bisect.posterior.graph import Graph
    from kbisect.simulate import histories, methods
    from kbisect.simulate.world import Noise, World

    parents = histories.linear(24)
    g = Graph.from_parents(parents, "c23", ["good"])
    h = histories.History(g, ("c12",), (0.25,), frozenset({"c11", "c12"}))
    world = World(h, Noise(cv=0.05), random.Random("range"))
    bayes = methods.Bayes(world, methods.Settings(story="full"), False)
    result = bayes.run()
    assert result.kind == "range" and {"c11", "c12", "c13"} <= set(result.candidates)
    assert set(bayes.bench.rechecked) == {("c13", "c10"), ("c13", "c13")}
    assert result.recheck == "confirmed"
