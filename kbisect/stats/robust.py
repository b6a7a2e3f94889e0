"""The ratio of two groups' typical tps, robust to outlier boots, each group its own noise.

Each group's log samples are the two-part mixture of mixture.py (core N(mu, s²), wide
N(mu, (WIDE·s)²) in proportion w), each group its own mu, s and w (one side may be
noisier than the other); w at its maximum a posteriori under PRIOR, at most W_MAX. The
fit is EM (mixture.Group) from several starts: the mean and standard deviation (the
all-core answer), and the same of the boots nearest the median with the k farthest set
apart (k = 1 .. W_MAX·n). An outlier fit is kept only if its penalized likelihood beats
the all-core one by MARGIN: it always wins a little on clean samples, and such a win
costs coverage. So on clean samples the estimate is exactly Welch's on the logs, and a
half-speed boot among five is set apart. Each boot set apart costs a degree of freedom
(DF_COST): it was fitted, not observed.

The two groups are fitted together (fit_two): the pair of fits kept is the one with the
best sum of the two penalized likelihoods and a prior that ties the two core spreads,
log s_A - log s_B ~ N(0, LINK_SD²), the posterior's own tie of its sides' noise
(bisect/posterior/likelihood.py). One group alone cannot tell two half-speed boots among
eight from a wide spread; beside a group whose boots are as tight as its other six, it
can. The cost: a side at well over twice the other's CV has its farthest boot set apart
now and then (coverage 91.7% at 2.4x, 6 boots a side, against 93.5% without the tie).

The ratio B/A is exp(mu_B - mu_A), the ratio of the two groups' core levels (geometric
means of their clean boots). Its interval is Welch's on the log scale with each group's
effective sample size n_eff = Σ r_i (r_i: the boot's probability of being core): the
core spread s_u² = Σ r_i (x_i - mu)² / (n_eff - 1), the standard error
sqrt(s_u,A²/n_eff,A + s_u,B²/n_eff,B), and the Welch–Satterthwaite degrees of freedom
on those two terms with n_eff - 1 each (a t quantile, never z: at 3 to 10 boots a side
the difference matters). A boot whose membership is uncertain (r_i near 1/2) makes mu
less certain than the core's spread alone says: the missing information (Louis) is
added to the standard error. tests/stats/test_robust.py simulates the coverage under
normal noise, t(3) noise and 5% half-speed boots, with a different CV on each side.

Pure functions, numpy only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from kbisect.stats import means, mixture

METHOD = "robust-mixture-log"
PRIOR = mixture.Prior(lo=0.0)  # Beta(1, 19) on the outlier weight, at most 0.3; WIDE 8
W_MAX = PRIOR.hi  # the outlier weight's bound: the core holds most boots
LEAST = 3  # below this many boots a group is all core (no outlier can be told apart)
ROUNDS = 200  # EM rounds at most
MARGIN = 1.0  # the log likelihood the outlier fit must gain over the all-core one
TOLERANCE = 1e-10  # on the penalized log likelihood
DF_COST = 1.0  # the degrees of freedom a boot set apart costs
LINK_SD = 0.5  # prior sd of log(s_A / s_B): the two groups' core spreads are tied this much


@dataclass(frozen=True)
class Fit:
    """One group on the log scale: its core level and spread, the outlier weight, each
    boot's probability of being core, and the level's standard error and df."""

    n: int
    mu: float
    s: float  # the core part's spread (maximum likelihood)
    w: float  # the outlier weight
    core: tuple[float, ...]  # each boot's probability of being core
    n_eff: float
    se: float  # the standard error of mu
    df: float  # n_eff - 1

    @property
    def level(self) -> float:
        """The core level in tps (the geometric mean of the clean boots)."""
        return math.exp(self.mu)


@dataclass(frozen=True)
class Estimate:
    """log(B/A) with its standard error and Welch df, and the two groups' fits."""

    log_ratio: float
    se: float
    df: float | None  # None when both groups are constant
    a: Fit
    b: Fit

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)


def _logs(xs: Sequence[float], what: str) -> np.ndarray:
    if len(xs) < 2:
        raise means.NotEnoughSamples(f"{what}: need at least 2 boots per side, have {len(xs)}")
    x = np.asarray(xs, dtype=float)
    if not np.all(np.isfinite(x)):
        raise means.StatsError(f"{what}: samples must be finite numbers")
    if np.any(x <= 0):
        raise means.StatsError(f"{what}: the robust ratio needs positive samples")
    logs: np.ndarray = np.log(x)
    return logs


def _all_core(x: np.ndarray) -> Fit:
    n = len(x)
    if np.ptp(x) == 0:  # all equal: a point (a mean of equal floats may round off it)
        return Fit(n, float(x[0]), 0.0, 0.0, (1.0,) * n, float(n), 0.0, float(n - 1))
    mu = float(np.mean(x))
    s = float(np.std(x, ddof=1))
    return Fit(n, mu, s, 0.0, (1.0,) * n, float(n), s / math.sqrt(n), float(n - 1))


Candidate = tuple[float, float, float, np.ndarray]  # an EM fit: mu, s, w, core probabilities


def _candidates(x: np.ndarray) -> list[tuple[Candidate, float]]:
    """One group's EM fits from its starts (module docstring), the all-core one first,
    with their penalized log likelihoods. Fewer than LEAST boots, or all equal: that one."""
    plain = _all_core(x)
    first = (plain.mu, plain.s * math.sqrt((len(x) - 1) / len(x)), 0.0)
    if len(x) < LEAST or plain.s == 0.0:
        return [((*first, np.ones(len(x))), math.nan)]
    starts = [first]
    near = x[np.argsort(np.abs(x - np.median(x)), kind="stable")]
    for k in range(1, int(W_MAX * len(x)) + 1):  # the k boots farthest from the median apart
        kept = near[: len(x) - k]
        if np.ptp(kept) > 0:
            starts.append((float(np.mean(kept)), float(np.std(kept)), k / len(x)))
    group = mixture.Group(x, PRIOR)
    ends = [mixture.em(group, np.array(start), TOLERANCE, ROUNDS) for start in starts]
    return [((float(st.theta[0]), float(st.theta[1]), st.w, st.r), st.value) for st in ends]


def _chosen(cands: list[tuple[Candidate, float]]) -> int:
    """The candidate kept: the best outlier fit if it gains MARGIN over the all-core one
    (index 0)."""
    best = max(range(1, len(cands)), key=lambda i: cands[i][1], default=0)
    return best if best and cands[best][1] > cands[0][1] + MARGIN else 0


def fit(xs: Sequence[float]) -> Fit:
    """One group's fit (module docstring)."""
    x = _logs(xs, "samples")
    cands = _candidates(x)
    return _summarized(x, *cands[_chosen(cands)][0])


def _summarized(x: np.ndarray, mu: float, s: float, w: float, r: np.ndarray) -> Fit:
    """The fit's standard error: the core's Welch-like term on n_eff boots, plus the
    information lost to the boots whose membership is uncertain (Louis)."""
    n_eff = float(np.sum(r))
    if n_eff >= len(x) - 1e-9:
        plain = _all_core(x)
        return replace(plain, s=s, w=w)
    d = x - mu
    s_u2 = float(np.sum(r * d**2)) / max(n_eff - 1.0, 1e-9)
    info = float(np.sum(r + (1.0 - r) / PRIOR.wide**2)) / s**2  # the complete data's on mu
    observed = float(np.sum(mixture.louis(d, np.full(len(d), s**-2), r, PRIOR.wide**2)[0]))
    se2 = s_u2 / n_eff * info / max(observed, 1e-3 * info)
    core = tuple(float(v) for v in r)
    df = max(n_eff - 1.0 - DF_COST * (len(x) - n_eff), 1.0)
    return Fit(len(x), mu, s, w, core, n_eff, math.sqrt(se2), df)


def fit_two(a: Sequence[float], b: Sequence[float]) -> tuple[Fit, Fit]:
    """The two groups' fits, chosen together (module docstring): each group's candidates
    weighed with the prior that ties the two core spreads."""
    fa, fb = fit_tied([a, b], ("group A", "group B"))
    return fa, fb


def fit_tied(groups: Sequence[Sequence[float]], names: Sequence[str]) -> list[Fit]:
    """Several groups' fits chosen together, as fit_two's two: the product of their
    candidates, each pair's core spreads tied (the pairs' ties summed over k - 1, so two
    groups are tied as fit_two's)."""
    xs = [_logs(g, name) for g, name in zip(groups, names, strict=True)]
    cands = [_candidates(x) for x in xs]
    k = len(xs)

    def score(pick: tuple[int, ...]) -> float:
        chosen = [cands[g][i] for g, i in enumerate(pick)]
        if any(math.isnan(v) or c[1] <= 0.0 for c, v in chosen):
            return -math.inf if any(pick) else 0.0  # a group too small to fit: all core
        logs = [math.log(c[1]) for c, _ in chosen]
        tie = sum(
            0.5 * ((logs[i] - logs[j]) / LINK_SD) ** 2 for i in range(k) for j in range(i + 1, k)
        ) / max(k - 1, 1)
        return sum(v for _, v in chosen) - tie - MARGIN * sum(i > 0 for i in pick)

    picks = list(itertools.product(*(range(len(c)) for c in cands)))
    # the best pick; on a tie, the one that sets fewer groups' boots apart
    best = max(picks, key=lambda p: (score(p), -sum(i > 0 for i in p)))
    return [_summarized(x, *cands[g][i][0]) for g, (x, i) in enumerate(zip(xs, best, strict=True))]


def estimate(a: Sequence[float], b: Sequence[float]) -> Estimate:
    """log(B/A) from the two groups' fits (fit_two), Welch's standard error and df on
    them."""
    fa, fb = fit_two(a, b)
    va, vb = fa.se**2, fb.se**2
    log_ratio = fb.mu - fa.mu
    if va + vb == 0:
        return Estimate(log_ratio, 0.0, None, fa, fb)
    var, df = means.welch([(va, fa.df), (vb, fb.df)])
    return Estimate(log_ratio, math.sqrt(var), df, fa, fb)
