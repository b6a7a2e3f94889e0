"""The posterior over the first bad commit, from every sample of every revision.

Prior: every commit of good..bad equally likely to be the culprit. Evidence: each sample
(revision, tps, time) through likelihood.py, where the two levels, the noise and (with
drift-aware references) a time trend are integrated out, not plugged in. A failed build
or boot is no evidence: the revision is only taken off the list of revisions to test.

Candidates that every tested revision treats alike (all bad or all good for each) share
one likelihood, so the work is per *class* of candidates, not per commit: classes are
split by each tested revision's ancestor set, and there are about as many classes as
tested revisions whatever the size of the range.

    p = Posterior(graph)
    p.update(good, 612.0); p.update(bad, 401.2); ...   # samples, in any order
    p.failed(commit)                                   # build or boot failed: untestable
    commit = p.next(Cost(build=0.15))                  # where the next boot helps most
    answer = p.stop(0.95)                              # None: keep going
    json.dumps(p.as_dict())                            # state.json; from_dict() resumes
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbisect.bisect.posterior import choice, likelihood
from kbisect.bisect.posterior.choice import Cost
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.likelihood import Model
from kbisect.core.exceptions import UserError
from kbisect.stats.split import Fit

NEGLIGIBLE = 1e-12  # classes lighter than this are left out of the choice of revision


@dataclass(frozen=True)
class Answer:
    """culprit: one commit holds the confidence; range: a group no test can split holds
    it (skipped neighbours); undecided: the smallest set holding it when testing ends."""

    kind: str  # "culprit" | "range" | "undecided"
    candidates: tuple[tuple[str, float], ...]  # commit, probability; most likely first

    @property
    def probability(self) -> float:
        return math.fsum(p for _, p in self.candidates)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "probability": self.probability,
            "candidates": [{"commit": c, "p": p} for c, p in self.candidates],
        }


@dataclass
class _Class:
    mask: int  # the candidates, as a bitset
    bad: frozenset[int]  # tested revisions that are bad if the culprit is in this class
    fit: Fit | None = None
    log_post: float = 0.0


@dataclass
class Sample:
    commit: str
    tps: float
    t: float
    load: float = 0.0  # the share of the CPUs other work took (disturbance.load)
    machine: str = ""  # the machine of a pool it ran on ("": the one machine)


@dataclass
class Posterior:
    graph: Graph
    model: Model = field(default_factory=Model)
    samples: list[Sample] = field(default_factory=list)
    untestable: set[str] = field(default_factory=set)
    built_ones: set[str] = field(default_factory=set)
    _classes: list[_Class] = field(default_factory=list, repr=False)
    _dirty: bool = field(default=True, repr=False)

    # --- evidence -----------------------------------------------------------------------

    def update(
        self,
        commit: str,
        tps: float,
        t: float | None = None,
        load: float = 0.0,
        machine: str = "",
    ) -> None:
        """One sample; t is its time (any unit, increasing; default: its number); load the
        share of the CPUs other work took while it ran (0: a quiet host); machine the
        pool's machine it ran on (its offset is in the likelihood with model.machines)."""
        if commit not in self.graph.index and commit not in self.graph.goods:
            raise UserError(f"{commit[:12]} is not in the bisected range")
        if not tps > 0 or not math.isfinite(tps):
            raise UserError(f"{commit[:12]}: tps {tps!r} is not a positive number")
        when = float(len(self.samples) if t is None else t)
        self.samples.append(Sample(commit, tps, when, float(load), machine))
        self.built_ones.add(commit)
        self._dirty = True

    def failed(self, commit: str) -> None:
        """The revision failed to build or boot (for good): no evidence, never tested again."""
        self.untestable.add(commit)

    def built(self, commit: str) -> None:
        """The revision is built: its next sample costs a boot only."""
        self.built_ones.add(commit)

    # --- the posterior ------------------------------------------------------------------

    def _tested(self) -> list[int]:
        seen: dict[int, None] = {}
        for s in self.samples:
            i = self.graph.index.get(s.commit)
            if i is not None:
                seen[i] = None
        return list(seen)

    def _split(self) -> list[_Class]:
        """Classes of candidates that every tested revision treats alike."""
        old = {c.bad: c.fit for c in self._classes}
        classes = [_Class(self.graph.full, frozenset(), old.get(frozenset()))]
        for r in self._tested():
            anc, out = self.graph.anc[r], []
            for c in classes:
                inside, outside = c.mask & anc, c.mask & ~anc
                if inside:
                    out.append(_Class(inside, c.bad | {r}, old.get(c.bad | {r}, c.fit)))
                if outside:
                    out.append(_Class(outside, c.bad, old.get(c.bad, c.fit)))
            classes = out
        return classes

    def _identified(self) -> bool:
        goods = sum(s.commit in self.graph.goods for s in self.samples)
        bads = sum(s.commit == self.graph.bad for s in self.samples)
        loads = [s.load for s in self.samples]
        extra = self.model.trend + likelihood.loaded(self.model, loads)
        return goods >= 1 and bads >= 1 and len(self.samples) >= 4 + extra

    def _refresh(self) -> None:
        if not self._dirty:
            return
        self._classes = self._split()
        x = [math.log(s.tps) for s in self.samples]
        t = [s.t for s in self.samples]
        load = [s.load for s in self.samples]
        machine = [s.machine for s in self.samples]
        index = self.graph.index
        log_n = math.log(self.graph.n)
        for c in self._classes:
            prior = math.log(c.mask.bit_count()) - log_n
            if not self._identified():
                c.log_post = prior
                continue
            z = [index.get(s.commit, -1) in c.bad for s in self.samples]
            c.fit = likelihood.fit(x, z, self.model, t, c.fit, load, machine)
            c.log_post = prior + c.fit.log_evidence
        top = max(c.log_post for c in self._classes)
        total = top + math.log(math.fsum(math.exp(c.log_post - top) for c in self._classes))
        for c in self._classes:
            c.log_post -= total
        self._dirty = False

    def partition(self) -> list[tuple[int, frozenset[int]]]:
        """The classes of candidates that every tested revision treats alike: (the
        candidates as a bitset, the tested revisions that hold them)."""
        self._refresh()
        return [(c.mask, c.bad) for c in self._classes]

    def probabilities(self) -> list[float]:
        """P(culprit = commit i) for every commit of the range, in graph order."""
        self._refresh()
        out = [0.0] * self.graph.n
        for c in self._classes:
            each = math.exp(c.log_post) / c.mask.bit_count()
            for i in self.graph.members(c.mask):
                out[i] = each
        return out

    def p_bad(self, commit: str) -> float:
        """P(commit is bad): the mass of the candidates among its ancestors-or-self."""
        i = self.graph.index.get(commit)
        return 0.0 if i is None else self._mass(self.graph.anc[i], self._live())

    def _live(self) -> list[tuple[float, int, int]]:
        self._refresh()
        return [
            (math.exp(c.log_post), c.mask, c.mask.bit_count())
            for c in self._classes
            if c.log_post > math.log(NEGLIGIBLE)
        ]

    def live_fits(self, least: float) -> list[tuple[float, int, int, Fit]]:
        """(P, mask, size, fit) of the classes holding at least `least`, renormalized."""
        self._refresh()
        chosen = [
            (math.exp(c.log_post), c.mask, c.mask.bit_count(), c.fit)
            for c in self._classes
            if c.log_post >= math.log(least)
        ]
        total = math.fsum(p for p, *_ in chosen)
        return [(p / total, m, n, f) for p, m, n, f in chosen if f is not None]

    @staticmethod
    def _mass(anc: int, live: Sequence[tuple[float, int, int]]) -> float:
        return math.fsum(p * (anc & mask).bit_count() / size for p, mask, size in live)

    def levels(self) -> Fit | None:
        """The most probable split's fit (levels, noise), once both endpoints have samples."""
        self._refresh()
        best = max(self._classes, key=lambda c: c.log_post)
        return best.fit

    # --- choosing, stopping -------------------------------------------------------------

    def split_values(self) -> dict[str, float]:
        """P(bad) of every revision that can still be tested and is not already certain."""
        live = self._live()
        out = {}
        for i, commit in enumerate(self.graph.commits):
            if commit not in self.untestable:
                p = self._mass(self.graph.anc[i], live)
                if NEGLIGIBLE < p < 1 - NEGLIGIBLE:
                    out[commit] = p
        return out

    def standing(self) -> choice.Standing:
        """What the choice of revision needs to know of the posterior as it stands."""
        last = max(self.samples, key=lambda s: s.t, default=None)
        return choice.Standing(
            self.graph,
            self.split_values(),
            self.built_ones,
            self.untestable,
            self.live_fits(choice.LIVE),
            None if last is None else (last.t, last.load),
        )

    def next(self, cost: Cost | None = None) -> str | None:
        """The revision whose next sample brings the most expected information about the
        culprit per unit of cost (see choice.py); None when no test can split the rest."""
        return choice.best(self.standing(), cost or Cost())

    def batch(self, k: int, cost: Cost | None = None) -> list[str]:
        """k revisions to sample at once on k machines, for their joint information
        (choice.batch; its first is next()'s); empty when no test can split the rest."""
        return choice.batch(self.standing(), cost or Cost(), k)

    def groups(self) -> list[tuple[list[int], float]]:
        """Candidates no remaining test can tell apart, with their mass; heaviest first."""
        probs = self.probabilities()
        testable = 0
        for i, commit in enumerate(self.graph.commits):
            if commit not in self.untestable:
                testable |= 1 << i
        by_key: dict[int, list[int]] = {}
        for i, d in enumerate(self.graph.desc):
            by_key.setdefault(d & testable, []).append(i)
        out = [(members, math.fsum(probs[i] for i in members)) for members in by_key.values()]
        return sorted(out, key=lambda g: -g[1])

    def stop(self, confidence: float = 0.95) -> Answer | None:
        """The answer once one commit, or one group no test can split, holds `confidence`."""
        probs = self.probabilities()
        top = max(range(self.graph.n), key=lambda i: probs[i])
        if probs[top] >= confidence:
            return Answer("culprit", ((self.graph.commits[top], probs[top]),))
        members, mass = self.groups()[0]
        if mass >= confidence:
            return Answer("range", self._ranked(members, probs))
        return None

    def answer(self, confidence: float = 0.95) -> Answer:
        """stop()'s answer, or the smallest set of commits holding `confidence`."""
        done = self.stop(confidence)
        if done is not None:
            return done
        probs = self.probabilities()
        order = sorted(range(self.graph.n), key=lambda i: -probs[i])
        chosen, mass = [], 0.0
        for i in order:
            chosen.append(i)
            mass += probs[i]
            if mass >= confidence:
                break
        return Answer("undecided", self._ranked(chosen, probs))

    def _ranked(
        self, members: Sequence[int], probs: Sequence[float]
    ) -> tuple[tuple[str, float], ...]:
        ranked = sorted(members, key=lambda i: (-probs[i], i))
        return tuple((self.graph.commits[i], probs[i]) for i in ranked)

    # --- reports and state --------------------------------------------------------------

    def summary(self, confidence: float = 0.95, top: int = 5) -> dict[str, Any]:
        """JSON-ready: the answer, the most likely commits, the fitted levels, the samples."""
        probs = self.probabilities()
        order = sorted(range(self.graph.n), key=lambda i: (-probs[i], i))[:top]
        fit = self.levels()
        levels = None
        if fit is not None:
            levels = {
                "good_tps": math.exp(fit.coef[0]),
                "bad_tps": math.exp(fit.coef[1]),
                "noise_cv": math.expm1(fit.sigma(False)),
                "noise_cv_bad": math.expm1(fit.sigma(True)),
            }
            if "load" in fit.regressors:  # log tps per unit of load (disturbance.load)
                levels["load_beta"] = fit.coef[2 + fit.regressors.index("load")]
        return {
            "answer": self.answer(confidence).as_dict(),
            "levels": levels,
            "top": [{"commit": self.graph.commits[i], "p": probs[i]} for i in order],
            "samples": len(self.samples),
            "untestable": sorted(self.untestable),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.as_dict(),
            "samples": [
                [s.commit, s.tps, s.t, s.load, *([s.machine] if s.machine else [])]
                for s in self.samples
            ],
            "untestable": sorted(self.untestable),
            "built": sorted(self.built_ones),
        }

    @classmethod
    def from_dict(cls, graph: Graph, data: Mapping[str, Any]) -> Posterior:
        p = cls(graph, Model(**data["model"]))
        for commit, tps, t, *rest in data["samples"]:  # no load: a state from before it
            p.update(commit, tps, t, *rest)  # rest: the load, and a pool's machine
        p.untestable.update(data["untestable"])
        p.built_ones.update(data["built"])
        return p
