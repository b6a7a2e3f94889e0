"""kbisect's bisection methods on a simulated world, each returning what it would report.

The methods are the driver's own code, reaching the world through the same port as the
driver reaches the target (Sim below: build, boot, the samples so far): the endpoint
check (check.endpoint_verdict), the git method's per-step judge (bisect/git/judge.py:
sample_until, sample_with_refs), the posterior's search loop (posterior/search.py) and
the one re-check (recheck.py). Only git's choice of the next revision (gitmodel.py: the
real one is `git bisect` itself) and the tallies are the simulation's own.

- sequential (`--method git`): gitmodel.bisect with judge's rule against the geometric
  mean of the endpoint means, the second pass over unclear skips with twice runs_max,
  then the fixed re-check (recheck_samples fresh pairs; it only flags);
- posterior (`--method posterior`): search.Search until the answer holds after its
  adaptive re-check, or the budget is spent;
- with refs=True (drift-aware references): one reference boot (good and bad endpoint in
  turn) after every `every` test boots; sequential decides on samples brought back along
  the references' fitted drift, the posterior fits a time trend.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.bisect import check, recheck, references
from kbisect.bisect.git import judge
from kbisect.bisect.posterior.bench import Sample
from kbisect.bisect.posterior.search import Search
from kbisect.bisect.posterior.story import Story
from kbisect.bisect.posterior.story_search import StorySearch
from kbisect.bisect.request import RECHECK_SAMPLES, Options
from kbisect.bisect.state import Run, Verification
from kbisect.core.exceptions import BuildError
from kbisect.simulate import gitmodel
from kbisect.simulate.bench import Sim
from kbisect.simulate.histories import GOOD
from kbisect.simulate.world import World
from kbisect.stats import drift, means


@dataclass(frozen=True)
class Settings:
    runs_min: int = 3
    runs_max: int = 10
    recheck_samples: int | None = None  # None: the method's default (request.RECHECK_SAMPLES)
    confidence: float = 0.95
    budget: int = 100  # posterior: boots after the endpoints, re-checks included
    every: int = 3  # drift-aware references: one reference boot per `every` test boots
    gate: bool = True  # refuse endpoints that do not differ (False: runs_min each, go on)
    story: str = "one"  # posterior: --story (request.STORIES; full: the whole range's story)

    def options(self, bad: str, method: str, refs: bool) -> Options:
        """What `kbisect bisect` would be asked."""
        return Options(
            tree=None,
            good=GOOD,
            bad=bad,
            scenario="simulated",
            runs_min=self.runs_min,
            runs_max=self.runs_max,
            recheck_samples=self.recheck_samples or RECHECK_SAMPLES[method],
            arch="simulated",
            method=method,
            confidence=self.confidence,
            max_boots=self.budget,
            references=self.every if refs else 0,
            story=self.story,
        )


@dataclass
class Result:
    candidates: list[str]
    kind: str  # culprit | range | undecided | refused
    p: float | None = None  # the stated probability of the answer (posterior)
    boots_bisect: int = 0  # after the endpoints, re-checks excluded, references included
    boots: int = 0  # every boot
    builds: int = 0  # revisions built, endpoints excluded
    recheck: str | None = None
    warned: bool = False  # the trend test warned about drift
    first: tuple[str, float] | None = None  # posterior: the culprit at the first stop, its P
    confirmed: bool = False  # exit 0: the whole answer confirmed
    recheck_boots: int = 0
    after_first: int = 0  # of boots_bisect, those after the first stop (the story, probes)
    tested: dict[str, int] | None = None  # posterior: test boots by why (Counted)
    story: Story | None = None  # posterior: the model of the whole range (run.story)
    rounds: int = 0  # wall-clock: rounds of boots at once on the pool (one machine: boots)
    verify_boots: int = 0  # the revert check's, apart from the search's
    verify_builds: int = 0  # the reverts built
    verified: dict[str, str] | None = None  # the revert checks: reverted commit -> its kind

    def named(self) -> set[str]:
        """The commits the answer names: the story's steps, else the candidates; and the
        earlier passes' answers (their reverts restored part of the gap or none)."""
        steps = self.story.changes if self.story else ()
        return {s.commit for s in steps} | set(self.candidates) | set(self.verified or {})


def endpoints(bench: Sim, s: Settings, opts: Options) -> means.Verdict | None:
    """Both endpoints measured as the driver does; None when bad is not significantly
    worse (refused). Without the gate: runs_min each, and on."""
    bad = bench.world.history.graph.bad
    if not s.gate:
        v = check.endpoint_verdict(bench.top_up, GOOD, bad, replace(opts, runs_max=s.runs_min))
    else:
        v = check.endpoint_verdict(bench.top_up, GOOD, bad, opts, check.pairs_a_look(bench.width()))
    bench.world.endpoints_done()
    return v if v.kind == "regression" or not s.gate else None


def _warned(bench: Sim) -> bool:
    refs = sorted(bench.rows(GOOD, bench.world.history.graph.bad), key=lambda r: r.t)
    return drift.warning(drift.trend(refs), "the run", "") is not None


class Sequential:
    """`--method git`, optionally with drift-aware references."""

    def __init__(self, world: World, s: Settings, refs: bool) -> None:
        self.world, self.s = world, s
        self.bench = Sim(world)
        self.bad = world.history.graph.bad
        self.opts = s.options(self.bad, "git", refs)
        self.schedule = references.Schedule(GOOD, self.bad, s.every) if refs else None

    def judge(self, threshold: float, most: int) -> gitmodel.Judge:
        """One `git bisect run` step: good, bad or skip."""
        policy = judge.Policy(threshold, True, self.s.runs_min, most)
        bench, schedule = self.bench, self.schedule

        def run(commit: str) -> str:
            try:
                bench.build(commit)
            except BuildError:
                return "skip"
            if schedule is None:
                d = judge.sample_until(bench.tps(commit), lambda: bench.take(commit).tps, policy)
            else:
                d = judge.sample_with_refs(
                    commit,
                    policy,
                    schedule,
                    lambda: bench.rows(GOOD, self.bad, commit),
                    bench.take,
                )[0]
            return d.verdict if d.verdict in ("good", "bad") else "skip"

        return run

    def run(self) -> Result:
        h, w = self.world.history, self.world
        v = endpoints(self.bench, self.s, self.opts)
        if v is None:
            return Result([], "refused", boots=w.boots, rounds=w.boots)
        threshold = check.pick_threshold(None, v.a.mean, v.b.mean)[0]
        start = w.boots
        first = self.judge(threshold, self.s.runs_max)
        second = self.judge(threshold, 2 * self.s.runs_max)
        found, tested = gitmodel.bisect(h.graph, first, h.broken, second)
        bisect_boots = w.boots - start
        confirmed = self._recheck(found, tested)
        warned = self.schedule is not None and _warned(self.bench)
        kind = "culprit" if len(found) == 1 else "range"
        return Result(
            found,
            kind,
            None,
            bisect_boots,
            w.boots,
            w.builds,
            confirmed,
            warned,
            confirmed=confirmed == "confirmed",
            recheck_boots=self.bench.recheck_boots,
            rounds=w.boots,
        )

    def _recheck(self, found: list[str], tested: list[tuple[str, str]]) -> str:
        """recheck.run_git's: the fixed rule, judged by stats.verdict."""
        g = self.world.history.graph
        if len(found) == 1:
            parent, culprit = g.first_parent(found[0]), found[0]
        else:
            goods = [c for c, v in tested if v == "good"] or [GOOD]
            bads = [c for c, v in tested if v == "bad"] or [g.bad]
            parent, culprit = goods[-1], bads[-1]
        try:
            self.bench.build(parent)
            self.bench.build(culprit)
        except BuildError:
            return "error"
        _, a, b = recheck.sample(
            parent,
            culprit,
            recheck.fixed(self.opts),
            lambda c: self.bench.fresh(culprit, c),
            lambda c: self.bench.boot(c, culprit),
        )
        rc = recheck.judged(parent, culprit, a, b, self.opts)
        return "confirmed" if rc["confirmed"] else "not confirmed"


class Bayes:
    """`--method posterior`, optionally with drift-aware references."""

    def __init__(self, world: World, s: Settings, refs: bool) -> None:
        self.world, self.s = world, s
        self.bench = Sim(world)
        self.opts = s.options(world.history.graph.bad, "posterior", refs)

    def run(self) -> Result:
        w, g = self.world, self.world.history.graph
        if endpoints(self.bench, self.s, self.opts) is None:
            rounds = self.bench.endpoint_rounds(self.s.runs_min, self.s.runs_max)
            return Result([], "refused", boots=w.boots, rounds=rounds)
        self.bench.start = w.boots
        run = Run(self.opts, {}, Path(), GOOD, g.bad, Path())
        run.bisect_t0, run.visited = 0.0, [GOOD, g.bad]
        ends = sorted(self.bench.rows(GOOD, g.bad), key=lambda r: r.t)
        evidence = [
            Sample(r.revision, r.t - self.bench.start, r.tps, machine=self.bench.machine(r.t))
            for r in ends
        ]
        kind = StoryCounted if self.s.story == "full" else Counted
        search = kind(g, self.bench, run, evidence)
        final = search.find()  # the answer's revert check included
        rc = None
        if final.kind != "undecided":
            got = run.rechecks.get(recheck.pair(search.post, final)[1])
            rc = got.kind if got else None
        first = None
        if run.first_stop is not None and run.first_stop["kind"] == "culprit":
            first = (str(run.first_stop["commit"]), float(run.first_stop["p"]))
        warned = self.opts.references > 0 and _warned(self.bench)
        first_stop = self.bench.first_stop
        if first_stop is None:
            first_stop = self.bench.boots() - self.bench.recheck_boots
        return Result(
            [c for c, _ in final.candidates],
            final.kind,
            final.probability,
            self.bench.boots() - self.bench.recheck_boots,
            w.boots,
            w.builds,
            rc,
            warned,
            first,
            confirmed=_confirmed(search, rc, run.verification),
            recheck_boots=self.bench.recheck_boots,
            after_first=self.bench.boots() - self.bench.recheck_boots - first_stop,
            story=run.story,
            tested=dict(search.tested),
            rounds=self.bench.endpoint_rounds(self.s.runs_min, self.s.runs_max) + w.rounds,
            verify_boots=self.bench.verify_boots,
            verify_builds=len(self.bench.reverts),
            verified=_verified(run),
        )


class Counted(Search):
    """The driver's posterior search, its test boots counted by why the search chose the
    revision: "" its own next test, "story" a test of the whole range's story, "probe" a
    long stretch no test has split (the roles a round's boots are planned with), "gap" a
    rest's endpoint check."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.tested: dict[str, int] = {}
        super().__init__(*args, **kwargs)

    def _take(self, plan: list[tuple[str, str]]) -> None:
        for _, role in plan:
            self._count(role, 1)
        super()._take(plan)

    def _failed(self, commit: str, role: str, why: str) -> None:
        super()._failed(commit, role, why)
        self._count(role, -1)

    def _gap(self) -> None:
        before = self.bench.boots()
        super()._gap()
        self._count("gap", self.bench.boots() - before)

    def _count(self, role: str, n: int) -> None:
        if role not in ("reference", "recheck"):
            why = "" if role == "test" else role
            self.tested[why] = self.tested.get(why, 0) + n


class StoryCounted(Counted, StorySearch):
    """`--story full`'s search (posterior/story_search.py), its test boots counted."""


def _verified(run: Run) -> dict[str, str]:
    """The revert checks the search ran, its passes' and the last: the commit reverted
    and the check's kind."""
    checks = [p.verification for p in run.passes]
    if run.verification is not None:
        checks.append(run.verification)
    return {v.culprit: v.kind for v in checks}


def _confirmed(search: Search, rc: str | None, v: Verification | None) -> bool:
    """What exit 0 means: a revert check restoring all of the gap (the revert decides,
    never the re-check alone: report/files.py summary), else Search.confirmed() where the
    search has it, else the re-check confirmed the answer."""
    if v is not None:
        return v.kind == "all"
    rule = getattr(search, "confirmed", None)
    return bool(rule()) if callable(rule) else rc == "confirmed"
