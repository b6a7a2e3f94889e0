"""How much the samples support one split of the revisions into good and bad.

A hypothesis about the culprit splits every sample into the good group (z = 0) and the
bad group (z = 1). On the log scale, x = log(tps),

    x_j = mu_good·(1 - z_j) + mu_bad·z_j [+ slope·(t_j - t_mean)] [+ beta·(d_j - d_mean)]
          + sigma_j·e_j,    log sigma_j = log sigma_good + delta·z_j

with e_j from a two-part mixture: N(0, 1) with weight 1 - w, and N(0, k²) with weight w
(k = 8: one boot in twenty may be far off, as TCG's slow first boots are). A sample far
from both levels is then explained by the wide part under either hypothesis and moves the
odds little; under a plain normal it would decide them.

Outside its own model. Real compares show one side at twice the other's CV, and how often
a boot is far off is a property of the host, not a constant; so
- the noise is per side: delta, the log of sigma_bad / sigma_good, has a N(0, 0.5²) prior
  (a factor of 1.65 is one sd) and is integrated out with the rest;
- the outlier weight w is fitted: a Beta(1, 19) prior (mean 0.05) truncated to
  [0.005, 0.3], integrated out per split like every other parameter. It is not an
  empirical-Bayes value shared by every split: its prior is proper, so it does not cancel,
  and it should not: a split that needs three boots of ten to be outliers pays for them
  (w must be large, which its prior doubts), where a fixed w let the outlier part absorb
  the samples that contradict the split. Integrating also keeps each split's evidence its
  own (posterior.py fits the splits one by one). k stays fixed: with a handful of far boots
  their width is barely identified, and a fitted width would let a split widen the wide
  part until anything fits.
A model given a fixed `outlier` weight is the model of runs stored before those two were
fitted (one sigma, fixed w): their reports re-render to the same figures.

d_j is the load of sample j: the share of the CPUs other work took while it ran, as
measured (targets/monitor.py: others' share of the host where the kernel runs on it, steal
time inside the kernel). A hog that starts halfway is a step, not a slope: the trend
alone cannot explain it, and good revisions then look bad (seen for real: scripts/drift-demo);
with the load as a regressor the samples taken under it stay evidence. It enters only
when the loads differ by at least LOAD_SPREAD (a run with disturbed samples kept).

With a pool of machines (Model `machines`, docs/statistics.md "Bisection over a pool of
machines") each sample's machine enters the same way: one indicator per machine, centred,
with a N(0, machine_sd²) prior on its log offset, so that a machine a few percent faster
is not read as a level change; with one machine there is none (today's model).

The levels, the noise scales, w, the slope and beta are not plugged in: the evidence of a
split is the likelihood *integrated* over them, with flat priors on the levels and on
log sigma_good (the scale-invariant prior), a normal prior on the slope (sd: a change of
`drift_sd` over the samples' time span) and on beta (sd `load_sd` per unit of load). The
maximum is found by EM, then polished by Newton's method on all parameters at once (w as
the logit of its place in its range, so every parameter is unbounded). The integral is
Laplace's method there: log m = l(theta^) + (d/2)·log 2pi - ½·log det I(theta^), with I
the observed information (per sample, the mixture's Hessian in Louis' form). For a plain
normal likelihood this is exact: m ∝ (n_good·n_bad)^(-1/2)·S^(-(n-2)/2), S the residual
sum of squares, which is Student-t-like in the levels' uncertainty; the flat priors are
improper but the same for every split, so they cancel in the posterior.

With few samples the posterior is far from normal (a boot may or may not be an outlier,
the scales are skewed, the levels' spread follows the noise) and Laplace is off: by 0.4
to 1.9 nats at 4-10 samples like the tests', and not by the same amount for every split
(0.37 to 0.88 nat across the splits of one set of 12 samples). Up to SMALL samples the
evidence is therefore importance sampling, DRAWS draws: w's integral by Gauss-Legendre
(NODES nodes; the integrand is a polynomial in w times its prior), log sigma_good and
delta from a multivariate t (TAIL_DF degrees of freedom) around the maximum, their block
of the Laplace covariance widened by WIDEN, and the levels and regressors from a t around
their weighted least squares given those scales. The draws come from one seeded stream,
in antithetic pairs, the same for every split and every refresh: deterministic, and the
splits are compared with common random numbers. tests/bisect/test_likelihood.py checks it
against exact integration (within 0.1 nat). Beyond SMALL samples Laplace stays: the
sampler costs about 2 ms a split, and the posterior is refreshed after every boot.

The maximum is reached from fixed starts (each side's median, and least squares where the
first counts a boot as an outlier), never from the fits before it: a stored run re-renders
to the figures it showed live. The fixed model keeps its old starts (least squares and
the last fit of a similar split).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray

LOG_2PI = math.log(2 * math.pi)
Array = NDArray[np.float64]

OUTLIER_PRIOR = (1.0, 19.0)  # Beta(a, b) on the outlier weight w: mean 0.05
OUTLIER_RANGE = (0.005, 0.3)  # ... truncated to this range
SIDE_SD = 0.5  # prior sd of log(sigma_bad / sigma_good) when the outlier part is fitted
SMALL = 10  # up to this many samples the evidence is importance sampling, not Laplace
DRAWS = 1024  # importance sampling draws
TAIL_DF = 3.0  # degrees of freedom of the multivariate t proposals
WIDEN = 1.5  # the scales' proposal: the Laplace covariance times this
NODES = 6  # Gauss-Legendre nodes for w's integral (1e-4 nat of the exact one at SMALL)
SEED = 20261125
EMTOL = 1e-6  # EM's tolerance where Newton's method polishes its end
ROUGH = 1e-3  # EM's tolerance for choosing among the starts
NEAR = 1e-6  # Newton's last step: the Hessian before it is the Hessian after it


@dataclass(frozen=True)
class Model:
    """The noise model: the outlier part's weight (None: fitted) and width, the prior sd of
    the two sides' log noise ratio (None: SIDE_SD when the weight is fitted, else 0: one
    sigma), and whether time drifts."""

    outlier: float | None = None
    outlier_scale: float = 8.0
    trend: bool = False
    drift_sd: float = 0.2  # prior sd of the slope: this change over the samples' time span
    load: bool = True  # the measured load is a regressor when the samples' loads differ
    load_sd: float = 2.0  # prior sd of beta: log tps change per unit of load
    side_sd: float | None = None
    machines: bool = False  # each sample's machine a multiplicative offset (a pool)
    machine_sd: float = 0.05  # prior sd of a machine's log offset: a 5% machine effect

    @property
    def fitted(self) -> bool:
        """Is the outlier weight fitted (and integrated), not fixed."""
        return self.outlier is None

    @property
    def side(self) -> float:
        """The prior sd of delta, the log of sigma_bad / sigma_good; 0: one sigma."""
        if self.side_sd is not None:
            return self.side_sd
        return SIDE_SD if self.fitted else 0.0

    def as_dict(self) -> dict[str, float | bool | None]:
        return {
            "outlier": self.outlier,
            "outlier_scale": self.outlier_scale,
            "trend": self.trend,
            "drift_sd": self.drift_sd,
            "load": self.load,
            "load_sd": self.load_sd,
            "side_sd": self.side_sd,
        } | ({"machines": True, "machine_sd": self.machine_sd} if self.machines else {})


LOAD_SPREAD = 0.05  # loads closer than this (a quiet run's background) add no regressor


@dataclass(frozen=True)
class Fit:
    """The maximum of one split and its evidence (Laplace's, or importance sampling's for
    few samples: `laplace` keeps Laplace's)."""

    log_evidence: float
    coef: tuple[float, ...]  # mu_good, mu_bad, then one per regressor (slope, beta)
    log_sigma: float  # the good side's log noise (the core part's sd)
    loglik: float  # log likelihood + the log priors of what has a proper one: the maximum
    regressors: tuple[str, ...] = ()  # "t", "load": what coef[2:] are
    centres: tuple[float, ...] = ()  # the value each regressor is centred on
    log_sigma_bad: float | None = None  # the bad side's (None: the same as the good side's)
    outlier: float = 0.05  # the outlier weight w at the maximum
    laplace: float | None = None  # Laplace's log evidence where log_evidence is not it

    def level(self, bad: bool, t: float, load: float = 0.0, machine: str | None = None) -> float:
        """The fitted log tps of a good or bad revision at time t under a load, on a
        machine (None: the machines' average, as the samples weigh them)."""
        terms = zip(self.coef[2:], self.regressors, self.centres, strict=True)
        extra = math.fsum(
            c * (regressor_value(name, centre, t, load, machine) - centre)
            for c, name, centre in terms
        )
        return self.coef[int(bad)] + extra

    def sigma(self, bad: bool) -> float:
        """The core noise sd (log scale) of a good or bad revision's samples."""
        if bad and self.log_sigma_bad is not None:
            return math.exp(self.log_sigma_bad)
        return math.exp(self.log_sigma)


MACHINE = "machine:"  # a machine's regressor: its name after this


def regressor_value(name: str, centre: float, t: float, load: float, machine: str | None) -> float:
    """A regressor's value at (t, load, machine); a machine's indicator at its centre
    where the machine is not given (the machines' average)."""
    if name.startswith(MACHINE):
        return centre if machine is None else float(name[len(MACHINE) :] == machine)
    return t if name == "t" else load


def machine_columns(model: Model, machine: Sequence[str] | None) -> list[tuple[str, list[float]]]:
    """Each machine's indicator (name, values) where the model has machine offsets and the
    samples come from more than one machine; none otherwise (one machine: today's model).
    Every machine has its own offset, centred, with a proper prior (model.machine_sd): a
    machine effect is integrated out like the other regressors, never read as a level."""
    if not model.machines or not machine or len(set(machine)) < 2:
        return []
    return [(MACHINE + m, [1.0 if x == m else 0.0 for x in machine]) for m in sorted(set(machine))]


@cache
def _outlier_norm() -> float:
    """log of the truncated Beta prior's normaliser (numerically, once)."""
    a, b = OUTLIER_PRIOR
    lo, hi = OUTLIER_RANGE
    w = np.linspace(lo, hi, 20001)
    dens = w ** (a - 1) * (1 - w) ** (b - 1)
    return math.log(float(np.sum((dens[1:] + dens[:-1]) * 0.5 * (w[1] - w[0]))))


@cache
def _draws(q: int, p: int) -> tuple[Array, Array, Array, Array]:
    """The importance sampler's standard draws for q scale parameters and p levels and
    regressors: normal (DRAWS, q) and (DRAWS, p), each with its sqrt(TAIL_DF / chi²), in
    antithetic pairs, from one seeded stream."""
    rng = np.random.default_rng(SEED)
    half = DRAWS // 2
    out = []
    for d in (q, p):
        z = rng.standard_normal((half, d))
        c = np.sqrt(TAIL_DF / rng.chisquare(TAIL_DF, half))
        out += [np.vstack([z, -z]), np.concatenate([c, c])]
    return out[0], out[1], out[2], out[3]


@cache
def _nodes() -> tuple[Array, Array]:
    """Gauss-Legendre nodes over w's range, with log(weight × prior density): exact for w's
    integral of a polynomial of degree up to 2·NODES - 1 times its prior."""
    a, b = OUTLIER_PRIOR
    lo, hi = OUTLIER_RANGE
    t, wt = np.polynomial.legendre.leggauss(NODES)
    w = lo + (hi - lo) * (t + 1) / 2
    log_prior = (a - 1) * np.log(w) + (b - 1) * np.log1p(-w) - _outlier_norm()
    return w, np.log(wt * (hi - lo) / 2) + log_prior


class _Data:
    """The samples of one split: log tps, group (0 good, 1 bad), the design (the two
    levels, then the regressors, each centred) with the regressors' prior precision, and
    the layout of the parameter vector: coef..., log sigma_good[, delta][, u]."""

    def __init__(
        self,
        x: Sequence[float],
        z: Sequence[bool],
        model: Model,
        t: Sequence[float] | None,
        load: Sequence[float] | None,
        machine: Sequence[str] | None = None,
    ) -> None:
        self.x = np.asarray(x, dtype=float)
        self.z = np.asarray([1.0 if b else 0.0 for b in z])
        self.n = len(self.x)
        self.n_bad = float(self.z.sum())
        self.names: list[str] = []
        self.centres: list[float] = []
        cols = [1.0 - self.z, self.z]
        precision = [0.0, 0.0]
        if t is not None:
            span = max(t) - min(t)
            # the slope's prior precision: drift_sd over the span is one standard deviation
            self._add(cols, precision, "t", t, (span / model.drift_sd) ** 2 if span else 1e12)
        if load is not None:
            self._add(cols, precision, "load", load, 1.0 / model.load_sd**2)
        for name, values in machine_columns(model, machine):
            self._add(cols, precision, name, values, 1.0 / model.machine_sd**2)
        self.h = np.stack(cols, axis=1)
        self.precision = np.asarray(precision)
        self.prior_matrix = np.diag(self.precision)
        self.p = len(cols)
        self.k2 = model.outlier_scale**2
        self.log_k = math.log(model.outlier_scale)
        self.tau = model.side
        self.fixed_w = model.outlier
        self.i_delta = self.p + 1 if self.tau > 0 else None
        self.i_u = self.p + 1 + (self.tau > 0) if model.fitted else None
        self.d = self.p + 1 + (self.tau > 0) + model.fitted

    def _add(
        self,
        cols: list[Array],
        precision: list[float],
        name: str,
        values: Sequence[float],
        prec: float,
    ) -> None:
        v = np.asarray(values, dtype=float)
        centre = math.fsum(values) / len(values)
        self.names.append(name)
        self.centres.append(centre)
        cols.append(v - centre)
        precision.append(prec)

    # --- the parameters -----------------------------------------------------------------

    def marginal(self, theta: Array) -> Array:
        """log ∫ likelihood × prior dw, per row of theta (m, d; u ignored): the other
        parameters' proper log priors, and w's integral by Gauss-Legendre."""
        e = self.x[None, :] - theta[:, : self.p] @ self.h.T
        ls = theta[:, self.p, None] + 0.0 * e
        if self.i_delta is not None:
            ls = ls + theta[:, self.i_delta, None] * self.z[None, :]
        w, log_weight = _nodes()
        q = e * e * np.exp(-2 * ls)
        core = -0.5 * q
        wide = -self.log_k - 0.5 * q / self.k2
        top = np.maximum(core, wide)
        a, b = np.exp(core - top), np.exp(wide - top)  # (m, n): the parts' densities, scaled
        # each factor is at least min(w, 1 - w): the product of SMALL of them stays normal
        mixed = a[:, None, :] + w[None, :, None] * (b - a)[:, None, :]  # (m, nodes, n)
        per_node = np.log(np.prod(mixed, axis=2)) + log_weight[None, :]
        peak = np.max(per_node, axis=1)
        out = peak + np.log(np.sum(np.exp(per_node - peak[:, None]), axis=1)) + top.sum(axis=1)
        out += -np.sum(ls, axis=1) - 0.5 * self.n * LOG_2PI
        for k in range(2, self.p):
            prec = self.precision[k]
            out += 0.5 * math.log(prec) - 0.5 * LOG_2PI - 0.5 * prec * theta[:, k] ** 2
        if self.i_delta is not None:
            tau = self.tau
            out += -0.5 * LOG_2PI - math.log(tau) - 0.5 * (theta[:, self.i_delta] / tau) ** 2
        return np.asarray(out)

    def state(self, theta: Array) -> _State:
        """Everything at one point: residuals, log sigmas, w, the core part's share r of
        each sample, and the log posterior."""
        e = self.x - self.h @ theta[: self.p]
        ls = np.full(self.n, theta[self.p])
        prior = 0.0
        if self.i_delta is not None:
            delta = float(theta[self.i_delta])
            ls = ls + delta * self.z
            prior += -0.5 * LOG_2PI - math.log(self.tau) - 0.5 * (delta / self.tau) ** 2
        if self.i_u is None:
            w = float(self.fixed_w or 0.0)
        else:
            w, _, _ = _w_of(float(theta[self.i_u]))
            prior += _u_prior(float(theta[self.i_u]))[0]
        for k in range(2, self.p):
            prec = float(self.precision[k])
            prior += 0.5 * math.log(prec) - 0.5 * LOG_2PI - 0.5 * prec * float(theta[k]) ** 2
        q = e * e * np.exp(-2 * ls)
        core = math.log1p(-w) - 0.5 * q
        wide = (math.log(w) if w > 0 else -math.inf) - self.log_k - 0.5 * q / self.k2
        both = np.logaddexp(core, wide)
        value = float(np.sum(both - ls)) - 0.5 * self.n * LOG_2PI + prior
        return _State(theta, e, ls, w, np.exp(core - both), q, value)

    # --- the gradient and the Hessian ---------------------------------------------------

    def hessian(self, st: _State, core_only: bool = False) -> tuple[Array, Array]:
        """Gradient and Hessian of the log posterior at theta. Per sample, in the local
        variables (residual, log sigma, u), the mixture's Hessian in Louis' form,
        Σ_c r_c·(H_c + g_c·g_cᵀ) - ḡ·ḡᵀ, then by the chain rule. core_only: as if every
        sample were in the core part (where the full Hessian is not negative definite)."""
        theta = st.theta
        r = np.ones(self.n) if core_only else st.r
        w1 = w2 = 0.0
        if self.i_u is not None:
            _, w1, w2 = _w_of(float(theta[self.i_u]))
        w = st.w
        # d/du and d²/du² of log(1 - w) (core) and log w (wide)
        cu1, cu2 = -w1 / (1 - w), -w2 / (1 - w) - (w1 / (1 - w)) ** 2
        wu1, wu2 = (w1 / w, w2 / w - (w1 / w) ** 2) if w > 0 else (0.0, 0.0)
        inv = np.exp(-2 * st.ls)
        ge0, gs0 = -st.e * inv, -1.0 + st.q  # the core part's gradient in (e, ls)
        ge1, gs1 = ge0 / self.k2, -1.0 + st.q / self.k2  # the wide part's
        rw = 1.0 - r
        gbe, gbs, gbu = r * ge0 + rw * ge1, r * gs0 + rw * gs1, r * cu1 + rw * wu1
        # Σ_c r_c·(H_c + g_c·g_cᵀ) - ḡ·ḡᵀ, entry by entry
        lee = r * (ge0 * ge0 - inv) + rw * (ge1 * ge1 - inv / self.k2) - gbe * gbe
        les = r * (ge0 * gs0 - 2 * ge0) + rw * (ge1 * gs1 - 2 * ge1) - gbe * gbs
        lss = r * (gs0 * gs0 - 2 * st.q) + rw * (gs1 * gs1 - 2 * st.q / self.k2) - gbs * gbs
        leu = r * ge0 * cu1 + rw * ge1 * wu1 - gbe * gbu
        lsu = r * gs0 * cu1 + rw * gs1 * wu1 - gbs * gbu
        luu = r * (cu2 + cu1 * cu1) + rw * (wu2 + wu1 * wu1) - gbu * gbu
        p, h, z = self.p, self.h, self.z
        grad = np.zeros(self.d)
        hess = np.zeros((self.d, self.d))
        grad[:p] = -h.T @ gbe
        grad[p] = gbs.sum()
        hess[:p, :p] = (h * lee[:, None]).T @ h
        hess[:p, p] = -h.T @ les
        hess[p, p] = lss.sum()
        if self.i_delta is not None:
            i = self.i_delta
            grad[i] = float(gbs @ z) - theta[i] / self.tau**2
            hess[:p, i] = -h.T @ (les * z)
            hess[p, i] = hess[i, i] = float(lss @ z)
            hess[i, i] -= 1.0 / self.tau**2
        if self.i_u is not None:
            i = self.i_u
            _, du1, du2 = _u_prior(float(theta[i]))
            grad[i] = gbu.sum() + du1
            hess[:p, i] = -h.T @ leu
            hess[p, i] = lsu.sum()
            if self.i_delta is not None:
                hess[self.i_delta, i] = float(lsu @ z)
            hess[i, i] = luu.sum() + du2
        for k in range(2, p):
            grad[k] -= self.precision[k] * theta[k]
            hess[k, k] -= self.precision[k]
        upper = np.triu(hess, 1)
        return grad, np.triu(hess) + upper.T

    # --- EM -----------------------------------------------------------------------------

    def start(self, robust: bool = True) -> Array:
        """Least squares, the noise from the median absolute residual, w at its prior mean;
        where w is fitted, each side's median for its level: a start no far boot moves
        (the fixed model of earlier runs keeps its start, and so its maximum)."""
        theta = np.zeros(self.d)
        coef = self.wls(np.ones(self.n))
        if self.i_u is not None:
            theta[self.i_u] = _u_of(OUTLIER_PRIOR[0] / sum(OUTLIER_PRIOR))
        if self.i_u is not None and robust:
            for g in (0, 1):
                side = self.x[self.z == g] - self.h[self.z == g, 2:] @ coef[2:]
                coef[g] = float(np.median(side))
        e = np.sort(np.abs(self.x - self.h @ coef))
        mad = float(e[self.n // 2]) / 0.6745
        theta[: self.p] = coef
        theta[self.p] = math.log(max(mad, 1e-6))
        return theta

    def wls(self, weight: Array) -> Array:
        """Weighted least squares with the regressors' priors: weight is per sample, the
        noise variance already divided in."""
        if self.p == 2:  # the two levels alone: each side's weighted mean
            sums = self.h.T @ weight
            return np.asarray(self.h.T @ (weight * self.x) / sums, dtype=float)
        gram = (self.h * weight[:, None]).T @ self.h + self.prior_matrix
        rhs = self.h.T @ (weight * self.x)
        try:
            return np.asarray(np.linalg.solve(gram, rhs), dtype=float)
        except np.linalg.LinAlgError:  # samples that leave a coefficient free: any of them
            return np.asarray(np.linalg.lstsq(gram, rhs)[0], dtype=float)

    def em_step(self, st: _State) -> Array:
        """One EM step: the levels and regressors by weighted least squares, the log sigmas
        (and delta) and u by Newton's method on their parts of the expected complete log
        posterior (each concave)."""
        theta, r = st.theta, st.r
        omega = r + (1.0 - r) / self.k2
        out = theta.copy()
        out[: self.p] = self.wls(omega * np.exp(-2 * st.ls))
        res = self.x - self.h @ out[: self.p]
        weighted = omega * res * res
        if self.i_delta is None:
            out[self.p] = 0.5 * math.log(max(float(weighted.sum()) / self.n, 1e-300))
        else:
            bad = float(weighted @ self.z)
            sums = (float(weighted.sum()) - bad, bad)
            counts = (self.n - self.n_bad, self.n_bad)
            old = (float(theta[self.p]), float(theta[self.i_delta]))
            out[self.p], out[self.i_delta] = _scales(sums, counts, self.tau, *old)
        if self.i_u is not None:
            out[self.i_u] = _u_step(float(np.sum(1.0 - r)), self.n, float(theta[self.i_u]))
        return out


@dataclass(frozen=True)
class _State:
    theta: Array  # the parameters
    e: Array  # residuals
    ls: Array  # log sigma of each sample
    w: float  # the outlier weight
    r: Array  # the core part's share of each sample
    q: Array  # (e / sigma)²
    value: float  # log likelihood + the proper log priors


def _w_of(u: float) -> tuple[float, float, float]:
    """w at u, and dw/du, d²w/du²."""
    lo, hi = OUTLIER_RANGE
    s = 1.0 / (1.0 + math.exp(-u)) if u > -700 else 0.0
    d1 = (hi - lo) * s * (1 - s)
    return lo + (hi - lo) * s, d1, d1 * (1 - 2 * s)


def _u_prior(u: float) -> tuple[float, float, float]:
    """log prior of u (the truncated Beta of w, times dw/du), and its two derivatives."""
    a, b = OUTLIER_PRIOR
    lo, hi = OUTLIER_RANGE
    w, w1, w2 = _w_of(u)
    s = (w - lo) / (hi - lo)
    value = (a - 1) * math.log(w) + (b - 1) * math.log1p(-w) - _outlier_norm()
    value += math.log(w1) if w1 > 0 else -math.inf
    p1 = (a - 1) / w - (b - 1) / (1 - w)
    p2 = -(a - 1) / w**2 - (b - 1) / (1 - w) ** 2
    return value, p1 * w1 + (1 - 2 * s), p2 * w1 * w1 + p1 * w2 - 2 * s * (1 - s)


def _u_step(outliers: float, n: int, u: float) -> float:
    """u maximising outliers·log w + (n - outliers)·log(1 - w) + log prior(u)."""
    keep = n - outliers
    for _ in range(30):
        w, w1, w2 = _w_of(u)
        _, p1, p2 = _u_prior(u)
        g = outliers * w1 / w - keep * w1 / (1 - w) + p1
        h = outliers * (w2 / w - (w1 / w) ** 2) - keep * (w2 / (1 - w) + (w1 / (1 - w)) ** 2) + p2
        step = -g / h if h < 0 else math.copysign(1.0, g)
        step = max(-2.0, min(2.0, step))
        u += step
        if abs(step) < 1e-8:
            break
    return u


def _u_of(w: float) -> float:
    lo, hi = OUTLIER_RANGE
    s = (w - lo) / (hi - lo)
    return math.log(s / (1 - s))


def _scales(
    sums: Sequence[float], counts: Sequence[float], tau: float, s: float, dl: float
) -> tuple[float, float]:
    """log sigma_good and delta maximising -Σ_g (n_g·ls_g + S_g·exp(-2·ls_g)/2) - delta²/2tau²,
    ls_0 = s, ls_1 = s + delta (Newton's method: the function is concave)."""
    (s0, s1), (n0, n1) = sums, counts
    for _ in range(50):
        a0 = s0 * math.exp(-2 * s)
        a1 = s1 * math.exp(-2 * (s + dl))
        gs = -n0 + a0 - n1 + a1
        gd = -n1 + a1 - dl / tau**2
        hss, hsd, hdd = -2 * (a0 + a1), -2 * a1, -2 * a1 - 1 / tau**2
        det = hss * hdd - hsd * hsd
        if det <= 0:  # no noise left on either side: stop where we are
            break
        ds = -(hdd * gs - hsd * gd) / det
        dd = -(hss * gd - hsd * gs) / det
        ds, dd = max(-3.0, min(3.0, ds)), max(-3.0, min(3.0, dd))
        s, dl = s + ds, dl + dd
        if abs(ds) + abs(dd) < 1e-12:
            break
    return s, dl


def loaded(model: Model, load: Sequence[float] | None) -> bool:
    """Does the load enter as a regressor: asked for, and the samples' loads differ."""
    return bool(model.load and load and max(load) - min(load) >= LOAD_SPREAD)


def fit(
    x: Sequence[float],
    z: Sequence[bool],
    model: Model,
    t: Sequence[float] | None = None,
    start: Fit | None = None,
    load: Sequence[float] | None = None,
    machine: Sequence[str] | None = None,
) -> Fit:
    """The split's maximum and evidence. Needs a sample on each side and at least one more
    sample than parameters. The mixture's likelihood can have more than one maximum (a
    boot counted as an outlier or not), so EM runs from more than one start (the module's
    docstring) and the highest wins; `start`, the last fit of a similar split, is one of
    them in the fixed model only."""
    data = _Data(
        x,
        z,
        model,
        t if model.trend else None,
        load if loaded(model, load) else None,
        machine,
    )
    legacy = data.fixed_w is not None and data.i_delta is None
    tol = 1e-9 if legacy else EMTOL  # the model of earlier runs: EM's maximum as it was
    # every start climbs a little, the highest to the top: Newton's method from there
    # (EM creeps where w is fitted), EM's own slow climb only where Newton fails
    ends = [_em(data, data.start(), tol if legacy else ROUGH)]
    if legacy and start is not None and start.regressors == tuple(data.names):
        ends.append(_em(data, _resume(data, start, ends[0].theta), tol))
    elif not legacy and float(np.min(ends[0].r)) < 0.5:
        # a boot counted as an outlier from the medians' start: is it one from least
        # squares' too (the maximum the fit reaches must not depend on the fits before it)
        ends.append(_em(data, data.start(robust=False), ROUGH))
    best, hess = max(ends, key=lambda st: st.value), None
    if legacy:
        best = _em(data, best.theta, tol)
    else:
        polished, hess = _polish(data, best)
        if hess is None:
            polished, hess = _polish(data, _em(data, best.theta, EMTOL))
        best = polished
    return _evidence(data, best, hess)


def _resume(data: _Data, start: Fit, theta: Array) -> Array:
    """theta (a start) moved to where `start`, the last fit of a similar split, ended."""
    theta = theta.copy()
    theta[: data.p] = start.coef
    theta[data.p] = start.log_sigma
    if data.i_delta is not None and start.log_sigma_bad is not None:
        theta[data.i_delta] = start.log_sigma_bad - start.log_sigma
    if data.i_u is not None:
        lo, hi = OUTLIER_RANGE
        theta[data.i_u] = _u_of(min(max(start.outlier, lo * 1.001), hi * 0.999))
    return theta


def _em(data: _Data, theta: Array, tol: float = 1e-9, iterations: int = 200) -> _State:
    """EM from theta to its maximum (to `tol`; EMTOL where Newton's polish follows)."""
    last, st = -math.inf, data.state(theta)
    for _ in range(iterations):
        if st.value - last < tol:
            break
        last = st.value
        st = data.state(data.em_step(st))
    return st


def _polish(data: _Data, st: _State) -> tuple[_State, Array | None]:
    """Newton's method from EM's end on every parameter at once: the maximum Laplace and
    the sampler centre on (EM creeps where w is fitted), and the Hessian there."""
    for _ in range(12):
        grad, hess = data.hessian(st)
        try:
            step = np.linalg.solve(hess, -grad)
        except np.linalg.LinAlgError:
            return st, None
        gain = float(grad @ step)  # twice the rise Newton's step promises
        if abs(gain) < 1e-12:
            return st, hess
        if not np.all(np.isfinite(step)) or gain < 0:
            return st, None  # not a maximum in every direction here
        for _ in range(10):
            trial = data.state(st.theta + step)
            if trial.value >= st.value:
                break
            step = step / 2
        else:
            return st, None
        st = trial
        if gain < NEAR:  # a step this small leaves the Hessian as it was
            return st, hess
    return st, None


def _information(data: _Data, st: _State, hess: Array | None) -> Array:
    """-Hessian at the maximum; where it is not positive definite (not a maximum in every
    direction), the core part's."""
    info = -(data.hessian(st)[1] if hess is None else hess)
    if np.all(np.linalg.eigvalsh(info) > 0):
        return info
    info = -data.hessian(st, core_only=True)[1]
    vals, vecs = np.linalg.eigh(info)
    return np.asarray((vecs * np.maximum(np.abs(vals), 1e-8)) @ vecs.T, dtype=float)


def _evidence(data: _Data, st: _State, hess: Array | None) -> Fit:
    theta = st.theta
    info = _information(data, st, hess)
    logdet = float(np.linalg.slogdet(info)[1])
    laplace = st.value + 0.5 * data.d * LOG_2PI - 0.5 * logdet
    evidence = laplace
    if data.i_u is not None and data.n <= SMALL:
        try:
            with np.errstate(all="ignore"):
                sampled = _sampled(data, st, info)
        except np.linalg.LinAlgError:
            sampled = math.nan
        if math.isfinite(sampled):
            evidence = sampled
    bad = None if data.i_delta is None else float(theta[data.p] + theta[data.i_delta])
    return Fit(
        evidence,
        tuple(float(v) for v in theta[: data.p]),
        float(theta[data.p]),
        st.value,
        tuple(data.names),
        tuple(data.centres),
        bad,
        st.w,
        laplace if evidence != laplace else None,
    )


def _sampled(data: _Data, st: _State, info: Array) -> float:
    """log evidence by importance sampling: w by quadrature (its integral is a polynomial
    in w times its prior: Gauss-Legendre is exact), log sigma_good and delta from a
    multivariate t around the maximum (their block of the Laplace covariance, widened),
    then the levels and regressors from a t around their weighted least squares given
    those scales (the levels' spread follows the noise: no funnel to miss)."""
    p, theta, w = data.p, st.theta, st.w
    scales = [data.p] + ([data.i_delta] if data.i_delta is not None else [])
    q = len(scales)
    cov = np.linalg.inv(info)[np.ix_(scales, scales)] * WIDEN
    chol = np.linalg.cholesky(cov)
    za, ca, zb, cb = _draws(q, p)
    rows = np.zeros((len(za), data.d))
    rows[:, scales] = theta[scales] + (za @ chol.T) * ca[:, None]
    log_q = _t_log_density(za, ca, q) - float(np.sum(np.log(np.diag(chol))))
    # the levels and regressors given the scales: weighted least squares, the weights the
    # responsibilities of the residuals at the maximum
    ls = rows[:, p, None] + 0.0 * data.z[None, :]
    if data.i_delta is not None:
        ls = ls + rows[:, data.i_delta, None] * data.z[None, :]
    e = data.x - data.h @ theta[:p]
    scaled = e * e * np.exp(-2 * ls)
    core = math.log1p(-w) - 0.5 * scaled
    wide = math.log(w) - data.log_k - 0.5 * scaled / data.k2
    r = np.exp(core - np.logaddexp(core, wide))
    lam = (r + (1 - r) / data.k2) * np.exp(-2 * ls)
    rows[:, :p], log_det = _conditional(data, lam, zb * cb[:, None])
    log_q += _t_log_density(zb, cb, p) + log_det
    log_w = data.marginal(rows) - log_q
    log_w = np.where(np.isfinite(log_w), log_w, -np.inf)  # a draw out in a tail: no weight
    top = float(np.max(log_w))
    return top + math.log(float(np.mean(np.exp(log_w - top))))


def _conditional(data: _Data, lam: Array, steps: Array) -> tuple[Array, Array]:
    """Per draw (weights lam, (m, n)): the levels and regressors at their weighted least
    squares plus steps (m, p) scaled by the inverse Cholesky factor of the precision, and
    half the log determinant of that precision."""
    if data.p == 2:  # the two levels alone: the precision is diagonal
        prec = lam @ data.h
        mean = ((lam * data.x) @ data.h) / prec
        return mean + steps / np.sqrt(prec), 0.5 * np.sum(np.log(prec), axis=1)
    prec = np.einsum("nj,ja,jb->nab", lam, data.h, data.h) + data.prior_matrix
    mean = np.linalg.solve(prec, ((lam * data.x) @ data.h)[..., None])[..., 0]
    low = np.linalg.cholesky(prec)
    moved = np.linalg.solve(np.swapaxes(low, 1, 2), steps[..., None])[..., 0]
    return mean + moved, np.sum(np.log(np.diagonal(low, axis1=1, axis2=2)), axis=1)


def _t_log_density(z: Array, c: Array, d: int) -> Array:
    """log density of the standard d-dimensional t (TAIL_DF) at z·c, z normal, c the
    draws' sqrt(TAIL_DF / chi²)."""
    nu = TAIL_DF
    const = math.lgamma((nu + d) / 2) - math.lgamma(nu / 2) - 0.5 * d * math.log(nu * math.pi)
    return np.asarray(const - 0.5 * (nu + d) * np.log1p(np.sum(z * z, axis=1) * c * c / nu))
