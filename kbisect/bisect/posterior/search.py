"""`kbisect bisect --method posterior`: the driver's loop over the posterior.

Every sample is evidence (posterior.py): the endpoints', every revision's, the
references' and the re-check's. Each round the loop asks the decision rule (bisect/rule.py)
what to do, from a view of the posterior and the run (view()), and does it:

- Measure: the tests the posterior offers (the most expected information per cost,
  posterior.batch): their stored samples first (a revisit, another bisection's,
  `--method git`'s), else each is built and booted once; a build or boot failure makes
  it untestable (no evidence, never a verdict);
- Reference: a boot of the good or the bad endpoint (references.Schedule; the posterior
  then fits a time trend);
- Verify: the revert check of the answer that holds `--confidence` (verify.py): begun,
  then a round of boots of bad with it reverted and of bad at a time;
- Recheck: the answer against its parent with fresh pairs (recheck.py), where the revert
  could not be measured;
- Rest: the answer's revert restored part of the gap or none of it: the pass is kept in
  the state (state.Pass) and the rest bisected at once by a new posterior over the same
  range, with the answer reverted on every revision that contains it (the bench's rest()):
  the samples of the revisions without it carry over, BAD's are the revert check's;
- Stop or GiveUp: the search ends.

A round on a pool of k machines is filled by asking the rule again while it asks for
tests or references; any other action waits for the round's samples. The loop reaches
builds and boots only through a Bench (bench.py): the driver's builds in its worktree and
boots on the target (start()), the simulator's in a modelled world. `--story full` is
story_search.py's search, on top of this one.

The state (visited revisions, failures, re-checks, the revert check, the reference
schedule) is saved in state.json after every round, with the posterior's `as_dict()`;
`--resume` rebuilds the posterior from the stored samples of the visited revisions and
goes on with the revert check from its stored samples.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

from kbisect.bisect import check, recheck, references, rule, samples, verify
from kbisect.bisect.posterior import graph
from kbisect.bisect.posterior.bench import Bench, Sample, Store
from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.likelihood import Model
from kbisect.bisect.posterior.pairs import Pairs
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.state import Pass, Run, Verification
from kbisect.core import progress
from kbisect.core.exceptions import BootError, BuildError

BUILD_COST = 0.15  # a build, in boots: an incremental build ~20 s against a ~2.5 min boot


class Search(Pairs):
    """One posterior bisection of `g` through `bench`: the posterior, the evidence in it
    (the endpoints' first, or a resumed search's), and the run's state."""

    def __init__(self, g: graph.Graph, bench: Bench, run: Run, evidence: list[Sample]) -> None:
        self.graph, self.bench, self.run = g, bench, run
        self.opts = run.options
        self.k = max(1, bench.width())  # machines: the samples one round takes at once
        self.post = Posterior(g, Model(trend=self.opts.references > 0, machines=self.k > 1))
        self.plan: list[tuple[str, str]] = []  # the round being planned
        self.early: str | None = None  # the culprit whose re-check pairs the round starts
        self.begun: set[str] = set()  # the revert checks this process began (or resumed)
        self.clock = progress.Clock()  # the boots of the revert check or rest's endpoint check
        self.schedule = None
        if self.opts.references > 0:
            turn = run.schedule or {"tests": 0, "turn": 0}
            self.schedule = references.Schedule(
                run.good, run.bad, self.opts.references, turn["tests"], turn["turn"]
            )
        self.feed(evidence)
        # the endpoints' samples from before the search: what a step must account for
        ends = (run.good, run.bad)
        good, bad = ([s.tps for s in evidence if s.commit == c and s.t < 0] for c in ends)
        self.ends: tuple[list[float], list[float]] = (good, bad)
        for commit in run.failed:
            self.post.failed(commit)
        self._began = (time.monotonic(), bench.boots())  # this process's: for the time left
        self._pass = bench.boots() if run.passes else 0  # the boots before this pass's

    def find(self) -> Answer:
        """Rounds of the rule's actions until it stops or gives up; the final answer."""
        try:
            while (end := self._next_round()) is None:
                self.save()
        finally:
            progress.done()
        self._say(lambda: f"{'done' if isinstance(end, rule.Stop) else 'giving up'}: {end.why}")
        self.save()
        return self.post.answer(self.opts.confidence)

    def view(self) -> rule.View:
        """What the rule decides on, now (the round planned so far as if taken)."""
        answer = self.post.stop(self.opts.confidence)
        culprit = recheck.pair(self.post, answer)[1] if answer is not None else None
        left = self.opts.max_boots - self.bench.boots() - len(self.plan)
        due = self.schedule.due() if self.schedule is not None else None
        best: list[str] = []
        if answer is None and left > 0 and due is None:  # the tests only where they count
            best = self.post.batch(self._slots() - len(self.plan), Cost(build=BUILD_COST))
        v, check = self.run.verification, rule.Check()
        if v is not None and v.culprit == culprit and culprit in self.begun:
            got = (tuple(x or ()) for x in (v.bad_tps, v.reverted_tps, v.good_tps))
            check = rule.Check(v.kind, *got)
        rc = self.run.rechecks.get(culprit) if culprit is not None else None
        kind = rc.kind if rc is not None else rule.NOT_BEGUN
        gone = tuple(self.run.reverted)
        gap = self.run.passes[-1].gap if self.run.passes else rule.NOT_BEGUN
        return rule.View(answer, culprit, left, due, tuple(best), check, kind, self.k, gone, gap)

    def _next_round(self) -> rule.Stop | rule.GiveUp | None:
        """One round: the rule asked until the round is full or it asks for something
        other than a test or a reference; the round's boots at once (_take), else that
        action taken. The Stop or GiveUp that ends the search, else None."""
        self.plan, self.early = [], None
        view = self.view()
        action = rule.decide(view)
        while isinstance(action, rule.Measure | rule.Reference):
            if isinstance(action, rule.Reference):
                self._reference(action.commit)
            for commit in action.commits if isinstance(action, rule.Measure) else ():
                if commit not in self.post.untestable:
                    self._planned_test(commit, "")
            if len(self.plan) >= self._slots():
                break
            view = self.view()
            action = rule.decide(view)
        plan, self.plan = self.plan, []
        if plan:
            self._take(plan)
        elif isinstance(action, rule.Verify):
            self._verify(action, view.answer)
        elif isinstance(action, rule.Recheck):
            self.recheck(action.answer)
        elif isinstance(action, rule.Rest):
            self._rest(action, view.answer)
        elif isinstance(action, rule.Gap):
            self._gap()
        elif isinstance(action, rule.Stop | rule.GiveUp):
            return action
        return None

    def _reference(self, ref: str) -> None:
        self._say(lambda: f"reference: {'good' if ref == self.run.good else 'bad'} {ref[:12]}")
        self._plan(ref, "reference")

    def _verify(self, action: rule.Verify, answer: Answer | None) -> None:
        """The revert check of the answer: begun (or resumed: its revert built again, its
        samples read), or its next round of boots."""
        v, culprit = self.run.verification, action.culprit
        if action.sides:
            assert v is not None
            verify.take(self.bench, v, list(action.sides), self.run.bad, self.clock)
            return
        if v is None or v.culprit != culprit:
            members = self._members(answer) if answer is not None else None
            v = Verification(culprit, without=self.run.reverted or None, members=members)
            self.run.verification = v
        if self.run.first_stop is None and answer is not None:
            self.run.first_stop = {"commit": culprit, "p": answer.probability, "kind": answer.kind}
        self.begun.add(culprit)
        if v.kind == "running":
            self._say(lambda: f"{culprit[:12]} holds P = {answer and answer.probability:.3f}")
            verify.begin(self.bench, v, self.run.bad)
            self.clock = progress.Clock()

    def _rest(self, action: rule.Rest, answer: Answer | None) -> None:
        """The pass ends (its answer and revert check kept in the state); the rest is
        bisected with its answer reverted wherever it is: a new posterior over the range,
        the samples of every revision without it kept, BAD's the revert check's."""
        v, x, bad = self.run.verification, action.culprit, self.run.bad
        assert v is not None and answer is not None
        self._say(lambda: f"{x[:12]}: {action.why}")
        self.run.passes.append(Pass(answer.as_dict(), v))
        kept = self._without(x, v.members or [x])
        self.run.verification, self.run.first_stop, self.begun = None, None, set()
        self._pass = self.bench.boots()
        self.run.visited = [c for c in self.run.visited if c == bad or c not in kept]
        self.run.failed = {c: why for c, why in self.run.failed.items() if c not in kept}
        for c in self.run.failed:
            self.post.failed(c)
        found = self.bench.stored(bad)[0]
        self.ends = (self.ends[0], [s.tps for s in found])
        self.feed(found)
        self.run.passes[-1].ends = [len(self.bench.tps(c)) for c in (self.run.good, bad)]

    def _gap(self) -> None:
        """The rest's endpoint check (rule.Gap): good and bad (with the earlier answers
        reverted) booted afresh as every bisection's endpoints are checked
        (check.endpoint_verdict), only the boots since the rest began counting: the
        samples of bad with them reverted that decided "part" were the slow ones."""
        p, ends = self.run.passes[-1], (self.run.good, self.run.bad)
        self._say(lambda: "the rest's endpoints: is a gap left with the answer reverted?")
        for commit in ends:
            self.bench.build(commit)
        self.clock = progress.Clock()

        def top_up(commit: str, k: int) -> list[float]:
            side = ends.index(commit)
            while len(fresh := self.bench.tps(commit)[p.ends[side] :]) < k:
                got = self.bench.boot_round([commit])[0]
                if isinstance(got, BaseException):
                    raise got
                self.feed(got)
                self.save()
                self.clock.done += 1
                if self.bench.say():
                    progress.step(self._gap_line(side, got[-1].tps, p.ends))
            return fresh

        v = check.endpoint_verdict(top_up, *ends, self.opts, check.pairs_a_look(self.k))
        p.gap, self._pass = v.kind, self.bench.boots()  # the pass's rate: its search's boots
        r = v.ratio
        self._say(lambda: f"the gap left: {r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}]: {v.kind}")

    def _gap_line(self, side: int, tps: float, before: list[int]) -> str:
        """A boot of the rest's endpoint check: what it measured, and the boots left at
        most (--runs-max a side) with the time they take."""
        ends = (self.run.good, self.run.bad)
        fresh = [len(self.bench.tps(c)) - n for c, n in zip(ends, before, strict=True)]
        most = 2 * self.opts.runs_max - sum(fresh)
        when = self.clock.left(most)
        return (
            f"the rest's {('good', 'bad')[side]}: {tps:.1f} tps ({fresh[side]} fresh; "
            f"at most {self.opts.runs_max} a side: {most} boots{when and ', '}{when})"
        )

    def _members(self, answer: Answer) -> list[str] | None:
        """A range answer's commits, oldest first, reverted together; None: one commit."""
        if answer.kind != "range" or len(answer.candidates) < 2:
            return None
        return sorted((c for c, _ in answer.candidates), key=self.graph.index.__getitem__)

    def _without(self, x: str, members: list[str]) -> set[str]:
        """The posterior begun again with x (a range answer: its members) reverted wherever
        it is (the bench's rest(), the samples of the revisions without it kept); the
        revisions with it."""
        gone = set().union(*(containing(self.graph, m) for m in members))
        self.bench.rest(x, reverts_in(self.graph, members))
        old, self.post = self.post, Posterior(self.graph, self.post.model)
        for s in old.samples:
            if s.commit not in gone:
                self.post.update(s.commit, s.tps, s.t, s.load, s.machine)
        return gone

    def feed(self, found: list[Sample]) -> int:
        """Samples into the posterior; how many."""
        for s in found:
            self.post.update(s.commit, s.tps, s.t, s.load, s.machine)
        return len(found)

    def _say(self, line: Callable[[], str]) -> None:
        if self.bench.say():
            progress.step(line())

    def fail(self, commit: str, why: str) -> None:
        self._say(lambda: f"{commit[:12]} is untestable (no evidence, never a verdict): {why}")
        self.run.failed[commit] = why
        self.post.failed(commit)

    def save(self) -> None:
        self.bench.save(self.run, self.post, self.schedule)

    def _slots(self) -> int:
        """The machines a round may use: k, within the budget."""
        return max(1, min(self.k, self.opts.max_boots - self.bench.boots()))

    def _plan(self, commit: str, role: str) -> None:
        self.plan.append((commit, role))
        if self.schedule is not None and role != "recheck":
            self.schedule.took(commit)

    def _take(self, plan: list[tuple[str, str]]) -> None:
        """The round's boots: each revision built (once), then every sample at once on
        the k machines (bench.boot_round). The state is saved first: a round cut short is
        resumed from the samples it wrote, the rest chosen again. A test whose build or
        boot fails gives its place in the reference schedule back: only a test boot
        that gave a sample counts."""
        self.save()
        jobs = []
        for commit, role in plan:
            try:
                self.bench.build(commit)
            except BuildError as exc:
                if role == "reference":
                    raise
                self._failed(commit, role, f"build failed: {exc}")
                continue
            if role != "reference":
                self.post.built(commit)
            jobs.append((commit, role))
        if self.bench.say():  # the round: its boots, of those expected
            progress.status(f"{self._expected()}: " + ", ".join(f"{c[:12]} ({r})" for c, r in jobs))
        whose = [self.early if role == "recheck" else None for _, role in jobs]
        results = self.bench.boot_round([c for c, _ in jobs], whose)
        said = []
        for (commit, role), got in zip(jobs, results, strict=True):
            if not isinstance(got, BaseException):
                self.feed(got)
                tps = got[-1].tps if got else 0.0
                said.append(f"{commit[:12]}: {tps:.1f} tps")
            elif role == "recheck" and self.early is not None:
                # as a re-check's failed boot: that re-check is over, not confirmed
                self.run.rechecks[self.early].fail(str(got))
            elif role == "reference":
                progress.warn(f"reference {commit[:12]} failed, no sample this time: {got}")
            else:
                kind = "boot" if isinstance(got, BootError) else "benchmark"
                self._failed(commit, role, f"{kind} failed: {got}")
        self._say(lambda: "; ".join([*said, self._standing()]))

    def _failed(self, commit: str, role: str, why: str) -> None:
        """A planned test's build or boot failed: untestable, and no test boot."""
        if commit not in self.post.untestable:
            self.fail(commit, why)
        if self.schedule is not None and role != "recheck" and self.schedule.tests > 0:
            self.schedule.tests -= 1

    def _planned_test(self, commit: str, why: str) -> None:
        """commit's stored samples as evidence, or else its next boot planned (a stored
        failure makes it untestable)."""
        said = f"{why}: " if why else ""
        self._say(lambda: f"{said}testing {commit[:12]} (P(bad) = {self._p_bad(commit):.2f})")
        found, failure = self.bench.stored(commit)
        if failure is not None:
            self.fail(commit, f"stored failure, not retried: {failure}")
            return
        if commit not in self.run.visited:
            self.run.visited.append(commit)
        if self.feed(found):
            self._say(lambda: f"reusing stored sample(s) of {commit[:12]}")
            return
        self._plan(commit, why or "test")

    def _p_bad(self, commit: str) -> float:
        return self.post.p_bad(commit) if commit in self.graph.index else 0.0

    def _expected(self) -> str:
        """The next boot of those the stopping rule expects: the boots so far, those for
        the bits the posterior still lacks to name one commit at the confidence at the bits
        per boot of this pass so far (the range's log2 size at its start; a rest begins
        again), and the re-check's least pairs while none has run; the cap (--max-boots);
        the time left at this process's rate (none before its first boot)."""
        n, cap = self.bench.boots(), self.opts.max_boots
        probs = [p for p in self.post.probabilities() if p > 0]
        c = self.opts.confidence
        lacks = (
            -sum(p * math.log2(p) for p in probs) + c * math.log2(c) + (1 - c) * math.log2(1 - c)
        )
        mine = n - self._pass
        rate = (math.log2(self.graph.n) - lacks) / mine if mine > 0 else 0.0
        later = 0 if self.run.rechecks else 2 * recheck.adaptive(self.opts).least
        expected = cap if rate <= 0 else min(cap, n + max(1, math.ceil(lacks / rate)) + later)
        since, boots = self._began
        left = progress.time_left(time.monotonic() - since, n - boots, expected - n)
        of = f"of ~{expected} (at most {cap})" if expected < cap else f"of at most {cap}"
        return f"boot {n + 1} {of}{left and ', '}{left}"

    def _standing(self) -> str:
        probs = self.post.probabilities()
        best = max(range(self.graph.n), key=lambda i: probs[i])
        return f"most likely {self.graph.commits[best][:12]} at P = {probs[best]:.3f}"


def start(
    ctx: samples.Context, top: Path, run_dir: Path, run: Run, kind: type[Search] = Search
) -> Search:
    """The driver's search (`kind`: this one, or --story full's): the range read from the
    tree, the target and the store as its bench, the posterior rebuilt from the stored
    samples when it is resumed."""
    if run.bisect_t0 is None:  # the search begins
        run.bisect_t0 = time.time()
        run.visited = [run.good, run.bad]
    store, g = Store(ctx, top, run_dir, run), graph.read(top, [run.good], run.bad)
    for p in run.passes:  # a rest resumed: its reverts again
        v = p.verification
        store.rest(v.culprit, reverts_in(g, v.members or [v.culprit]))
    return kind(g, store, run, store.evidence())


def containing(g: graph.Graph, x: str) -> set[str]:
    """The revisions of the range that contain x."""
    return {c for c in g.commits if g.is_bad(c, x)}


def reverts_in(g: graph.Graph, members: list[str]) -> Callable[[str], list[str]]:
    """Bench.rest's `reverts`: the members (oldest first) a revision contains, newest
    first."""
    return lambda revision: [m for m in reversed(members) if g.is_bad(revision, m)]
