"""What a round of k tests can tell at most about where the culprit is: the information
bound of a pool's search (docs/benchmarks.md, "3,000 commits over 4 machines").

Given the culprit, each revision a round samples is good or bad, so the round's samples
depend on where the culprit is only through the part of the range that the k revisions'
ancestor sets cut it into; the levels, the noise and the machines say nothing more about
the place. A round therefore tells at most the entropy of that partition under the prior
(uniform over the range's commits), however quiet the host: log2(k + 1) bits on a linear
history (k cuts, k + 1 intervals), and on a merge-heavy one what best_round() finds. A
search that must bring b bits needs at least b / best_round() rounds of tests.
"""

from __future__ import annotations

import numpy as np

from kbisect.bisect.posterior.graph import Graph
from kbisect.stats.mixture import Array


def cuts(g: Graph) -> Array:
    """bad[j, i]: revision j is bad when commit i is the culprit (i is j or an ancestor)."""
    width = (g.n + 7) // 8
    rows = [np.frombuffer(g.anc[j].to_bytes(width, "little"), dtype=np.uint8) for j in range(g.n)]
    bits = np.unpackbits(np.stack(rows), axis=1, bitorder="little")
    return bits[:, : g.n].astype(bool)


def entropy(bad: Array, picks: list[int]) -> float:
    """The bits the good/bad outcome of picks tells about a culprit uniform over the range."""
    code = np.zeros(bad.shape[1], dtype=np.int64)
    for j in picks:
        code = code * 2 + bad[j]
    _, counts = np.unique(code, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def best_round(g: Graph, k: int) -> tuple[list[int], float]:
    """k revisions whose outcome tells the most, and those bits: the better of two starts
    (greedy; the revisions nearest the quantiles i/(k+1) of the share of culprits that make
    them bad, best on a linear history), each improved by single exchanges until none
    helps. A search, so a lower bound on the best round's bits; on a linear history it
    reaches log2(k + 1) where k + 1 divides the range."""
    bad = cuts(g)
    greedy: list[int] = []
    for _ in range(k):
        greedy.append(max(range(g.n), key=lambda c: entropy(bad, [*greedy, c])))
    share = bad.mean(axis=1)
    spread = [int(np.argmin(np.abs(share - q / (k + 1)))) for q in range(1, k + 1)]
    return max((_exchanged(bad, start) for start in (greedy, spread)), key=lambda r: r[1])


def _exchanged(bad: Array, picks: list[int]) -> tuple[list[int], float]:
    have = entropy(bad, picks)
    better = True
    while better:
        better = False
        for at in range(len(picks)):
            rest = picks[:at] + picks[at + 1 :]
            scores = [entropy(bad, [*rest, c]) for c in range(bad.shape[0])]
            c = int(np.argmax(scores))  # the first best, as max() would take
            bits = scores[c]
            if bits > have + 1e-12:
                picks, have, better = [*rest, c], bits, True
    return sorted(picks), have
