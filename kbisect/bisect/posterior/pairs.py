"""The culprit/parent re-check of the posterior search (search.py; recheck.py's rule): the
answer against its parent with fresh pairs until the adaptive rule decides, the fallback
where the revert check could not be measured, and every change's re-check under
`--story full`. A mixin of Search: it reads the search's bench, posterior, options and
run, and feeds the fresh pairs into the posterior.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple, replace

from kbisect.bisect import recheck
from kbisect.bisect.posterior.bench import Bench, Sample
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.request import Options
from kbisect.bisect.state import Recheck, Run
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError

EXPLAINS_CONFIDENCE = 0.995  # the explanation's claims, each wrong at most 0.5%


class Pairs:
    """The re-check's half of Search (module docstring)."""

    bench: Bench
    post: Posterior
    opts: Options
    run: Run
    k: int  # machines: the samples one round takes at once
    ends: tuple[list[float], list[float]]  # the endpoints' samples from before the search

    def feed(self, found: list[Sample]) -> int:
        raise NotImplementedError

    def save(self) -> None:
        raise NotImplementedError

    def fail(self, commit: str, why: str) -> None:
        raise NotImplementedError

    def _say(self, line: Callable[[], str]) -> None:
        raise NotImplementedError

    def _draw_pairs(self, parent: str, culprit: str, most: int) -> None:
        """A re-check's round: fresh samples of parent and culprit in turn on the k
        machines (the shorter side first), never past `most` pairs; over a pool, each
        pair's two boots on two machines, the sides swapping machines from round to round
        (the bench's rotation), so a machine effect is not read as the step."""
        a = len(self.bench.fresh(culprit, parent))
        b = len(self.bench.fresh(culprit, culprit))
        tasks: list[str] = []
        while len(tasks) < self.k and (min(a, b) < most or a != b):
            if a <= b:
                tasks.append(parent)
                a += 1
            else:
                tasks.append(culprit)
                b += 1
        failed = None
        for got in self.bench.boot_round(tasks or [parent], culprit):
            if isinstance(got, BaseException):
                failed = failed or got
            else:
                self.feed(got)
        self.save()
        if failed is not None:
            raise failed

    def _entered(self, answer: Answer) -> tuple[str, str, Recheck]:
        """The answer's re-check pair (parent, culprit) and its entry in the state's
        rechecks, "running" until it decides; the search's first stop noted."""
        parent, culprit = recheck.pair(self.post, answer)
        if self.run.first_stop is None:
            self.run.first_stop = {"commit": culprit, "p": answer.probability, "kind": answer.kind}
        rc = self.run.rechecks.setdefault(culprit, Recheck(parent))
        return parent, culprit, rc

    def recheck(self, answer: Answer, improvement: bool = False) -> None:
        """The answer against its parent, fresh pairs until the adaptive rule decides
        (recheck.py); the result in the state's rechecks, the samples in the posterior.
        improvement: the answer is a change for the better (a fix inside the range),
        confirmed in that direction."""
        parent, culprit, rc = self._entered(answer)
        # a round draws k/2 pairs and the rule looks once per round
        rule = replace(recheck.adaptive(self.opts), every=max(self.k // 2, 1))
        if improvement:
            rule = replace(rule, higher_is_better=not rule.higher_is_better)
            rc.improvement = True
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
            rc.fail(str(exc))
            return

        try:
            step, a, b = recheck.sample(
                parent,
                culprit,
                rule,
                lambda c: self.bench.fresh(culprit, c),
                lambda _: self._draw_pairs(parent, culprit, rule.most),
            )
        except (BootError, BenchmarkError) as exc:
            rc.fail(str(exc))
            return
        rc.kind, rc.ratio, rc.low, rc.high, rc.n = astuple(step)
        rc.parent_tps, rc.culprit_tps, rc.confirmed = a, b, step.kind == "confirmed"
        rc.level, rc.min_effect = rule.level, rule.min_effect
        if not improvement and len(self.ends[0]) >= 2 and len(self.ends[1]) >= 2:
            # does the step account for good -> bad? (partial: the rest is elsewhere;
            # excess: something inside the range gave part of it back)
            # at a stricter level: the endpoint samples passed the gate, which favours
            # samples that overstate the difference (the winner's curse), so a true single
            # step looks "partial" more often than its level says
            strict = replace(rule, confidence=EXPLAINS_CONFIDENCE)
            told = recheck.explained(a, b, self.ends[0], self.ends[1], strict)
            rc.explains, rc.partial = told, told["kind"] == "partial"
        self._say(lambda: recheck.line(culprit, rc.as_dict()))
