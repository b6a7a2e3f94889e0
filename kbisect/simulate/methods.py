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

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kbisect.bisect import check, recheck, references
from kbisect.bisect.git import judge
from kbisect.bisect.posterior.bench import RecheckOf, Sample, each
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.bisect.posterior.search import Search
from kbisect.bisect.posterior.story import Story
from kbisect.bisect.posterior.story_search import StorySearch
from kbisect.bisect.request import RECHECK_SAMPLES, Options
from kbisect.bisect.state import Run, Verification
from kbisect.core.exceptions import BuildError
from kbisect.simulate import gitmodel
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


class Sim:
    """The simulator's bench (the port of posterior/bench.py, and the store the git
    method's steps share): builds and boots in the world, every sample kept in memory."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.store: dict[str, list[drift.Timed]] = {}
        self.rechecked: dict[tuple[str, str], list[float]] = {}
        self.start = 0  # world boots when the bisection began
        self.recheck_boots = 0
        self.first_stop: int | None = None  # test boots before the first re-check boot
        # the revert check: the pass's reverts built so far, each one's true level, the
        # check's fresh samples of bad and of the revert, its boots and builds
        self.reverts: dict[str, float] = {}
        self.verified: dict[str, tuple[list[float], list[float]]] = {}
        self.verify_boots = 0
        self.reverted_rows: dict[str, list[drift.Timed]] = {}  # each revert's samples
        self.without: list[str] = []  # the rests' reverts, on every revision with them

    def take(self, commit: str) -> drift.Timed:
        """One boot of commit, kept in the store."""
        t, tps = self.world.boot(commit)
        row = drift.Timed(commit, t, tps)
        self.store.setdefault(commit, []).append(row)
        return row

    def tps(self, commit: str) -> list[float]:
        return [r.tps for r in self.store.get(commit, [])]

    def top_up(self, commit: str, k: int) -> list[float]:
        """At least k samples of commit."""
        while len(self.store.get(commit, [])) < k:
            self.take(commit)
        return self.tps(commit)

    def rows(self, *commits: str) -> list[drift.Timed]:
        return [r for c in commits for r in self.store.get(c, [])]

    # --- the port ---------------------------------------------------------------------------

    def boots(self) -> int:
        """The search's boots: the revert check's are counted apart (verify_boots)."""
        return self.world.boots - self.start - self.verify_boots

    def stored(self, commit: str) -> tuple[list[Sample], str | None]:
        """Every sample went into the posterior when it was taken; but a rest's BAD: the
        revert check's samples of its revert."""
        if self.without and commit == self.world.history.graph.bad:
            rows = self.reverted_rows.get(self.without[-1], [])
            return [Sample(commit, r.t - self.start, r.tps) for r in rows], None
        return [], None

    def level(self, commit: str) -> float | str:
        """commit's true tps, with the rests' reverts where it has them; or why not."""
        return (
            self.world.reverted(self.without, commit)
            if self.without
            else self.world.history.tps(commit)
        )

    def build(self, commit: str) -> None:
        if not self.world.build(commit):
            raise BuildError(f"{commit} does not build")
        if isinstance(why := self.level(commit), str):
            raise BuildError(why)

    def boot(self, commit: str, recheck_of: str | None = None) -> list[Sample]:
        self.world.rounds += 1
        return [self._one(commit, recheck_of, 0)]

    def _one(self, commit: str, recheck_of: str | None, machine: int) -> Sample:
        level = self.level(commit)
        assert isinstance(level, float)  # build() refused a revision it does not apply on
        if recheck_of is None:
            t, tps = self.world.draw(level, machine)
            row = drift.Timed(commit, t, tps)
            self.store.setdefault(commit, []).append(row)
        else:
            if self.first_stop is None:
                self.first_stop = self.boots() - self.recheck_boots
            t, tps = self.world.draw(level, machine)
            row = drift.Timed(commit, t, tps)
            self.rechecked.setdefault((recheck_of, commit), []).append(tps)
            self.recheck_boots += 1
        return Sample(commit, row.t - self.start, row.tps, machine=self.machine(row.t))

    def machine(self, t: float) -> str:
        """The name of the machine of the boot at time t ("": a pool of one)."""
        return f"m{self.world.machine_log[int(t)]}" if self.width() > 1 else ""

    def width(self) -> int:
        return len(self.world.offsets)

    def boot_round(
        self, commits: list[str], recheck_of: RecheckOf = None
    ) -> list[list[Sample] | BaseException]:
        """One round: the i-th boot on machine (round + i) mod k, so that a revision
        sampled in turn (a re-check's pairs) moves from machine to machine."""
        self.world.rounds += 1
        k, start = self.width(), self.world.rounds
        whose = each(recheck_of, len(commits))
        return [
            [self._one(c, r, (start + i) % k)]
            for i, (c, r) in enumerate(zip(commits, whose, strict=True))
        ]

    def endpoint_rounds(self, runs_min: int, runs_max: int) -> int:
        """The endpoint check's rounds on the pool (modelled: the simulator takes the
        endpoints one boot at a time): the first look's boots at once (check.first_look a
        side), then a look's k/2 pairs a round (check.pairs_a_look); a boot a round on
        one machine."""
        n, k = self.start, self.width()
        if k == 1:
            return n
        every = check.pairs_a_look(k)
        first = min(n, 2 * check.first_look(runs_min, runs_max, every))
        return -(-first // k) + -(-(n - first) // (2 * every))

    def fresh(self, culprit: str, commit: str) -> list[float]:
        return list(self.rechecked.get((culprit, commit), []))

    def revert(self, culprit: str) -> str | None:
        """Bad with culprit reverted, on top of the pass's earlier reverts (a build, counted
        once: len(reverts)); why not, when it does not apply."""
        if culprit not in self.reverts:
            level = self.world.reverted([*self.reverts, culprit])
            if isinstance(level, str):
                return level
            self.reverts[culprit] = level
        return None

    def verify_round(self, culprit: str, sides: list[str]) -> list[float | BaseException]:
        """A round of the revert check on the pool: the revert, bad or good (the good
        endpoint's store), the i-th boot on machine (round + i) mod k as boot_round's."""
        self.world.rounds += 1
        k, start, bad = self.width(), self.world.rounds, self.world.history.graph.bad
        level = {"revert": self.reverts[culprit], "bad": self.level(bad)}
        level["good"] = self.world.history.tps(GOOD)
        fresh = self.verified.setdefault(culprit, ([], []))
        out: list[float | BaseException] = []
        for i, side in enumerate(sides):
            t, tps = self.world.draw(float(level[side]), (start + i) % k)
            self.verify_boots += 1
            if side == "good":
                self.store.setdefault(GOOD, []).append(drift.Timed(GOOD, t, tps))
            else:
                fresh[side == "revert"].append(tps)
            if side == "revert":
                self.reverted_rows.setdefault(culprit, []).append(drift.Timed(bad, t, tps))
            out.append(tps)
        return out

    def verify_tps(self, culprit: str) -> tuple[list[float], list[float], list[float]]:
        bad, reverted = self.verified.get(culprit, ([], []))
        ends = [] if self.without else self.tps(self.world.history.graph.bad)
        return self.tps(GOOD), ends + bad, list(reverted)

    def rest(self, culprit: str, contains: Callable[[str], bool]) -> None:
        """From now on every revision with culprit is drawn with it reverted (level());
        BAD's samples are its revert's (stored()); the plain ones of those revisions go."""
        self.without.append(culprit)
        bad = self.world.history.graph.bad
        self.store = {c: rows for c, rows in self.store.items() if not contains(c)}
        self.store[bad] = list(self.reverted_rows.get(culprit, []))

    def save(self, run: Run, post: Posterior, schedule: references.Schedule | None) -> None:
        pass

    def say(self) -> bool:
        return False


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
    long stretch no test has split (the roles a round's boots are planned with)."""

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
