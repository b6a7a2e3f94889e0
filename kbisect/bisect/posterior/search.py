"""`kbisect bisect --method posterior`: the driver's loop over the posterior.

Every sample is evidence (posterior.py): the endpoints', every revision's, the
references' and the re-check's. Each round, until `--max-boots` boots after the
endpoints (re-checks and references included):

1. stop: when one commit, or a group no test can split (a range), holds `--confidence`,
   re-check it once (recheck.py: fresh pairs of it and its parent until the ratio's
   interval clears the minimum effect); the fresh samples feed the posterior, and the
   search ends if the answer still holds, or goes on if it does not (on a pool, the
   machines a round of the single step's checks leaves idle start its fresh pairs:
   _early_pairs);
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

import math
import time
from collections.abc import Callable
from dataclasses import astuple, replace
from pathlib import Path

from kbisect.bisect import recheck, references, samples
from kbisect.bisect.posterior import graph, likelihood, story
from kbisect.bisect.posterior.bench import Bench, Sample, Store
from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.likelihood import Model
from kbisect.bisect.posterior.posterior import Answer, Posterior
from kbisect.bisect.state import Recheck, Run
from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError, BuildError
from kbisect.stats import looks
from kbisect.stats.split import Fit

EXPLAINS_CONFIDENCE = 0.995  # the explanation's claims, each wrong at most 0.5%
BUILD_COST = 0.15  # a build, in boots: an incremental build ~20 s against a ~2.5 min boot


class Search:
    """One posterior bisection of `g` through `bench`: the posterior, the evidence in it
    (the endpoints' first, or a resumed search's), and the run's state."""

    def __init__(self, g: graph.Graph, bench: Bench, run: Run, evidence: list[Sample]) -> None:
        self.graph, self.bench, self.run = g, bench, run
        self.opts = run.options
        self.k = max(1, bench.width())  # machines: the samples one round takes at once
        self.post = Posterior(g, Model(trend=self.opts.references > 0, machines=self.k > 1))
        self.plan: list[tuple[str, str]] = []  # the round being planned
        self.early: str | None = None  # the culprit whose re-check pairs the round starts
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
        # the one-step search, or the story's (the samples contradict one step)
        self.wide = run.story is not None and run.story.kind not in ("single",)
        self.range_model: story.RangeModel | None = None
        self.told: story.Story | None = None  # the last story told
        self._held: dict[tuple[str, int], Fit | None] = {}  # _held_out's
        self._held_n = -1  # the number of samples they were fitted to
        self._began = (time.monotonic(), bench.boots())  # this process's: for the time left

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

    # --- one round ------------------------------------------------------------------------

    def find(self) -> Answer:
        """Sample until the story holds after its re-checks, or nothing can split the
        rest, or the budget is spent; the final answer (git's single first bad commit;
        the whole story is in run.story)."""
        try:
            while self.bench.boots() < self.opts.max_boots:
                if not self._next_round():
                    break
                self.save()
        finally:
            progress.done()
        self.tell()
        self.save()
        return self.post.answer(self.opts.confidence)

    # --- a round: k samples at once (k = 1: one target) -----------------------------------

    def _next_round(self) -> bool:
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

    def _slots(self) -> int:
        """The machines a round may use: k, within the budget."""
        return max(1, min(self.k, self.opts.max_boots - self.bench.boots()))

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

    def _plan(self, commit: str, role: str) -> None:
        self.plan.append((commit, role))
        if self.schedule is not None and role != "recheck":
            self.schedule.took(commit)

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

    def _round(self) -> bool:
        """One boot's worth of work (or a decision that needs none); False when done."""
        answer = self.post.stop(self.opts.confidence)
        if answer is None and not self.wide:
            return self._reference() or self._test()
        if (probe := self._open_probe(self.run.probes or [])) is not None:
            return self._test(probe, "probe")
        if (check := self._open_check(answer)) is not None:
            return self._test(check, "check")
        told = self.tell()
        conf = self.opts.confidence
        if told.kind == "single" and told.changes[0].p >= conf:
            if answer is None or not _holds(told.changes[0], answer):
                self.wide = False  # the story agrees on one step: the one-step search goes on
                return self._reference() or self._test()
            against, open_, unclear = self._doubts(told.changes[0])
            if open_ := self._free(open_):
                # a tested revision not yet clearly at the level one step says
                return self._test(open_[0], "check")
            if against or unclear:
                # a revision clearly at the other level, or still between the levels after
                # PROBE_BOOTS: one step does not fit the data, whatever P(one change) says
                # (tell() notes it in the story); the story's search goes on
                self.wide = True
                return self._reference() or self._test(self._wide_next(), "story")
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
        return self._reference() or self._test(self._wide_next(), "story")

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

    def _doubts(self, change: story.Change) -> tuple[list[str], list[str], list[str]]:
        """The checked revisions (_checked) that one step at `change` does not explain yet,
        by story.level_test at the noise of the level the step says they are at: (against:
        clearly at the other level, at the family's odds (_against_odds); open: to sample
        next, at neither level clearly with fewer than PROBE_BOOTS samples, or at the other
        level by less than the family's odds; unclear: still between the levels after
        PROBE_BOOTS). A revision between the levels after PROBE_BOOTS is excused when the
        revisions next to it are clearly at the level the step says (a noisy revision, not
        a window a fix opened); they are sampled (open) until they tell."""
        at = self.graph.index[change.commit]
        odds = self._odds()
        judged = []
        for commit in self._checked():
            i = self.graph.index.get(commit)
            if i is None or commit in self.post.untestable:
                continue
            judged.append((commit, i, *self._fits(i, at)))
        strict = self._against_odds(sum(n > 0 for *_, n in judged))
        against: list[str] = []
        open_: list[str] = []
        stuck: list[int] = []
        for commit, i, fits, n in judged:
            if fits <= -strict:
                against.append(commit)
            elif fits < odds and n < story.PROBE_BOOTS:
                open_.append(commit)
            elif fits < odds:
                stuck.append(i)
        unclear: list[str] = []
        for i in stuck:
            near = self._next_to(i, at)
            told = [(j, *self._fits(j, at)) for j in near]
            if near and all(fits >= odds for _, fits, _ in told):
                continue  # its neighbours are at the level the step says
            more = [
                self.graph.commits[j]
                for j, fits, n in told
                if -strict < fits < odds and n < story.PROBE_BOOTS
            ]
            if more:
                open_ += [c for c in more if c not in open_]
            else:
                unclear.append(self.graph.commits[i])
        return against, open_, unclear

    def _fits(self, i: int, at: int) -> tuple[float, int]:
        """How clearly revision i's samples sit at the level one step at index `at` says
        (the level test's log odds, positive: at that level; 0 without samples), and how
        many samples it has. The levels and noise it is judged against are the step's fit
        without its own samples (_held_out)."""
        commit = self.graph.commits[i]
        mine = [s for s in self.post.samples if s.commit == commit]
        fit = self._held_out(commit, at) if mine else None
        if fit is None:
            return 0.0, len(mine)
        after = bool(self.graph.anc[i] >> at & 1)
        lv = fit.level
        points = [
            (s.tps, lv(False, s.t, s.load, s.machine), lv(True, s.t, s.load, s.machine))
            for s in mine
        ]
        llr = story.level_test(points, fit.sigma(after), fit.outlier, self.post.model.outlier_scale)
        return (llr if after else -llr), len(mine)

    def _held_out(self, commit: str, at: int) -> Fit | None:
        """One step at index `at` fitted to every sample but the revision's own: with them
        in, a revision half-way between the levels pulls its side's level and noise
        towards itself and looks clear. None where the rest has no sample on a side."""
        n = len(self.post.samples)
        if self._held_n != n:
            self._held, self._held_n = {}, n
        key = (commit, at)
        if key not in self._held:
            g = self.graph
            rest = [s for s in self.post.samples if s.commit != commit]
            z = [s.commit in g.index and bool(g.anc[g.index[s.commit]] >> at & 1) for s in rest]
            fit = None
            if any(z) and not all(z):
                fit = likelihood.fit(
                    [math.log(s.tps) for s in rest],
                    z,
                    self.post.model,
                    [s.t for s in rest],
                    None,
                    [s.load for s in rest],
                    [s.machine for s in rest],
                )
            self._held[key] = fit
        return self._held[key]

    def _next_to(self, i: int, at: int) -> list[int]:
        """The testable revisions next to i in the range's order, on the same side of one
        step at `at`."""
        g = self.graph
        side = bool(g.anc[i] >> at & 1)
        return [
            j
            for j in (i - 1, i + 1)
            if 0 <= j < g.n
            and bool(g.anc[j] >> at & 1) == side
            and g.commits[j] not in self.post.untestable
        ]

    def _note_doubts(self, change: story.Change) -> None:
        """The revisions that doubt the story's single step (_doubts), in run.story:
        "against" and "unclear", each with a note; exit 0 needs neither (Run.confirmed)."""
        told = self.run.story
        assert told is not None
        against, _, unclear = self._doubts(change)
        notes = [f"{c[:12]} is clearly at the other level than one step says" for c in against]
        notes += [
            f"{c[:12]} is between the levels after {story.PROBE_BOOTS} boots: "
            "one step is not confirmed there"
            for c in unclear
        ]
        told = replace(told, notes=(*told.notes, *notes), against=tuple(against))
        self.run.story = replace(told, unclear=tuple(unclear))

    def _checked(self) -> list[str]:
        """The revisions a single step's story is checked on: the probes, and every other
        revision the search tested (the endpoints aside). A revision the one-step search
        sampled once, half-way between the levels, is as much a place where a fix could
        hide as an untested stretch (a posterior predictive check on every revision)."""
        ends = {self.run.good, self.run.bad}
        tested = [c for c in self.run.visited if c not in ends and c in self.graph.index]
        return list(dict.fromkeys([*(self.run.probes or []), *tested]))

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

    def _odds(self) -> float:
        """The log odds of the confidence: what a level test must reach to be clear."""
        return math.log(self.opts.confidence / (1 - self.opts.confidence))

    def _against_odds(self, judged: int) -> float:
        """The log odds a revision's level test must reach to be clearly at the other level
        than one step says, with `judged` revisions judged: the confidence's odds times
        `judged` (Bonferroni: the confidence over the error each revision may spend,
        looks.spend). Each revision is sampled until its test is clear, and a
        test sampled so stops at the wrong side at most once in its odds (Wald), so at
        the confidence's odds each revision judged adds its own chance of a false
        "against"; a pool's batches judge more revisions (docs/statistics.md)."""
        c = self.opts.confidence
        return math.log(c / looks.spend(1 - c, 1, max(judged, 1)))

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

    def _reference(self) -> bool:
        """One reference boot if one is due; a failure is a warning (it booted before)."""
        ref = self.schedule.due() if self.schedule is not None else None
        if ref is None or self.schedule is None:
            return False
        self._say(lambda: f"reference: {'good' if ref == self.run.good else 'bad'} {ref[:12]}")
        self._plan(ref, "reference")
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

    def confirmed(self) -> bool:
        """What exit 0 means: the story holds and every change in it is confirmed."""
        return self.run.confirmed(self.opts.confidence)

    def _p_bad(self, commit: str) -> float:
        return self.post.p_bad(commit) if commit in self.graph.index else 0.0

    def _expected(self) -> str:
        """The next boot of those the stopping rule expects: the boots so far, those for
        the bits the posterior still lacks to name one commit at the confidence at the bits
        per boot so far (the range's log2 size at the start), and the re-check's least
        pairs while none has run; the cap (--max-boots); the time left at this process's
        rate (none before its first boot)."""
        n, cap = self.bench.boots(), self.opts.max_boots
        probs = [p for p in self.post.probabilities() if p > 0]
        c = self.opts.confidence
        lacks = (
            -sum(p * math.log2(p) for p in probs) + c * math.log2(c) + (1 - c) * math.log2(1 - c)
        )
        rate = (math.log2(self.graph.n) - lacks) / n if n else 0.0
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


class _Full(Exception):
    """A pool's round is full: a decision needs the planned samples first."""


def _holds(change: story.Change, answer: Answer) -> bool:
    """Whether the one-step answer is the story's single change."""
    return {c for c, _ in answer.candidates} <= set(change.members)


def start(ctx: samples.Context, top: Path, run_dir: Path, run: Run) -> Search:
    """The driver's search: the range read from the tree, the target and the store as its
    bench, the posterior rebuilt from the stored samples when it is resumed."""
    if run.bisect_t0 is None:  # the search begins
        run.bisect_t0 = time.time()
        run.visited = [run.good, run.bad]
    store = Store(ctx, top, run_dir, run)
    return Search(graph.read(top, [run.good], run.bad), store, run, store.evidence())
