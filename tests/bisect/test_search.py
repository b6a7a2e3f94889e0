"""The posterior's search loop (posterior/search.py) through an in-memory bench: what it
boots, builds, marks untestable and re-checks; and the port-level pieces the simulator
shares with the driver (check.endpoint_verdict, judge.sample_with_refs)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from kbisect.bisect import check, recheck, references, state
from kbisect.bisect.git import judge
from kbisect.bisect.posterior.bench import RecheckOf, Sample, each
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.bisect.posterior.search import Search
from kbisect.bisect.posterior.story_search import StorySearch
from kbisect.bisect.request import Options
from kbisect.bisect.state import Run
from kbisect.core.exceptions import BootError, BuildError
from kbisect.simulate import histories
from kbisect.stats import drift


class Bench:
    """Boots at a level per commit, with little noise; builds and boots that fail."""

    def __init__(self, g: Graph, culprit: str, seed: int = 0) -> None:
        self.g, self.culprit, self.rng = g, culprit, random.Random(seed)
        self.unbuildable: set[str] = set()
        self.unbootable: set[str] = set()
        self.booted: list[tuple[str, str | None]] = []
        self.built: list[str] = []
        self.kept: dict[str, list[Sample]] = {}
        self.failures: dict[str, str] = {}
        self.rechecked: dict[tuple[str, str], list[float]] = {}
        self.saves = 0
        self.k = 1  # a pool of k machines: rounds of k boots, machine i at speed[i]
        self.speed: list[float] = [1.0]
        self.rounds: list[list[str]] = []
        self.whose: list[list[str | None]] = []  # each round's boots' recheck_of
        self.unrevertable: set[str] = set()
        self.checked: dict[str, tuple[list[float], list[float]]] = {}  # culprit: bad, reverted
        self.ends: tuple[list[float], list[float]] = ([], [])  # the endpoints' stored tps
        self.gone: list[str] = []  # the rests' reverts
        self.reverted_members: dict[str, tuple[str, ...]] = {}  # revert()'s members
        self.took: dict[str, list[float]] = {}  # every test boot's tps, by commit

    def level(self, commit: str) -> float:
        """Bad when commit has the culprit, unless a rest reverted it."""
        slow = self.g.is_bad(commit, self.culprit) and self.culprit not in self.gone
        return 750.0 if slow else 1000.0

    def boots(self) -> int:
        return len(self.booted)

    def stored(self, commit: str) -> tuple[list[Sample], str | None]:
        return self.kept.pop(commit, []), self.failures.get(commit)

    def tps(self, commit: str) -> list[float]:
        return list(self.took.get(commit, []))

    def build(self, commit: str) -> None:
        if commit in self.unbuildable:
            raise BuildError(f"{commit} does not build")
        self.built.append(commit)

    def boot(self, commit: str, recheck_of: str | None = None, machine: int = 0) -> list[Sample]:
        assert commit in self.built
        self.booted.append((commit, recheck_of))
        if commit in self.unbootable:
            raise BootError("no login prompt")
        tps = self.level(commit) * (1 + 0.01 * self.rng.gauss(0, 1)) * self.speed[machine]
        if recheck_of is not None:
            self.rechecked.setdefault((recheck_of, commit), []).append(tps)
        else:
            self.took.setdefault(commit, []).append(tps)
        name = f"m{machine}" if self.k > 1 else ""
        return [Sample(commit, float(len(self.booted)), tps, machine=name)]

    def width(self) -> int:
        return self.k

    def boot_round(
        self, commits: list[str], recheck_of: RecheckOf = None
    ) -> list[list[Sample] | BaseException]:
        self.rounds.append(list(commits))
        whose = each(recheck_of, len(commits))
        self.whose.append(whose)
        out: list[list[Sample] | BaseException] = []
        for i, commit in enumerate(commits):
            try:
                out.append(self.boot(commit, whose[i], (len(self.rounds) + i) % self.k))
            except BootError as exc:
                out.append(exc)
        return out

    def fresh(self, culprit: str, commit: str) -> list[float]:
        return list(self.rechecked.get((culprit, commit), []))

    def revert(self, culprit: str, members: Sequence[str] = ()) -> str | None:
        self.reverted_members[culprit] = tuple(members)
        if culprit in self.unrevertable:
            return f"the revert of {culprit} does not apply on bad {self.g.bad}"
        self.checked.setdefault(culprit, ([], []))
        return None

    def verify_round(self, culprit: str, sides: list[str]) -> list[float | BaseException]:
        """Bad with culprit reverted: at the good level when it is the true culprit."""
        bad, reverted = self.checked[culprit]
        out: list[float | BaseException] = []
        for side in sides:
            true = culprit == self.culprit or self.culprit in self.reverted_members[culprit]
            level = {"revert": 1000.0 if true else self.level(self.g.bad)}
            level |= {"bad": self.level(self.g.bad), "good": 1000.0}
            tps = level[side] * (1 + 0.01 * self.rng.gauss(0, 1))
            {"revert": reverted, "bad": bad, "good": self.ends[0]}[side].append(tps)
            out.append(tps)
        return out

    def verify_tps(self, culprit: str) -> tuple[list[float], list[float], list[float]]:
        bad, reverted = self.checked[culprit]
        ends = [] if self.gone else self.ends[1]  # a rest's: the check's own only
        return list(self.ends[0]), ends + bad, list(reverted)

    def rest(self, culprit: str, reverts: Callable[[str], list[str]]) -> None:
        """From now on culprit is reverted; bad's samples are the revert check's."""
        self.gone.append(culprit)
        bad = self.g.bad
        self.kept[bad] = [Sample(bad, 0.0, tps) for tps in self.checked[culprit][1]]
        self.ends = (self.ends[0], self.checked[culprit][1])

    def save(self, run: Run, post: Posterior, schedule: references.Schedule | None) -> None:
        self.saves += 1

    def say(self) -> bool:
        return False


def search(
    n: int,
    culprit: str,
    references_every: int = 0,
    max_boots: int = 100,
    speeds: tuple[float, ...] = (1.0,),
    kind: type[Search] = Search,
) -> tuple[Search, Bench, Run]:
    """A search of n linear commits; speeds: a pool of machines, one round of len(speeds)
    boots at once."""
    g = Graph.from_parents(histories.linear(n), f"c{n - 1}", ["good"])
    opts = Options(
        tree=None,
        good="good",
        bad=g.bad,
        scenario="s",
        arch="x86_64",
        references=references_every,
        max_boots=max_boots,
    )
    run = Run(opts, {}, Path(), "good", g.bad, Path())
    run.bisect_t0, run.visited = 0.0, ["good", g.bad]
    bench = Bench(g, culprit)
    bench.k, bench.speed = len(speeds), list(speeds)
    ends = [
        Sample(c, -10.0 + i, bench.level(c) * (1 + 0.01 * bench.rng.gauss(0, 1)))
        for i in range(3)
        for c in ("good", g.bad)
    ]
    bench.ends = ([s.tps for s in ends if s.commit == "good"], [s.tps for s in ends[1::2]])
    return kind(g, bench, run, ends), bench, run


@pytest.mark.parametrize("culprit", ["c0", "c5", "c11", "c19"])
def test_names_the_culprit_and_verifies_it_by_revert_alone(culprit):
    """The default search: once the culprit holds, bad with it reverted against bad until
    the sequential rule decides; no culprit/parent re-check, no probe."""
    s, bench, run = search(20, culprit)
    answer = s.find()
    assert answer.kind == "culprit" and answer.candidates[0][0] == culprit
    v = run.verification
    assert v is not None and v.culprit == culprit and v.kind == "all" and v.stop
    assert len(v.reverted_tps or []) >= 3 and not run.rechecks and run.story is None
    assert all(of is None for _, of in bench.booted) and not run.probes
    assert run.first_stop is not None and run.first_stop["commit"] == culprit
    assert bench.boots() < 20 and bench.saves >= bench.boots()


@pytest.mark.parametrize("culprit", ["c0", "c5", "c11", "c19"])
def test_a_culprit_whose_revert_does_not_apply_is_rechecked_once(culprit):
    s, bench, run = search(20, culprit)
    bench.unrevertable = {culprit}
    answer = s.find()
    assert answer.kind == "culprit" and answer.candidates[0][0] == culprit
    assert run.verification is not None and run.verification.kind == "no-revert"
    assert list(run.rechecks) == [culprit]
    rc = run.rechecks[culprit]
    assert rc.kind == "confirmed" and rc.confirmed and rc.n is not None
    assert rc.parent == s.graph.first_parent(culprit)
    assert [c for c, of in bench.booted if of] == [rc.parent, culprit] * rc.n
    assert run.first_stop is not None and run.first_stop["commit"] == culprit
    assert bench.boots() < 30 and bench.saves >= bench.boots()
    assert set(run.visited) >= {c for c, of in bench.booted if of is None}


def test_an_unbuildable_or_unbootable_revision_is_untestable_never_bad():
    s, bench, run = search(20, "c5")
    first = s.post.next()
    assert first is not None and first != "c5"
    bench.unbuildable, bench.unbootable = {"c4"}, {first}
    answer = s.find()
    assert run.failed[first] == "boot failed: no login prompt"
    assert [c for c, _ in bench.booted].count(first) == 1
    assert all(c != "c4" for c, _ in bench.booted)
    assert run.failed.get("c4", "build failed").startswith("build failed")
    assert "c5" in [c for c, _ in answer.candidates]


def test_a_range_hidden_by_untestable_neighbours_is_reverted_whole():
    """No test can split c8..c10 (c8 and c9 do not build): the revert check reverts the
    whole range on bad, newest first, and it restores the gap; where the range's revert
    does not apply, the culprit/parent re-check of its one testable member."""
    s, bench, run = search(20, "c9")
    bench.unbuildable = {"c8", "c9"}
    answer = s.find()
    assert answer.kind == "range" and {"c8", "c9"} <= {c for c, _ in answer.candidates}
    parent, top = recheck.pair(s.post, answer)
    assert parent == "c7" and top == "c10"
    v = run.verification
    members = sorted((c for c, _ in answer.candidates), key=lambda c: int(c[1:]))
    assert v is not None and v.culprit == "c10" and v.members == members
    assert bench.reverted_members["c10"] == tuple(members) and v.kind == "all"
    assert not run.passes
    s, bench, run = search(20, "c9")
    bench.unbuildable, bench.unrevertable = {"c8", "c9"}, {"c10"}
    s.find()
    assert list(run.rechecks) == ["c10"] and run.rechecks["c10"].parent == "c7"


def test_stored_samples_are_reused_and_a_stored_failure_is_not_retried():
    s, bench, run = search(20, "c5")
    first = s.post.next()
    assert first is not None
    bench.kept[first] = [Sample(first, 0.0, bench.level(first))] * 3
    s.find()
    assert (first, None) not in bench.booted and first in run.visited
    s, bench, run = search(20, "c5")
    first = s.post.next()
    assert first is not None
    bench.failures[first] = "kernel panic"
    s.find()
    assert run.failed[first] == "stored failure, not retried: kernel panic"
    assert first not in run.visited and all(c != first for c, _ in bench.booted)


def test_references_follow_every_n_test_boots_and_the_budget_holds():
    s, bench, run = search(300, "c150", references_every=2, max_boots=12)
    s.find()
    plain = [c for c, of in bench.booted if of is None]
    assert plain[2] == "good" and plain[5] == run.bad and plain[8] == "good"
    assert len(plain) <= 12  # a round begins only below the budget; a re-check is one round
    assert bench.boots() <= 12 + 2 * run.options.recheck_samples
    assert run.schedule is None  # kept by the driver's bench, not this one


def test_endpoint_verdict_samples_good_then_bad_until_significant():
    order: list[str] = []
    rng = random.Random(4)
    got: dict[str, list[float]] = {"g": [], "b": []}

    def top_up(c: str, k: int) -> list[float]:
        while len(got[c]) < k:
            order.append(c)
            got[c].append((1000.0 if c == "g" else 960.0) * (1 + 0.05 * rng.gauss(0, 1)))
        return list(got[c])

    opts = Options(tree=None, good="g", bad="b", scenario="s", arch="x86_64")
    v = check.endpoint_verdict(top_up, "g", "b", opts)
    n = len(got["g"])
    assert order == ["g", "b"] * n and len(got["b"]) == n
    assert opts.runs_min <= n <= opts.runs_max
    assert v.kind == "regression" or n == opts.runs_max


def test_sample_with_refs_boots_a_reference_after_every_n_and_corrects_drift():
    schedule = references.Schedule("g", "b", every=2)
    rows: list[drift.Timed] = [
        drift.Timed(c, float(i), 1000.0 if c == "g" else 800.0)
        for i, c in enumerate(["g", "b"] * 3)
    ]
    order: list[str] = []

    def draw(c: str) -> None:
        t = float(len(rows))
        level = {"g": 1000.0, "b": 800.0, "x": 820.0}[c] * (1 + 0.004 * t)  # drifts up
        order.append(c)
        rows.append(drift.Timed(c, t, level))

    policy = judge.Policy(900.0, runs_min=3, runs_max=10)
    d, threshold, slope = judge.sample_with_refs("x", policy, schedule, lambda: list(rows), draw)
    assert d.verdict == "bad"  # 820 is below the references' middle, drift or not
    assert order[:4] == ["x", "x", "g", "x"]
    assert slope > 0 and abs(threshold - (1000.0 * 800.0) ** 0.5) < 5


def _sampled(s: Search, run: Run, commit: str, values: list[float]) -> None:
    """Samples of a revision the search tested (it is visited)."""
    for v in values:
        s.post.update(commit, v, 100.0 + len(s.post.samples))
    if commit not in run.visited:
        run.visited.append(commit)


def test_a_single_steps_doubts_every_tested_revision_not_only_the_probes():
    """One step at c5 (good 1000, bad 750, CV 5%): a revision the one-step search tested
    once half-way between the levels is sampled again (open); after PROBE_BOOTS still
    half-way, its neighbours are sampled, and they decide: at the step's level they
    excuse it, at the other level they contradict the step (a window a fix opened)."""
    from kbisect.bisect.posterior import story

    step = story.Change(("c5",), 0.99, 0.75, 0.7, 0.8, 1.0)
    spread = [0.95, 1.05, 1.0, 0.97, 1.03, 1.0]
    half = math.sqrt(1000.0 * 750.0)

    def ranged() -> tuple[StorySearch, Run]:
        s, _, run = search(20, "c5", kind=StorySearch)
        assert isinstance(s, StorySearch)
        _sampled(s, run, "good", [1000.0 * f for f in spread])
        _sampled(s, run, s.graph.bad, [750.0 * f for f in spread])
        _sampled(s, run, "c5", [750.0 * f for f in spread[:2]])
        _sampled(s, run, "c4", [1000.0 * f for f in spread[:2]])
        return s, run

    s, run = ranged()
    _sampled(s, run, "c12", [half])
    assert s._doubts(step) == ([], ["c12"], [])
    _sampled(s, run, "c12", [half] * (story.PROBE_BOOTS - 1))
    assert s._doubts(step) == ([], ["c11", "c13"], [])
    _sampled(s, run, "c11", [750.0 * f for f in spread[:3]])
    _sampled(s, run, "c13", [750.0 * f for f in spread[:3]])
    assert s._doubts(step) == ([], [], [])  # a noisy revision, not a window
    t, run2 = ranged()
    _sampled(t, run2, "c12", [half] * story.PROBE_BOOTS)
    _sampled(t, run2, "c11", [1000.0 * f for f in spread[:3]])
    against, open_, _ = t._doubts(step)
    assert against == ["c11"] and open_ == ["c13"]
    told = t.tell()
    t.run.rechecks = {"c5": state.Recheck("c4", "confirmed", confirmed=True)}
    assert told.kind != "single" or not t.run.confirmed(0.95)


def test_against_takes_the_odds_of_every_revision_judged():
    """A revision is 'against' one step only at the family's odds (Bonferroni over the
    revisions judged): each revision's level test, sampled until it is clear, stops at
    the wrong level now and then, and a pool's batches judge more revisions. One step at
    c5 (good 1000, bad 750, CV 5%): c12 (after the step) sampled once at 940 is against
    it with two revisions judged; with eleven more judged at their levels, the same
    sample (past the confidence's own odds: the old rule's 'against') only asks for
    another (open), and samples at the bad level clear it. A revision far at the other
    level is against it still."""
    from kbisect.bisect.posterior import story

    step = story.Change(("c5",), 0.99, 0.75, 0.7, 0.8, 1.0)
    spread = [0.95, 1.05, 1.0, 0.97, 1.03, 1.0]

    def ranged(others: list[str]) -> tuple[StorySearch, Run]:
        s, _, run = search(20, "c5", kind=StorySearch)
        assert isinstance(s, StorySearch)
        _sampled(s, run, "good", [1000.0 * f for f in spread])
        _sampled(s, run, s.graph.bad, [750.0 * f for f in spread])
        for c in ["c5", *others]:
            level = 1000.0 if int(c[1:]) < 5 else 750.0
            _sampled(s, run, c, [level * f for f in spread[:2]])
        _sampled(s, run, "c12", [940.0])
        return s, run

    few, _ = ranged([])
    assert few._fits(12, 5)[0] <= -few._against_odds(2)  # c5 and c12 judged
    assert few._doubts(step)[0] == ["c12"]
    many = [f"c{i}" for i in (1, 2, 3, 4, 6, 7, 9, 10, 14, 16, 18)]
    s, run = ranged(many)
    fits, n = s._fits(12, 5)
    assert n == 1 and -s._against_odds(13) < fits <= -s._odds()
    assert s._doubts(step) == ([], ["c12"], [])
    _sampled(s, run, "c12", [750.0 * f for f in spread[:3]])
    assert s._doubts(step) == ([], [], [])
    _sampled(s, run, "c8", [1000.0 * f for f in spread[:3]])  # far at the good level
    assert s._doubts(step)[0] == ["c8"]


def test_one_half_speed_boot_never_makes_a_revision_clearly_at_a_level():
    """The level test is the likelihood's mixture, not a clipped normal: a boot at half
    speed (far from both levels) tells almost nothing; a clean boot at a 25% step tells."""
    from kbisect.bisect.posterior import story

    good, bad, sd = 0.0, -0.2877, 0.1
    half = story.level_test([(0.5, good, bad)], sd, 0.05, 8.0)
    assert abs(half) < 1.0
    clean = story.level_test([(0.75, good, bad)], sd, 0.05, 8.0)
    assert clean > math.log(19)
    assert story.level_test([(1.0, good, bad)] * 3, sd, 0.05, 8.0) < -3 * math.log(19)
