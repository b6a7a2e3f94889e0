"""The two-part normal mixture every noise model of kbisect assumes, and its priors.

A boot's log tps is the level plus noise from a two-part mixture: the core part N(0, s²)
with weight 1 - w, and a wide part N(0, (k·s)²) with weight w, for the boot that went
wrong (a slow first boot, a noisy neighbour). One far boot is then explained by the wide
part, not by a wider spread or a moved level. The outlier weight w has a Beta(a, b) prior
truncated to [lo, hi] (Prior; OUTLIERS: Beta(1, 19), a 5% outlier rate expected, none
the most likely, the core always holding most boots); k is WIDE core spreads.

Three fits use it, each by EM (em below: the E-step e_step, its M-step its own), then:
- one group's core level and spread (Group; robust.py): w at its maximum a posteriori
  (Prior.w_map; Prior(lo=0.0): no lower bound);
- one good/bad split of a bisection's samples (split.py, evidence.py): w integrated out,
  as the logit u of its place in [lo, hi] (w_of, u_prior, u_step), by Gauss-Legendre nodes
  (nodes) or Laplace;
- a bisection's whole range as a few level changes (changes.py, a batch at once): w
  (Prior.w_map) and k fitted once under the most probable story (empirical Bayes).

Pure functions, numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Protocol

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

    def w_map(self, outliers: float, n: int) -> float:
        """w maximising outliers·log w + (n - outliers)·log(1 - w) + log prior(w)."""
        w = (outliers + self.a - 1) / (n + self.a + self.b - 2)
        return min(max(w, self.lo), self.hi)


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


def e_step(q: Array, w: float, log_k: float, k2: float) -> tuple[Array, Array]:
    """At q, the squared standardized residuals, the wide part log_k wider (k2 = k²): each
    sample's core responsibility and log mixture density, without -log s - ½·log 2π."""
    core = math.log1p(-w) - 0.5 * q
    wide = (math.log(w) if w > 0 else -math.inf) - log_k - 0.5 * q / k2
    both = np.logaddexp(core, wide)
    return np.exp(core - both), both


def louis(e: Array, inv: Array, r: Array, k2: float) -> tuple[Array, Array, Array]:
    """Per sample (residual e, inv = 1/sd², core share r), the mixture's observed
    information in (its mean, its log sd) by Louis' identity, -Σ_c r_c·(H_c + g_c·g_cᵀ) +
    ḡ·ḡᵀ: the (mean, mean), (mean, log sd) and (log sd, log sd) entries."""
    q, rw = e * e * inv, 1.0 - r
    ge0, gs0 = e * inv, q - 1.0  # the core part's gradient in (mean, log sd)
    ge1, gs1 = ge0 / k2, q / k2 - 1.0  # the wide part's
    ge, gs = r * ge0 + rw * ge1, r * gs0 + rw * gs1
    hh = r * inv + rw * inv / k2 - (r * ge0 * ge0 + rw * ge1 * ge1 - ge * ge)
    hg = 2 * ge - (r * ge0 * gs0 + rw * ge1 * gs1 - ge * gs)
    gg = 2 * (r * q + rw * q / k2) - (r * gs0 * gs0 + rw * gs1 * gs1 - gs * gs)
    return hh, hg, gg


def log_density(d: float, sd: float, w: float, kappa: float) -> float:
    """log of the mixture's density at the residual d, without -½·log 2π."""
    q = np.array([(d / sd) ** 2])
    return float(e_step(q, w, math.log(kappa), kappa**2)[1][0]) - math.log(sd)


def wls(h: Array, x: Array, weight: Array, prior: Array | None = None) -> Array:
    """Weighted least squares (weight per sample, the noise variance divided in), with the
    coefficients' prior precisions; None: h's columns are disjoint indicators, each its
    weighted mean."""
    if prior is None:
        return np.asarray(h.T @ (weight * x) / (h.T @ weight), dtype=float)
    gram = (h * weight[:, None]).T @ h + prior
    rhs = h.T @ (weight * x)
    try:
        return np.asarray(np.linalg.solve(gram, rhs), dtype=float)
    except np.linalg.LinAlgError:  # samples that leave a coefficient free: any of them
        return np.asarray(np.linalg.lstsq(gram, rhs)[0], dtype=float)


@dataclass(frozen=True)
class State:
    theta: Array  # the parameters
    e: Array  # residuals
    ls: Array  # log sigma of each sample
    w: float  # the outlier weight
    r: Array  # the core part's share of each sample
    q: Array  # (e / sigma)²
    value: float  # log likelihood + the log priors: what EM climbs


class Model(Protocol):
    """A fit's own part: its state at theta (the E-step, e_step, within), its M-step."""

    def state(self, theta: Array) -> State: ...
    def m_step(self, st: State) -> Array: ...


def em(model: Model, theta: Array, tol: float = 1e-9, rounds: int = 200) -> State:
    """EM from theta until a round gains less than tol (at most `rounds` rounds)."""
    last, st = -math.inf, model.state(theta)
    for _ in range(rounds):
        if st.value - last < tol:
            break
        last = st.value
        st = model.state(model.m_step(st))
    return st


class Group:
    """One group's samples x under the mixture; theta: its core level, spread and w."""

    def __init__(self, x: Array, prior: Prior) -> None:
        self.x, self.prior, self.log_k = x, prior, math.log(prior.wide)

    def state(self, theta: Array) -> State:
        mu, s, w = (float(v) for v in theta)
        e = self.x - mu
        q = (e / s) ** 2
        r, both = e_step(q, w, self.log_k, self.prior.wide**2)
        n = len(e)
        value = float(np.sum(both)) - n * (math.log(s) + 0.5 * LOG_2PI)
        ls = np.full(n, math.log(s))
        prior = (self.prior.b - 1.0) * math.log1p(-w)  # w's (a = 1)
        return State(theta, e, ls, w, r, q, value + prior)

    def m_step(self, st: State) -> Array:
        n, r = len(self.x), st.r
        u = r + (1.0 - r) / self.prior.wide**2  # each boot's weight on mu and s
        mu = float(wls(np.ones((n, 1)), self.x, u)[0])
        s = max(math.sqrt(float(np.sum(u * (self.x - mu) ** 2)) / n), 1e-12)
        return np.array([mu, s, self.prior.w_map(float(np.sum(1.0 - r)), n)])
