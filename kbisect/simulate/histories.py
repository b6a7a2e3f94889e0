"""Generated histories: the range good..bad as a commit graph, the level changes (culprits,
and fixes that undo one inside the range), the commits that do not build. Commit names
are c0, c1, ... in creation order; the good endpoint is "good".

A change's effect is signed: a regression of e > 0 brings the level down to (1 - e) times
what it was, a fix of -e brings it back up by 1 / (1 - e) (it undoes a regression of e).
The kinds of change, as the tallies count them: "culprit" (a regression that reaches the
bad endpoint: the right answers), "fixed" (a regression a later fix undoes inside the
range: naming it alone is wrong) and "fix"."""

from __future__ import annotations

import random
from dataclasses import dataclass

from kbisect.bisect.posterior.graph import Graph

GOOD = "good"
BASE_TPS = 1000.0


@dataclass(frozen=True)
class History:
    graph: Graph
    culprits: tuple[str, ...]  # every level change: regressions and fixes
    effects: tuple[float, ...]  # each one's relative tps drop (a fix: minus what it undoes)
    broken: frozenset[str] = frozenset()

    def tps(self, commit: str) -> float:
        """The true tps of a revision (the good endpoint included)."""
        level = BASE_TPS
        for culprit, effect in zip(self.culprits, self.effects, strict=True):
            if self.graph.is_bad(commit, culprit):
                level *= factor(effect)
        return level

    def kinds(self) -> dict[str, str]:
        """Each change's kind: culprit, fixed (a later fix in the range descends from
        it and undoes it) or fix."""
        fixes = [c for c, e in zip(self.culprits, self.effects, strict=True) if e < 0]
        out = {}
        for c, e in zip(self.culprits, self.effects, strict=True):
            if e < 0:
                out[c] = "fix"
            elif any(self.graph.is_bad(f, c) for f in fixes):
                out[c] = "fixed"
            else:
                out[c] = "culprit"
        return out

    def truth(self) -> frozenset[str]:
        """The right answers: the regressions that reach the bad endpoint."""
        return frozenset(c for c, kind in self.kinds().items() if kind == "culprit")


def factor(effect: float) -> float:
    """What a change of that signed effect multiplies the level by."""
    return 1.0 - effect if effect >= 0 else 1.0 / (1.0 + effect)


def linear(n: int) -> dict[str, list[str]]:
    """good <- c0 <- c1 <- ... <- c(n-1) (the bad endpoint)."""
    parents: dict[str, list[str]] = {GOOD: []}
    prev = GOOD
    for i in range(n):
        parents[f"c{i}"] = [prev]
        prev = f"c{i}"
    return parents


def merges(n: int, rng: random.Random) -> dict[str, list[str]]:
    """A merge-heavy range of n commits: half the time a topic branch of 1-8 commits
    forked from one of the last 30 mainline commits (the good endpoint included) and
    merged back; the last commit is the mainline tip (the bad endpoint)."""
    parents: dict[str, list[str]] = {GOOD: []}
    mainline = [GOOD]

    def add(ps: list[str]) -> str:
        name = f"c{len(parents) - 1}"
        parents[name] = ps
        return name

    while len(parents) - 1 < n:
        room = n - (len(parents) - 1)
        if room >= 3 and rng.random() < 0.5:
            tip = rng.choice(mainline[-30:])
            for _ in range(rng.randint(1, min(8, room - 1))):
                tip = add([tip])
            mainline.append(add([mainline[-1], tip]))
        else:
            mainline.append(add([mainline[-1]]))
    return parents


def _graph(rng: random.Random, shape: str, low: int, high: int) -> tuple[Graph, list[str]]:
    """A range of low..high commits and its plain (not merge) commits, in order."""
    n = rng.randint(low, high)
    parents = linear(n) if shape == "linear" else merges(n, rng)
    bad = next(reversed(parents))
    graph = Graph.from_parents(parents, bad, [GOOD])
    return graph, [c for i, c in enumerate(graph.commits) if len(graph.parents[i]) < 2]


def _broken(rng: random.Random, graph: Graph, broken: float) -> frozenset[str]:
    return frozenset(c for c in graph.commits[:-1] if rng.random() < broken)


def make(
    rng: random.Random, shape: str, low: int, high: int, broken: float, effects: tuple[float, ...]
) -> History:
    """A history of low..high commits with len(effects) culprits (not merges) and a
    fraction `broken` of commits (never the bad endpoint) that do not build."""
    graph, plain = _graph(rng, shape, low, high)
    culprits = tuple(rng.sample(plain, len(effects)))
    return History(graph, culprits, effects, _broken(rng, graph, broken))


FIX_AT = (0.4, 0.6, 0.8)  # where a regression, its fix and the culprit sit in the range
JITTER = 0.05


def fix_inside(
    rng: random.Random, shape: str, low: int, high: int, broken: float, effect: float
) -> History:
    """A regression at about 40% of the range, its fix at about 60% (a descendant of
    it), the culprit at about 80% (each position jittered by up to 5% of the range), each
    of size `effect`: the bad endpoint is `effect` below the good one, but the first
    change on the way is not the culprit. On 24 commits, e.g. c10, c15 and c19."""
    graph, plain = _graph(rng, shape, low, high)
    at = [f + rng.uniform(-JITTER, JITTER) for f in FIX_AT]
    order = {c: i for i, c in enumerate(plain)}
    picked: list[str] = []
    for k, where in enumerate(at):
        pool = [c for c in plain if c not in picked]
        if k == 1:  # the fix: one that undoes the regression, on its descendants
            pool = [c for c in pool if graph.is_bad(c, picked[0])] or pool
        picked.append(min(pool, key=lambda c: abs(order[c] - where * len(plain))))
    return History(graph, tuple(picked), (effect, -effect, effect), _broken(rng, graph, broken))
