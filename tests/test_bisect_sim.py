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
    args = options(sim, "--histories", "100", "--seed", "3",
                   "--strategies", "sequential", "sequential-1pass")  # fmt: skip
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
        [sys.executable, str(SCRIPT), "--histories", "20", "--strategies", "sequential",
         "fixed-5"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert len(lines) == 6
    assert lines[0].startswith("20 histories of 16:32 commits, CV 10%")
    assert lines[2].startswith("| strategy | boots per bisection")
    assert [line.split("|")[1].strip() for line in lines[4:]] == ["sequential", "fixed-5"]
