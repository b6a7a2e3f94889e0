"""The doubts of `--story full` (story_search.py): the revisions a single step's story
does not explain. Each checked revision (the probes and every revision the search tested)
is judged by story.level_test against the level one step says it is at, the levels and
noise fitted without its own samples (a held-out fit): "against" (clearly at the other
level, at the family's odds), "open" (to sample next) or "unclear" (still between the
levels after story.PROBE_BOOTS, its neighbours not clearly at the step's level). Exit 0
needs neither against nor unclear (state.Run.confirmed).

A mixin of StorySearch: it reads the search's graph, posterior, options and run.
"""

from __future__ import annotations

import math
from dataclasses import replace

from kbisect.bisect.posterior import likelihood, story
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.bisect.request import Options
from kbisect.bisect.state import Run
from kbisect.stats import looks
from kbisect.stats.split import Fit


class Doubts:
    """The doubts' half of StorySearch (module docstring)."""

    graph: Graph
    post: Posterior
    opts: Options
    run: Run
    _held: dict[tuple[str, int], Fit | None]  # _held_out's
    _held_n: int  # the number of samples they were fitted to

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
