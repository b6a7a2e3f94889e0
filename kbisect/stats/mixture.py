"""The two-part normal mixture every noise model of kbisect assumes, and its priors.

A boot's log tps is the level plus noise from a two-part mixture: the core part N(0, s²)
with weight 1 - w, and a wide part N(0, (k·s)²) with weight w, for the boot that went
wrong (a slow first boot, a noisy neighbour). One far boot is then explained by the wide
part, not by a wider spread or a moved level. The outlier weight w has a Beta(a, b) prior
truncated to [lo, hi] (Prior; OUTLIERS: Beta(1, 19), a 5% outlier rate expected, none
the most likely, the core always holding most boots); k is WIDE core spreads.

Three fits use it, each with its parameters and its own way to the maximum:
- one group's core level and spread (fit below; robust.py's ratio of two groups): EM, w
  at its maximum a posteriori (Prior(lo=0.0): no lower bound);
- one good/bad split of a bisection's samples, a two-level regression with each side its
  own noise (split.py, evidence.py): w integrated out, as the logit u of its place in
  [lo, hi] (w_of, u_prior, u_step), by Gauss-Legendre nodes (nodes) or Laplace;
- a bisection's whole range as a few level changes (changes.py): w and k fitted once
  under the most probable story (empirical Bayes), k within KAPPA_RANGE there.

Pure functions, numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
LOG_2PI = math.log(2 * math.pi)
WIDE = 8.0  # the wide part's spread, in core spreads


@dataclass(frozen=True)
class Prior:
    """Beta(a, b) on the outlier weight w, truncated to [lo, hi]; wide: the wide part's
    spread in core spreads."""

    a: float = 1.0
    b: float = 19.0
    lo: float = 0.005
    hi: float = 0.3
    wide: float = WIDE

    def w_of(self, u: float) -> tuple[float, float, float]:
        """w at u (the logit of w's place in [lo, hi]), and dw/du, d²w/du²."""
        lo, hi = self.lo, self.hi
        s = 1.0 / (1.0 + math.exp(-u)) if u > -700 else 0.0
        d1 = (hi - lo) * s * (1 - s)
        return lo + (hi - lo) * s, d1, d1 * (1 - 2 * s)

    def u_of(self, w: float) -> float:
        s = (w - self.lo) / (self.hi - self.lo)
        return math.log(s / (1 - s))

    def u_prior(self, u: float) -> tuple[float, float, float]:
        """log prior of u (the truncated Beta of w, times dw/du), and its two derivatives."""
        a, b = self.a, self.b
        lo, hi = self.lo, self.hi
        w, w1, w2 = self.w_of(u)
        s = (w - lo) / (hi - lo)
        value = (a - 1) * math.log(w) + (b - 1) * math.log1p(-w) - log_norm(self)
        value += math.log(w1) if w1 > 0 else -math.inf
        p1 = (a - 1) / w - (b - 1) / (1 - w)
        p2 = -(a - 1) / w**2 - (b - 1) / (1 - w) ** 2
        return value, p1 * w1 + (1 - 2 * s), p2 * w1 * w1 + p1 * w2 - 2 * s * (1 - s)

    def u_step(self, outliers: float, n: int, u: float) -> float:
        """u maximising outliers·log w + (n - outliers)·log(1 - w) + log prior(u)."""
        keep = n - outliers
        for _ in range(30):
            w, w1, w2 = self.w_of(u)
            _, p1, p2 = self.u_prior(u)
            g = outliers * w1 / w - keep * w1 / (1 - w) + p1
            h = (
                outliers * (w2 / w - (w1 / w) ** 2)
                - keep * (w2 / (1 - w) + (w1 / (1 - w)) ** 2)
                + p2
            )
            step = -g / h if h < 0 else math.copysign(1.0, g)
            step = max(-2.0, min(2.0, step))
            u += step
            if abs(step) < 1e-8:
                break
        return u


OUTLIERS = Prior()


@cache
def log_norm(prior: Prior) -> float:
    """log of the truncated Beta prior's normaliser (numerically, once)."""
    a, b = prior.a, prior.b
    w = np.linspace(prior.lo, prior.hi, 20001)
    dens = w ** (a - 1) * (1 - w) ** (b - 1)
    return math.log(float(np.sum((dens[1:] + dens[:-1]) * 0.5 * (w[1] - w[0]))))


@cache
def nodes(prior: Prior, count: int) -> tuple[Array, Array]:
    """Gauss-Legendre nodes over w's range, with log(weight × prior density): exact for w's
    integral of a polynomial of degree up to 2·count - 1 times its prior."""
    a, b = prior.a, prior.b
    lo, hi = prior.lo, prior.hi
    t, wt = np.polynomial.legendre.leggauss(count)
    w = lo + (hi - lo) * (t + 1) / 2
    log_prior = (a - 1) * np.log(w) + (b - 1) * np.log1p(-w) - log_norm(prior)
    return w, np.log(wt * (hi - lo) / 2) + log_prior


def log_density(d: float, sd: float, w: float, kappa: float) -> float:
    """log of the two-part mixture's density at the residual d (core sd, weight w on a part
    kappa times as wide)."""
    core = math.log1p(-w) - 0.5 * (d / sd) ** 2 - math.log(sd)
    wide = math.log(w) - 0.5 * (d / (kappa * sd)) ** 2 - math.log(kappa * sd)
    return max(core, wide) + math.log1p(math.exp(-abs(core - wide)))


def log_parts(q: Array, w: float, log_k: float, k2: float) -> tuple[Array, Array]:
    """log of each part's weight × density at q, the squared standardized residual, the
    wide part log_k wider (k2 = k²), without the terms common to both (-log s - ½·log 2π):
    the core part's responsibility is exp(core - logaddexp(core, wide))."""
    core = math.log1p(-w) - 0.5 * q
    wide = (math.log(w) if w > 0 else -math.inf) - log_k - 0.5 * q / k2
    return core, wide


# --- one group: its core level and spread (robust.py) ---------------------------------


def density(d: Array, s: float) -> Array:
    """The normal density N(0, s²) at d."""
    out: Array = np.exp(-0.5 * (d / s) ** 2) / (s * math.sqrt(2.0 * math.pi))
    return out


def objective(x: Array, mu: float, s: float, w: float, prior: Prior) -> float:
    """One group's penalized log likelihood: the mixture's, plus the prior on w (a = 1)."""
    d = x - mu
    mix = (1.0 - w) * density(d, s) + w * density(d, prior.wide * s)
    return float(np.sum(np.log(np.maximum(mix, 1e-300))) + (prior.b - 1.0) * math.log1p(-w))


def fit(
    x: Array, mu: float, s: float, w: float, prior: Prior, rounds: int, tol: float
) -> tuple[float, float, float, Array]:
    """One group's EM from (mu, s, w) to a local maximum of `objective` (at most `rounds`
    rounds, to `tol`): (mu, s, w, each boot's core probability). w is at its maximum a
    posteriori (a = 1), bounded by prior.hi."""
    n, last = len(x), -math.inf
    r = np.ones(n)
    wide2 = prior.wide**2
    for _ in range(rounds):
        d = x - mu
        core, wide = (1.0 - w) * density(d, s), w * density(d, prior.wide * s)
        r = core / np.maximum(core + wide, 1e-300)
        u = r + (1.0 - r) / wide2  # each boot's weight on mu and s
        mu = float(np.sum(u * x) / np.sum(u))
        s = max(math.sqrt(float(np.sum(u * (x - mu) ** 2)) / n), 1e-12)
        w = min(float(np.sum(1.0 - r)) / (n + prior.b - 1.0), prior.hi)
        now = objective(x, mu, s, w, prior)
        if now - last < tol:
            break
        last = now
    return mu, s, w, r
