"""`kbisect bisect --story full`: the posterior search that tells the whole range's story
(story.py), the research option. On top of the one-step search (search.py) it checks a
single step where no test has split the range (probes of the longest untested stretch,
story.stretch), judges every tested revision against the level one step says it is at
(doubts: "against", "unclear"), re-checks each change it names against its parent, and
when one step does not fit the samples searches the story's changes (the revision with
the most expected information about the story per cost). It costs boots: the probes, the
doubts' samples and the re-checks come before the revert check of the answer, which it
takes at the end as the git method does (verify.verify). Exit 0 needs the story single or
several, each change confirmed (state.Run.confirmed) or the revert restoring the gap.

A pool's round is planned one decision at a time (_round) until it is full or a decision
needs the planned samples first (_Full).
"""

from __future__ import annotations

from typing import Any

from kbisect.bisect import recheck, verify
from kbisect.bisect.posterior import story
from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.doubts import Doubts
from kbisect.bisect.posterior.posterior import Answer
from kbisect.bisect.posterior.search import BUILD_COST, Search
from kbisect.bisect.state import Verification
from kbisect.core import progress
from kbisect.stats.split import Fit


class StorySearch(Doubts, Search):
    """The search of `--story full` (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        run = self.run
        # the one-step search, or the story's (the samples contradict one step)
        self.wide = run.story is not None and run.story.kind not in ("single",)
        self.range_model: story.RangeModel | None = None
        self.told: story.Story | None = None  # the last story told
        self._held: dict[tuple[str, int], Fit | None] = {}  # _held_out's
        self._held_n = -1  # the number of samples they were fitted to

    def find(self) -> Answer:
        """Sample until the story holds after its re-checks, or nothing can split the
        rest, or the budget is spent; then the revert check of the final answer (verify.py,
        as the git method takes it); the answer (git's single first bad commit; the whole
        story is in run.story)."""
        try:
            while self.bench.boots() < self.opts.max_boots:
                if not self._story_round():
                    break
                self.save()
        finally:
            progress.done()
        self.tell()
        self.save()
        answer = self.post.answer(self.opts.confidence)
        if answer.kind != "undecided":
            culprit = recheck.pair(self.post, answer)[1]
            if self.run.verification is None or self.run.verification.culprit != culprit:
                self.run.verification = Verification(culprit)
            verify.verify(self.bench, self.run, self.save)
        return answer

    def _story_round(self) -> bool:
        """One round on the k machines (a plain target: k = 1): the decisions of _round()
        taken one after the other, each planning its boot (the one-step search's test plans
        a whole batch for the free machines, posterior.batch), until the round is full or a
        decision needs the samples first (a re-check, which takes its own rounds, or a
        revision already planned); then the round's boots at once (_take). False when
        done."""
        self.plan, self.early = [], None
        go = True
        try:
            while len(self.plan) < self._slots():
                if not self._round():
                    go = False
                    break
        except _Full:
            pass
        plan, self.plan = self.plan, []
        if plan:
            self._take(plan)
        return go or bool(plan)

    def _planned(self) -> set[str]:
        return {c for c, _ in self.plan}

    def _free(self, commits: list[str]) -> list[str]:
        """commits not planned in this round already."""
        planned = self._planned()
        return [c for c in commits if c not in planned]

    def _plan_batch(self) -> bool:
        """The one-step search's tests for the round's free machines: the batch with the
        most joint information (posterior.batch); stored samples and stored failures are
        used as _test uses them. False when no test can split the rest."""
        picks = self.post.batch(self._slots() - len(self.plan), Cost(build=BUILD_COST))
        if not picks:
            return False
        for commit in picks:
            if commit not in self.post.untestable:
                self._planned_test(commit, "")
        return True

    def _early_pairs(self, answer: Answer) -> None:
        """A round of checks that leaves machines idle, with the single step's re-check
        due once they are done: the idle machines start its fresh pairs (the shorter side
        first, at most the rule's `least` pairs, from which it first looks). The samples
        are taken after the answer held, as the re-check's are, so they are as fresh;
        recheck() goes on from them when the checks leave the answer standing. The
        re-check is entered in the state (running) so that a resumed run finds them."""
        parent, culprit = recheck.pair(self.post, answer)
        least = recheck.adaptive(self.opts).least
        a = len(self.bench.fresh(culprit, parent))
        b = len(self.bench.fresh(culprit, culprit))
        if len(self.plan) >= self._slots() or min(a, b) >= least:
            return
        self._entered(answer)
        self.early = culprit
        while len(self.plan) < self._slots() and min(a, b) < least:
            if a <= b:
                self._plan(parent, "recheck")
                a += 1
            else:
                self._plan(culprit, "recheck")
                b += 1

    def _round(self) -> bool:
        """One boot's worth of work (or a decision that needs none); False when done."""
        answer = self.post.stop(self.opts.confidence)
        if answer is None and not self.wide:
            return self._due_reference() or self._test()
        if (probe := self._open_probe(self.run.probes or [])) is not None:
            return self._test(probe, "probe")
        if (check := self._open_check(answer)) is not None:
            return self._test(check, "check")
        told = self.tell()
        conf = self.opts.confidence
        if told.kind == "single" and told.changes[0].p >= conf:
            if answer is None or not _holds(told.changes[0], answer):
                self.wide = False  # the story agrees on one step: the one-step search goes on
                return self._due_reference() or self._test()
            against, open_, unclear = self._doubts(told.changes[0])
            if open_ := self._free(open_):
                # a tested revision not yet clearly at the level one step says
                return self._test(open_[0], "check")
            if against or unclear:
                # a revision clearly at the other level, or still between the levels after
                # PROBE_BOOTS: one step does not fit the data, whatever P(one change) says
                # (tell() notes it in the story); the story's search goes on
                self.wide = True
                return self._due_reference() or self._test(self._wide_next(), "story")
            if (probe := self.probe(told)) is not None:
                self.run.probes = [*(self.run.probes or []), probe]
                return self._test(probe, "probe")
            if recheck.due(self.run, answer):
                if self.plan:
                    self._early_pairs(answer)  # the round's idle machines start it
                    raise _Full  # the round's samples first
                self.recheck(answer)
                raise _Full  # the re-check took its own rounds
            partial = self.run.rechecks[recheck.pair(self.post, answer)[1]].partial
            if told.p_single >= story.ALONE and not partial:
                self.wide = False
                return False
        elif told.settled(conf) and all(len(self._testable(c)) <= 1 for c in told.changes):
            for change in told.changes:
                step = self._as_answer(change)
                if recheck.due(self.run, step):
                    if not self.plan:
                        self.recheck(step, improvement=change.ratio > 1)
                    raise _Full  # the round's samples first, or the re-check took its rounds
            return False
        self.wide = True
        return self._due_reference() or self._test(self._wide_next(), "story")

    def _open_check(self, answer: Answer | None) -> str | None:
        """A tested revision still to sample for the last story's single step (_doubts'
        open ones), while that step is the answer: sampled without fitting the story anew
        each boot (the story is refitted once none is left)."""
        told = self.told
        if told is None or told.kind != "single" or answer is None:
            return None
        if told.changes[0].p < self.opts.confidence:
            return None
        if not _holds(told.changes[0], answer):
            return None
        _, open_, _ = self._doubts(told.changes[0])
        open_ = self._free(open_)  # a pool's round: those not planned in it
        return open_[0] if open_ else None

    def tell(self) -> story.Story:
        """The whole range's story at the samples so far (run.story)."""
        samples: list[story.Row] = [
            (s.commit, s.tps, s.t, s.load, s.machine) for s in self.post.samples
        ]
        model = story.RangeModel.build(self.graph, self.post.partition(), samples, self.post.model)
        self.range_model = model
        told = self.told = model.story()
        self.run.story = told
        if told.kind == "single" and self.post.levels() is not None:
            self._note_doubts(told.changes[0])
        return told

    def probe(self, told: story.Story) -> str | None:
        """Where a single step has not been checked: the middle of the largest group of
        commits no test has split (story.stretch), or None when every group is short."""
        classes = self.post.partition()
        for commit in self._planned():  # a pool's round: as if its tests were taken
            i = self.graph.index.get(commit)
            if i is not None:
                anc = self.graph.anc[i]
                classes = [
                    (part, bad | ({i} if part & anc else set()))
                    for mask, bad in classes
                    for part in (mask & anc, mask & ~anc)
                    if part
                ]
        return story.stretch(self.graph, classes, told.changes[0], self.post.untestable)

    def _open_probe(self, candidates: list[str]) -> str | None:
        """One of candidates whose level is not clear yet: its samples tell neither the
        good nor the bad level apart (story.level_test), and it has had fewer than
        PROBE_BOOTS."""
        for probe in self._free(candidates):
            n = sum(s.commit == probe for s in self.post.samples)
            if probe in self.post.untestable or n >= story.PROBE_BOOTS:
                continue
            llr = self._level(probe, False)
            if llr is not None and abs(llr) < self._odds():
                return probe
        return None

    def _level(self, probe: str, bad_noise: bool) -> float | None:
        """story.level_test on the probe's samples (0 without one: not clear yet), at the
        fitted levels and the noise of the bad side (bad_noise) or of the good side; None
        before the first fit."""
        fit = self.post.levels()
        if fit is None:
            return None
        lv = fit.level
        points = [
            (s.tps, lv(False, s.t, s.load, s.machine), lv(True, s.t, s.load, s.machine))
            for s in self.post.samples
            if s.commit == probe
        ]
        w, kappa = fit.outlier, self.post.model.outlier_scale
        return story.level_test(points, fit.sigma(bad_noise), w, kappa)

    def _testable(self, change: story.Change) -> list[str]:
        """The change's commits that can still be tested (one: it is located)."""
        return [c for c in change.members if c not in self.post.untestable]

    def _as_answer(self, change: story.Change) -> Answer:
        """A named change as the answer its re-check takes."""
        testable = self._testable(change)
        kind = "culprit" if len(change.members) == 1 else "range"
        p = change.p / max(len(change.members), 1)
        return Answer(kind, tuple((c, p) for c in (testable or change.members)))

    def _wide_next(self) -> str | None:
        """The revision whose next sample brings the most expected information about the
        story per unit of cost (the one-step search's choice when none is informative)."""
        model = self.range_model
        assert model is not None
        last = max(self.post.samples, key=lambda s: s.t)
        planned = self._planned()
        picks = dict.fromkeys(
            c
            for c in [*model.halves(), *self.post.built_ones, *self.graph.goods[:1], self.graph.bad]
            if c not in self.post.untestable
            and c not in planned
            and (c in self.graph.index or c in self.graph.goods)
        )
        scored = []
        for rank, c in enumerate(picks):
            price = 1.0 + (0.0 if c in self.post.built_ones else BUILD_COST)
            scored.append((model.information(c, last.t + 1.0, last.load) / price, -rank, c))
        if not scored or max(scored)[0] < story.WORTH:
            return None
        return max(scored)[2]

    def _due_reference(self) -> bool:
        """One reference boot if one is due; a failure is a warning (it booted before)."""
        ref = self.schedule.due() if self.schedule is not None else None
        if ref is None:
            return False
        super()._reference(ref)
        return True

    def _test(self, chosen: str | None = None, why: str = "") -> bool:
        """One more sample of the best revision (or of `chosen`, with why: a probe of a
        single step, or a test of the story); False when no test can split the rest."""
        if not why:
            return self._plan_batch()
        if chosen is None:
            return False
        if chosen in self._planned():
            raise _Full  # its next sample waits for the round's
        self._planned_test(chosen, why)
        return True

    def confirmed(self) -> bool:
        """What exit 0 means: the story holds and every change in it is confirmed."""
        return self.run.confirmed(self.opts.confidence)


class _Full(Exception):
    """A pool's round is full: a decision needs the planned samples first."""


def _holds(change: story.Change, answer: Answer) -> bool:
    """Whether the one-step answer is the story's single change."""
    return {c for c, _ in answer.candidates} <= set(change.members)
