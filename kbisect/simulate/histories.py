"""Generated histories: the range good..bad as a commit graph, the culprit(s), the
commits that do not build. Commit names are c0, c1, ... in creation order; the good
endpoint is "good"."""

from __future__ import annotations

import random
from dataclasses import dataclass

from kbisect.bisect.posterior.graph import Graph

GOOD = "good"
BASE_TPS = 1000.0


@dataclass(frozen=True)
class History:
    graph: Graph
    culprits: tuple[str, ...]  # one, or several each with its own effect
    effects: tuple[float, ...]  # relative tps drop each culprit brings
    broken: frozenset[str] = frozenset()

    def tps(self, commit: str) -> float:
        """The true tps of a revision (the good endpoint included)."""
        level = BASE_TPS
        for culprit, effect in zip(self.culprits, self.effects, strict=True):
            if self.graph.is_bad(commit, culprit):
                level *= 1.0 - effect
        return level


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


def make(
    rng: random.Random, shape: str, low: int, high: int, broken: float, effects: tuple[float, ...]
) -> History:
    """A history of low..high commits with len(effects) culprits (not merges) and a
    fraction `broken` of commits (never the bad endpoint) that do not build."""
    n = rng.randint(low, high)
    parents = linear(n) if shape == "linear" else merges(n, rng)
    bad = next(reversed(parents))
    graph = Graph.from_parents(parents, bad, [GOOD])
    plain = [c for i, c in enumerate(graph.commits) if len(graph.parents[i]) < 2]
    culprits = tuple(rng.sample(plain, len(effects)))
    dud = frozenset(c for c in graph.commits[:-1] if rng.random() < broken)
    return History(graph, culprits, effects, dud)
