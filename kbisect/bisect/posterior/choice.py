"""Which revision to sample next: the most expected information per unit of cost.

The expected information one sample of revision r brings about the culprit is the mutual
information between the culprit and the sample's log tps y:

    EIG(r) = H(y) - E_culprit[H(y | culprit)]

Under a class k of culprits (posterior.py) with probability P_k, fitted levels g_k, b_k and
noise s_k, a fraction f_k of the class makes r bad, so y is predicted by the mixture
f_k·N(b_k, s_k²) + (1 - f_k)·N(g_k, s_k²); H(y) is the entropy of the mixture of those over
k (numerically, on a grid), E[H(y | culprit)] = Σ P_k·½·log(2πe·s_k²). With common levels
this is largest where P(r bad) is nearest ½ (the revision that best splits the posterior);
with each class's own levels it also sees what splitting cannot: when a class is only
possible if the bad endpoint's few samples were all unlucky, a sample of the bad endpoint
is what tells them apart.

A revision already built costs a boot; a new one a build and a boot. The score is EIG per
cost, over a short list: the best splits among built and among new revisions, and the
endpoints. Sampling a revision again is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from functools import cache

import numpy as np

from kbisect.bisect.posterior.graph import Graph
from kbisect.stats.mixture import Array
from kbisect.stats.split import Fit

ROOT_2PI = math.sqrt(2 * math.pi)
_NODES = (0.484935707515, 1.465989094391, 2.484325841639, 3.581823483552, 4.859462828332)
_WEIGHTS = (0.344642334932, 0.13548370298, 0.019111580501, 0.000758070934, 4.310653e-06)
# 10-point Gauss-Hermite rule for E[g(Z)], Z ~ N(0, 1): nodes ±_NODES, weights summing to 1
HERMITE = tuple((sign * n, w) for n, w in zip(_NODES, _WEIGHTS, strict=True) for sign in (1, -1))
SHORTLIST = 4  # best splits considered per cost group
LIVE = 1e-3  # classes lighter than this are left out of the information


@dataclass(frozen=True)
class Cost:
    """What one more sample costs: a boot, plus a build for a revision not built yet."""

    boot: float = 1.0
    build: float = 0.15


@dataclass(frozen=True)
class Standing:
    """What the choice needs to know of the posterior (posterior.py), as it stands."""

    graph: Graph
    splits: Mapping[str, float]  # P(bad) of every revision that can still split the rest
    built: Set[str]  # revisions whose next sample costs a boot only
    untestable: Set[str]
    live: Sequence[tuple[float, int, int, Fit]]  # (P, mask, size, fit) of classes above LIVE
    last: tuple[float, float] | None  # the time and load of the latest sample


def _merged(parts: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """The parts with weight, nearly equal parts merged (they are, across most classes)."""
    bins: dict[tuple[int, int], list[float]] = {}
    for w, m, s in parts:
        if w > 1e-9:
            key = (round(m / s * 10), round(math.log(s) * 20))
            acc = bins.setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += w
            acc[1] += w * m
            acc[2] += w * s
    return [(w, m / w, s / w) for w, m, s in bins.values()]


def _density(parts: list[tuple[float, float, float]], y: float) -> float:
    total = 0.0
    for w, m, s in parts:
        z = (y - m) / s
        if -9.0 < z < 9.0:
            total += w / s * math.exp(-0.5 * z * z)
    return total / ROOT_2PI


def entropy(parts: list[tuple[float, float, float]]) -> float:
    """Entropy (nats) of a mixture of normals given as (weight, mean, sd): -E[log density],
    each part's expectation by 10-point Gauss-Hermite quadrature."""
    parts = _merged(parts)
    total = 0.0
    for w, m, s in parts:
        inner = 0.0
        for node, weight in HERMITE:
            inner += weight * math.log(max(_density(parts, m + s * node), 1e-300))
        total -= w * inner
    return total


def _eig(classes: list[tuple[float, Fit, float]], t: float, load: float = 0.0) -> float:
    """classes: (P_k, fit_k, f_k); t and load: the time of the next sample, and the load
    it is expected under (the last sample's: a hog that runs goes on running)."""
    parts, cond = [], 0.0
    for p, fit, f in classes:
        for share, bad in ((f, True), (1 - f, False)):
            if share > 0:
                sd = fit.sigma(bad)  # each side its own noise (likelihood.py)
                cond += p * share * 0.5 * math.log(2 * math.pi * math.e * sd * sd)
                parts.append((p * share, fit.level(bad, t, load), sd))
    return max(0.0, entropy(parts) - cond)


def shortlist(now: Standing) -> list[str]:
    """The best splits among built and among new revisions, and the endpoints."""
    order = {c: i for i, c in enumerate(now.graph.commits)}
    picks = []
    for built in (True, False):
        group = [c for c in now.splits if (c in now.built) == built]
        group.sort(key=lambda c: (abs(now.splits[c] - 0.5), order[c]))
        picks += group[:SHORTLIST]
    if not picks:
        return []
    ends = (now.graph.goods[0], now.graph.bad)
    return picks + [c for c in ends if c not in now.untestable]


def best(now: Standing, cost: Cost) -> str | None:
    """The revision to sample next, or None when no test can split what is left."""
    picks = shortlist(now)
    if not picks:
        return None
    if not now.live or now.last is None:  # no fit yet: the plain best split
        return picks[0]
    t, load = now.last[0] + 1.0, now.last[1]
    scores = []
    for rank, c in enumerate(picks):
        i = now.graph.index.get(c)
        classes = [
            (p, fit, 0.0 if i is None else (now.graph.anc[i] & mask).bit_count() / size)
            for p, mask, size, fit in now.live
        ]
        price = cost.boot + (0.0 if c in now.built else cost.build)
        scores.append((_eig(classes, t, load) / price, -rank, c))
    return max(scores)[2]


# --- a batch: k revisions for k machines at once ------------------------------------------

DRAWS = 64  # the joint outcome's entropy: this many fixed draws per part (antithetic)
SEED = 20261201


def batch(now: Standing, cost: Cost, k: int) -> list[str]:
    """k revisions to sample at once (one round of a pool of k machines), chosen for the
    information their joint outcome brings about the culprit, not k copies of the best:
    the first is best()'s (k = 1 is the single choice exactly), each next one the
    candidate that adds the most to the batch's joint information (joint()) per cost,
    given the ones already in it. A revision may be chosen twice (two samples of it); the
    candidates are best()'s shortlist and, per cost group, the revisions nearest each of
    the quantiles i/(k+1) of the posterior. Empty when no test can split the rest."""
    first = best(now, cost)
    if first is None:
        return []
    chosen = [first]
    if k <= 1 or not now.live or now.last is None:
        return chosen + _spread(now, k - 1, chosen)
    t, load = now.last[0] + 1.0, now.last[1]
    pool = _candidates(now, k)
    have = joint(now, chosen, t, load)
    while len(chosen) < k:
        scores = []
        for rank, c in enumerate(pool):
            built = c in now.built or c in chosen
            price = cost.boot + (0.0 if built else cost.build)
            gain = joint(now, [*chosen, c], t, load) - have
            scores.append((gain / price, -rank, c, gain))
        _, _, pick, gain = max(scores)
        chosen.append(pick)
        have += gain
    return chosen


def _spread(now: Standing, k: int, chosen: list[str]) -> list[str]:
    """Without a fit yet: the revisions nearest the quantiles i/(k+1), not chosen yet."""
    out: list[str] = []
    order = {c: i for i, c in enumerate(now.graph.commits)}
    for i in range(1, k + 1):
        q = i / (k + 1)
        left = [c for c in now.splits if c not in chosen and c not in out]
        if left:
            out.append(min(left, key=lambda c: (abs(now.splits[c] - q), order[c])))
    return out


def _candidates(now: Standing, k: int) -> list[str]:
    """best()'s shortlist, and per cost group the revision nearest each quantile
    i/(k+1) and i/(2k+2) of P(bad)."""
    order = {c: i for i, c in enumerate(now.graph.commits)}
    picks = shortlist(now)
    quantiles = sorted({i / (2 * k + 2) for i in range(1, 2 * k + 2)})  # i/(k+1) among them
    for built in (True, False):
        group = [c for c in now.splits if (c in now.built) == built]
        for q in quantiles if group else ():
            picks.append(min(group, key=lambda c: (abs(now.splits[c] - q), order[c])))
    return list(dict.fromkeys(picks))


@cache
def _normals(d: int) -> Array:
    """DRAWS standard normal draws in d dimensions, antithetic, from one seeded stream."""
    z = np.random.default_rng(SEED + d).standard_normal((DRAWS // 2, d))
    return np.vstack([z, -z])


def joint(now: Standing, picks: Sequence[str], t: float, load: float = 0.0) -> float:
    """The information (nats) the joint outcome of one sample of each of picks brings
    about the culprit: H(y_1..y_k) - E_culprit[H(y_1..y_k | culprit)]. Each live class is
    cut by the picks' ancestor sets into parts that make each pick good or bad; given the
    part, the k samples are independent normals at its class's levels and noise, so the
    outcome is a mixture of k-dimensional normals (nearly equal parts merged), and the
    information E[log p(y | part) - log p(y)] by DRAWS fixed draws per part (common
    random numbers: batches are compared on the same draws)."""
    g = now.graph
    ancs = [g.anc[g.index[c]] if c in g.index else 0 for c in picks]
    parts: dict[tuple[int, ...], tuple[float, Array, Array]] = {}
    for p, mask, size, fit in now.live:
        levels = np.array([[fit.level(b, t, load), fit.sigma(b)] for b in (False, True)])
        cut: list[tuple[int, tuple[int, ...]]] = [(mask, ())]
        for anc in ancs:
            cut = [
                (m, (*bits, side))
                for whole, bits in cut
                for side, m in ((1, whole & anc), (0, whole & ~anc))
                if m
            ]
        for m, bits in cut:
            w = p * m.bit_count() / size
            mean, sd = levels[list(bits), 0], levels[list(bits), 1]
            key = (*np.rint(mean / sd * 10).astype(int), *np.rint(np.log(sd) * 20).astype(int))
            w0, m0, s0 = parts.get(key, (0.0, 0.0 * mean, 0.0 * sd))
            parts[key] = (w0 + w, m0 + w * mean, s0 + w * sd)
    weights = np.array([w for w, _, _ in parts.values()])
    mu = np.array([m / w for w, m, _ in parts.values()])
    sd = np.array([s / w for w, _, s in parts.values()])
    weights = weights / weights.sum()
    y = mu[:, None, :] + sd[:, None, :] * _normals(len(picks))[None, :, :]  # (C, M, d)
    z = (y[:, :, None, :] - mu[None, None, :, :]) / sd[None, None, :, :]  # (C, M, C, d)
    log_dens = -0.5 * np.sum(z * z, axis=3) - np.sum(np.log(sd), axis=1)[None, None, :]
    log_dens += np.log(weights)[None, None, :]
    top = np.max(log_dens, axis=2, keepdims=True)
    log_mix = top[:, :, 0] + np.log(np.sum(np.exp(log_dens - top), axis=2))
    # E[log p(y | part) - log p(y)] on the same draws (the draws' own error cancels)
    own = np.diagonal(log_dens, axis1=0, axis2=2).T - np.log(weights)[:, None]  # (C, M)
    return max(0.0, float(weights @ np.mean(own - log_mix, axis=1)))
