"""`kbisect bisect --method posterior`: the driver's loop over the posterior.

Every sample is evidence (posterior.py): the endpoints', every revision's, the
references' and the re-check's. Each round, until `--max-boots` boots after the
endpoints (re-checks and references included):

1. stop: when one commit, or a group no test can split (a range), holds `--confidence`,
   re-check it once (recheck.py: fresh pairs of it and its parent until the ratio's
   interval clears the minimum effect); the fresh samples feed the posterior, and the
   search ends if the answer still holds, or goes on if it does not;
2. a reference boot when one is due (references.Schedule: after every `--references` test
   boots, the good, then the bad endpoint; the posterior then fits a time trend);
3. else the revision with the most expected information per cost (choice.py): its stored
   samples first (a revisit, another bisection's, `--method git`'s), else it is built
   and booted once. A build or boot failure makes it untestable: no evidence, never a
   verdict.

The loop reaches builds and boots only through a Bench (bench.py): the driver's builds in
its worktree and boots on the target (start()), the simulator's in a modelled world.

The state (visited revisions, failures, re-checks, the reference schedule) is saved in
state.json after every boot, with the posterior's `as_dict()`; `--resume` rebuilds the
posterior from the stored samples of the visited revisions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kbisect.bisect import recheck, references, samples
from kbisect.bisect.posterior import graph
from kbisect.bisect.posterior.bench import Bench, Sample, Store
from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.likelihood import Model
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.state import Run
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError

BUILD_COST = 0.15  # a build, in boots: an incremental build ~20 s against a ~2.5 min boot


class Search:
    """One posterior bisection of `g` through `bench`: the posterior, the evidence in it
    (the endpoints' first, or a resumed search's), and the run's state."""

    def __init__(self, g: graph.Graph, bench: Bench, run: Run, evidence: list[Sample]) -> None:
        self.graph, self.bench, self.run = g, bench, run
        self.opts = run.options
        self.post = Posterior(g, Model(trend=self.opts.references > 0))
        self.schedule = None
        if self.opts.references > 0:
            turn = run.schedule or {"tests": 0, "turn": 0}
            self.schedule = references.Schedule(
                run.good, run.bad, self.opts.references, turn["tests"], turn["turn"]
            )
        self.feed(evidence)
        for commit in run.failed:
            self.post.failed(commit)

    def feed(self, found: list[Sample]) -> int:
        """Samples into the posterior; how many."""
        for s in found:
            self.post.update(s.commit, s.tps, s.t, s.load)
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

    # --- one round ------------------------------------------------------------------------

    def find(self) -> Answer:
        """Sample until the answer holds after its re-check, or nothing can split the
        rest, or the budget is spent; the final answer."""
        while self.bench.boots() < self.opts.max_boots:
            answer = self.post.stop(self.opts.confidence)
            if answer is not None:
                if not recheck.due(self.run, answer):
                    break
                self.recheck(answer)
            elif not self._reference() and not self._test():
                break
            self.save()
        self.save()
        return self.post.answer(self.opts.confidence)

    def _reference(self) -> bool:
        """One reference boot if one is due; a failure is a warning (it booted before)."""
        ref = self.schedule.due() if self.schedule is not None else None
        if ref is None or self.schedule is None:
            return False
        self._say(lambda: f"reference: {'good' if ref == self.run.good else 'bad'} {ref[:12]}")
        try:
            self.bench.build(ref)
            self.feed(self.bench.boot(ref))
        except (BootError, BenchmarkError) as exc:
            progress.warn(f"reference {ref[:12]} failed, no sample this time: {exc}")
        self.schedule.took(ref)
        return True

    def _test(self) -> bool:
        """One more sample of the best revision; False when no test can split the rest."""
        commit = self.post.next(Cost(build=BUILD_COST))
        if commit is None:
            return False
        self._say(lambda: f"testing {commit[:12]} (P(bad) = {self._p_bad(commit):.2f})")
        found, failure = self.bench.stored(commit)
        if failure is not None:
            self.fail(commit, f"stored failure, not retried: {failure}")
            return True
        if commit not in self.run.visited:
            self.run.visited.append(commit)
        if self.feed(found):
            self._say(lambda: f"reusing stored sample(s) of {commit[:12]}")
            return True
        try:
            self.bench.build(commit)
            self.post.built(commit)
            found = self.bench.boot(commit)
        except BuildError as exc:
            self.fail(commit, f"build failed: {exc}")
            return True
        except (BootError, BenchmarkError) as exc:
            kind = "boot" if isinstance(exc, BootError) else "benchmark"
            self.fail(commit, f"{kind} failed: {exc}")
            return True
        self.feed(found)
        if self.schedule is not None:
            self.schedule.took(commit)
        tps = found[-1].tps if found else 0.0
        self._say(lambda: f"{commit[:12]}: {tps:.1f} tps; {self._standing()}")
        return True

    def recheck(self, answer: Answer) -> None:
        """The answer against its parent, fresh pairs until the adaptive rule decides
        (recheck.py); the result in the state's rechecks, the samples in the posterior."""
        parent, culprit = recheck.pair(self.post, answer)
        run = self.run
        if run.first_stop is None:
            run.first_stop = {"commit": culprit, "p": answer.probability, "kind": answer.kind}
        rc = run.rechecks.setdefault(culprit, {"parent": parent, "kind": "running"})
        rule = recheck.adaptive(self.opts)
        self._say(
            lambda: (
                f"{culprit[:12]} holds P = {answer.probability:.3f}: re-checking it "
                f"against {parent[:12]}, fresh pairs until the ratio is clear (at most {rule.most})"
            )
        )
        try:
            for c in (parent, culprit):
                self.bench.build(c)
        except BuildError as exc:
            self.fail(parent, f"build failed: {exc}")
            rc.update(kind="error", error=str(exc), confirmed=False)
            return

        def draw(commit: str) -> None:
            self.feed(self.bench.boot(commit, culprit))
            self.save()

        try:
            step, a, b = recheck.sample(
                parent, culprit, rule, lambda c: self.bench.fresh(culprit, c), draw
            )
        except (BootError, BenchmarkError) as exc:
            rc.update(kind="error", error=str(exc), confirmed=False)
            return
        rc.update(
            step.as_dict(),
            parent_tps=a,
            culprit_tps=b,
            confirmed=step.kind == "confirmed",
            level=rule.level,
            min_effect=rule.min_effect,
        )
        self._say(lambda: recheck.line(culprit, rc))

    def _p_bad(self, commit: str) -> float:
        return self.post.p_bad(commit) if commit in self.graph.index else 0.0

    def _standing(self) -> str:
        probs = self.post.probabilities()
        best = max(range(self.graph.n), key=lambda i: probs[i])
        return f"most likely {self.graph.commits[best][:12]} at P = {probs[best]:.3f}"


def start(ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> Search:
    """The driver's search: the range read from the tree, the target and the store as its
    bench, the posterior rebuilt from the stored samples when it is resumed."""
    if run.bisect_t0 is None:  # the search begins
        run.bisect_t0 = time.time()
        run.visited = [run.good, run.bad]
    store = Store(ctx, top, run_dir, run)
    return Search(graph.read(top, [run.good], run.bad), store, run, store.evidence())
