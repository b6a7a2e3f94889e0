"""kbisect's bisection methods on a simulated world, each returning what it would report.

Both start like `kbisect bisect`: the endpoints alternately, runs_min boots each, then a
pair more until stats.verdict calls bad a regression (confidence split over the looks, as
check.measure_endpoints does) or runs_max: refused.

- sequential: today's path (git bisect run + bisect/run): gitmodel.bisect with
  sequential.decide against the geometric mean of the endpoint means, the second pass
  over unclear skips with twice runs_max, then the fixed re-check (recheck_samples fresh
  boots of culprit and parent; it only flags, it does not change the answer);
- posterior: posterior.Posterior with choice.best per cost, stop at `confidence`, then
  the adaptive re-check (confirm.py) whose fresh samples go into the posterior; if the
  culprit no longer holds the confidence the bisection goes on;
- with refs=True (drift-aware references, drift.py): one reference boot (good and bad
  endpoint in turn) after every `every` test boots; sequential decides on samples brought
  back along the references' fitted drift, the posterior fits a time trend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbisect.bisect import check, references
from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.likelihood import Model
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.simulate import gitmodel
from kbisect.simulate.histories import GOOD
from kbisect.simulate.world import World
from kbisect.stats import confirm, drift, means
from kbisect.stats import sequential as seq_rule


@dataclass(frozen=True)
class Settings:
    runs_min: int = 3
    runs_max: int = 10
    recheck_samples: int = 8
    confidence: float = 0.95
    budget: int = 100  # posterior: boots after the endpoints, re-checks included
    every: int = 3  # drift-aware references: one reference boot per `every` test boots
    build_cost: float = 0.15  # a build, in boots
    recheck: confirm.Rule = field(default_factory=confirm.Rule)
    gate: bool = True  # refuse endpoints that do not differ (False: runs_min each, go on)


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


def endpoints(world: World, s: Settings, refs: list[drift.Timed]) -> bool:
    """Measure both endpoints into refs; False when bad is not significantly worse."""
    bad = world.history.graph.bad
    confidence = check.endpoint_confidence(s.runs_min, s.runs_max)
    for n in range(1, s.runs_max + 1):
        for commit in (GOOD, bad) if n % 2 else (bad, GOOD):
            t, tps = world.boot(commit)
            refs.append(drift.Timed(commit, t, tps))
        if n >= s.runs_min and not s.gate:
            return True
        if n >= s.runs_min:
            g = [r.tps for r in refs if r.revision == GOOD]
            b = [r.tps for r in refs if r.revision == bad]
            if means.verdict(g, b, confidence=confidence).kind == "regression":
                return True
    return False


def _warned(refs: list[drift.Timed]) -> bool:
    return drift.warning(drift.trend(refs), "the run", "") is not None


def _reference_boot(world: World, schedule: references.Schedule | None, refs: list[drift.Timed]
                    ) -> drift.Timed | None:  # fmt: skip
    ref = schedule.due() if schedule is not None else None
    if ref is None or schedule is None:
        return None
    t, tps = world.boot(ref)
    refs.append(drift.Timed(ref, t, tps))
    schedule.took(ref)
    return refs[-1]


class Sequential:
    """Today's method, optionally with drift-aware references."""

    def __init__(self, world: World, s: Settings, refs: bool) -> None:
        self.world, self.s = world, s
        self.refs: list[drift.Timed] = []
        bad = world.history.graph.bad
        self.schedule = references.Schedule(GOOD, bad, s.every) if refs else None
        self.store: dict[str, list[drift.Timed]] = {}

    def _slope(self) -> float:
        return drift.correction(self.refs) if self.schedule is not None else 0.0

    def judge(self, most: int) -> gitmodel.Judge:
        def run(commit: str) -> str:
            if not self.world.build(commit):
                return "skip"
            samples = self.store.setdefault(commit, [])
            while True:
                slope = self._slope()
                threshold = drift.threshold(self.refs, GOOD, self.world.history.graph.bad, slope)
                d = seq_rule.decide(drift.detrended(samples, slope), threshold,
                                    runs_min=self.s.runs_min, runs_max=most)  # fmt: skip
                if d.verdict in ("good", "bad"):
                    return d.verdict
                if len(samples) >= most:
                    return "skip"
                if _reference_boot(self.world, self.schedule, self.refs) is None:
                    t, tps = self.world.boot(commit)
                    samples.append(drift.Timed(commit, t, tps))
                    if self.schedule is not None:
                        self.schedule.took(commit)

        return run

    def run(self) -> Result:
        h, w = self.world.history, self.world
        if not endpoints(w, self.s, self.refs):
            return Result([], "refused", boots=w.boots)
        start = w.boots
        first, second = self.judge(self.s.runs_max), self.judge(2 * self.s.runs_max)
        found, tested = gitmodel.bisect(h.graph, first, h.broken, second)
        bisect_boots = w.boots - start
        confirmed = self._recheck(found, tested)
        warned = self.schedule is not None and _warned(self.refs)
        kind = "culprit" if len(found) == 1 else "range"
        return Result(found, kind, None, bisect_boots, w.boots, w.builds, confirmed, warned)

    def _recheck(self, found: list[str], tested: list[tuple[str, str]]) -> str:
        g = self.world.history.graph
        if len(found) == 1:
            parent, culprit = g.first_parent(found[0]), found[0]
        else:
            goods = [c for c, v in tested if v == "good"] or [GOOD]
            bads = [c for c, v in tested if v == "bad"] or [g.bad]
            parent, culprit = goods[-1], bads[-1]
        if not (self.world.build(parent) and self.world.build(culprit)):
            return "error"
        a, b = [], []
        for _ in range(self.s.recheck_samples):
            a.append(self.world.boot(parent)[1])
            b.append(self.world.boot(culprit)[1])
        return "confirmed" if means.verdict(a, b).kind == "regression" else "not confirmed"


class Bayes:
    """The posterior method, optionally with drift-aware references."""

    def __init__(self, world: World, s: Settings, refs: bool) -> None:
        self.world, self.s = world, s
        g = world.history.graph
        self.post = Posterior(g, Model(trend=refs))
        self.refs: list[drift.Timed] = []
        self.schedule = references.Schedule(GOOD, g.bad, s.every) if refs else None
        self.rechecks: dict[str, str] = {}
        self.first: tuple[str, float] | None = None

    def _sample(self, commit: str) -> None:
        t, tps = self.world.boot(commit)
        self.post.update(commit, tps, t)

    def _step(self) -> bool:
        """One boot (or a failed build); False when no revision can split the rest."""
        ref = _reference_boot(self.world, self.schedule, self.refs)
        if ref is not None:
            self.post.update(ref.revision, ref.tps, ref.t)
            return True
        commit = self.post.next(Cost(build=self.s.build_cost))
        if commit is None:
            return False
        if not self.world.build(commit):
            self.post.failed(commit)
            return True
        self._sample(commit)
        if self.schedule is not None:
            self.schedule.took(commit)
        return True

    def _recheck(self, culprit: str) -> str:
        """Fresh pairs of parent and culprit until confirm.decide says more than "more"."""
        g = self.world.history.graph
        parent = g.first_parent(culprit)
        if not self.world.build(parent):
            self.post.failed(parent)
            return "error"
        a: list[float] = []
        b: list[float] = []
        while True:
            for commit, into in ((parent, a), (culprit, b)):
                t, tps = self.world.boot(commit)
                self.post.update(commit, tps, t)
                into.append(tps)
            step = confirm.decide(a, b, self.s.recheck)
            if step.kind != "more":
                return step.kind

    def run(self) -> Result:
        w = self.world
        if not endpoints(w, self.s, self.refs):
            return Result([], "refused", boots=w.boots)
        for r in self.refs:
            self.post.update(r.revision, r.tps, r.t)
        start, recheck_boots = w.boots, 0
        while w.boots - start < self.s.budget:
            answer = self.post.stop(self.s.confidence)
            if answer is not None:
                top = answer.candidates[0][0]
                if answer.kind != "culprit" or top in self.rechecks:
                    break
                before = w.boots
                self.first = self.first or answer.candidates[0]
                self.rechecks[top] = self._recheck(top)
                recheck_boots += w.boots - before
            elif not self._step():
                break
        final = self.post.answer(self.s.confidence)
        warned = self.schedule is not None and _warned(self.refs)
        return Result([c for c, _ in final.candidates], final.kind, final.probability,
                      w.boots - start - recheck_boots, w.boots, w.builds,
                      self.rechecks.get(final.candidates[0][0]), warned, self.first)  # fmt: skip
