"""The posterior over the hypotheses of a few level changes (changes.py's model): their
prior, every hypothesis fitted and weighed, and what they say (each class's probability of
a change, a change's effect, the next sample's predictive distribution).

The number of changes K has P(K) ∝ RHO^(K - 1) (K up to KMAX), their positions uniform
over the K-subsets of the range's commits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from kbisect.stats.changes import Design, Fits, Mixture, fit, matters
from kbisect.stats.mixture import Array

KMAX = 3  # changes in one hypothesis, at most
RHO = 0.25  # prior odds of one more change


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def hypotheses(sizes: Sequence[int], n: int) -> dict[int, tuple[NDArray[np.int64], Array]]:
    """Per K: the multisets of K classes, and each one's log prior: P(K) times the share
    of the K-subsets of the range's n commits that put the changes in those classes."""
    kmax = min(KMAX, n)
    norm = math.log(math.fsum(RHO**k for k in range(kmax)))
    out = {}
    for k in range(1, kmax + 1):
        rows, prior = [], []
        for combo in itertools.combinations_with_replacement(range(len(sizes)), k):
            counts: dict[int, int] = {}
            for c in combo:
                counts[c] = counts.get(c, 0) + 1
            if any(sizes[c] < m for c, m in counts.items()):
                continue
            ways = math.fsum(_log_comb(sizes[c], m) for c, m in counts.items())
            rows.append(combo)
            prior.append((k - 1) * math.log(RHO) - norm + ways - _log_comb(n, k))
        if rows:
            out[k] = (np.array(rows, dtype=np.int64), np.array(prior))
    return out


@dataclass
class Hypotheses:
    """Every hypothesis fitted and weighed: per K, the batch's fits and log posteriors,
    and the noise mixture they were fitted with."""

    fits: dict[int, Fits] = field(default_factory=dict)
    log_post: dict[int, Array] = field(default_factory=dict)
    mix: Mixture = field(default_factory=Mixture)

    def weigh(
        self, d: Design, least: float, hyps: dict[int, tuple[NDArray[np.int64], Array]]
    ) -> None:
        """Every hypothesis of hyps (per K: class numbers and log priors) fitted to d and
        weighed: its log posterior, with changes smaller than `least` left out."""
        for k, (idx, prior) in hyps.items():
            f = fit(d, idx, self.mix)
            self.fits[k] = f
            self.log_post[k] = prior + f.log_evidence + matters(f, least)
        top = max(float(v.max()) for v in self.log_post.values())
        total = top + math.log(
            math.fsum(float(np.exp(v - top).sum()) for v in self.log_post.values())
        )
        for k in self.log_post:
            self.log_post[k] = self.log_post[k] - total

    def best(self) -> tuple[int, int]:
        """(K, row) of the most probable hypothesis."""
        return max(
            ((k, int(v.argmax())) for k, v in self.log_post.items()),
            key=lambda kr: self.log_post[kr[0]][kr[1]],
        )

    def marginals(self, m: int) -> list[float]:
        """P(at least one change in class c), per class (m of them)."""
        out = np.zeros(m)
        for k, f in self.fits.items():
            p = np.exp(self.log_post[k])
            for c in range(m):
                out[c] += float(p[(f.idx == c).any(axis=1)].sum())
        return [min(float(v), 1.0) for v in out]

    def p_single(self) -> float:
        return float(np.exp(self.log_post[1]).sum()) if 1 in self.log_post else 0.0

    def effect(self, c: int) -> tuple[float, float, float, int]:
        """The change in class c as the most probable hypothesis holding it sees it:
        log effect, its sd, log noise ratio, and how many changes it puts there."""
        best: tuple[float, int, int] | None = None
        for k, f in self.fits.items():
            rows = np.nonzero((f.idx == c).any(axis=1))[0]
            if rows.size:
                row = int(rows[np.argmax(self.log_post[k][rows])])
                lp = float(self.log_post[k][row])
                if best is None or lp > best[0]:
                    best = (lp, k, row)
        assert best is not None
        _, k, row = best
        f = self.fits[k]
        cols = [i for i, v in enumerate(f.idx[row]) if v == c]
        d = math.fsum(float(f.theta[row, 1 + i]) for i in cols)
        var = math.fsum(float(f.cov[row, 1 + i, 1 + j]) for i in cols for j in cols)
        noise = math.fsum(float(f.s[row, 1 + i]) for i in cols)
        return d, math.sqrt(max(var, 0.0)), noise, len(cols)

    def predictive_parts(
        self, frac: Sequence[float], at: Array, live: float
    ) -> list[tuple[float, float, float]]:
        """The next sample as a mixture of normals over the hypotheses of posterior at least
        `live` and over which of their changes are among its revision's ancestors (frac:
        the share of each class that is), at the regressors' values `at`: (weight, mean,
        sd)."""
        parts = []
        for k, f in self.fits.items():
            p = np.exp(self.log_post[k])
            for row in np.nonzero(p >= live)[0]:
                cls = f.idx[row]
                for bits in itertools.product((0, 1), repeat=k):
                    w = float(p[row])
                    for c, b in zip(cls, bits, strict=True):
                        w *= frac[c] if b else 1 - frac[c]
                    if w <= 1e-9:
                        continue
                    mean = float(f.theta[row, 0]) + math.fsum(
                        float(f.theta[row, 1 + q]) * b for q, b in enumerate(bits)
                    )
                    mean += float(f.theta[row, 1 + k :] @ at)
                    ls = float(f.s[row, 0]) + math.fsum(
                        float(f.s[row, 1 + q]) * b for q, b in enumerate(bits)
                    )
                    parts.append((w, mean, math.exp(ls)))
        return parts
