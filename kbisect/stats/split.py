"""How much the samples support one split of the revisions into good and bad: the model.

A hypothesis about the culprit splits every sample into the good group (z = 0) and the
bad group (z = 1). On the log scale, x = log(tps),

    x_j = mu_good·(1 - z_j) + mu_bad·z_j [+ Σ_k beta_k·(r_jk - r_k mean)]
          + sigma_j·e_j,    log sigma_j = log sigma_good + delta·z_j

with e_j the two-part mixture of mixture.py (k = 8): a sample far from both levels is
explained by the wide part under either hypothesis and moves the odds little. The
regressors r_k (Regressor: time, load, the pool's machines) are centred, each with a
normal prior on its coefficient. delta, the log of sigma_bad / sigma_good, has a N(0,
side²) prior (Noise.side; 0.5: a factor of 1.65 is one sd): real compares show one side
at twice the other's CV. w is integrated out per split under mixture.OUTLIERS, not an
empirical-Bayes value shared by every split: a split that needs three boots of ten to be
outliers pays for them, and each split's evidence stays its own. k stays fixed: with a
handful of far boots a fitted width would let a split widen the wide part until anything
fits. A fixed `outlier` weight (Noise.outlier) is the model of runs stored before those
two were fitted (one sigma, fixed w): their reports re-render to the same figures.

Split is mixture.em's model (state, m_step) and gives the gradient and the Hessian
(per sample, the mixture's Hessian in Louis' form) that evidence.py polishes and
integrates with; w enters them as the logit u of its place in its range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kbisect.stats.mixture import LOG_2PI, OUTLIERS, Array, Prior, State, e_step, louis, wls


@dataclass(frozen=True)
class Noise:
    """The noise model of a split: the outlier part's weight (None: fitted under `prior`)
    and width (in core spreads), and the prior sd of the two sides' log noise ratio (0: one
    sigma)."""

    outlier: float | None
    scale: float
    side: float
    prior: Prior = OUTLIERS


@dataclass(frozen=True)
class Regressor:
    """A regressor: its name, its values (one per sample; centred on their mean here) and
    its coefficient's prior precision."""

    name: str
    values: Sequence[float]
    precision: float


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


class Split:
    """The samples of one split: log tps, group (0 good, 1 bad), the design (the two
    levels, then the regressors, each centred) with the regressors' prior precision, and
    the layout of the parameter vector: coef..., log sigma_good[, delta][, u]."""

    def __init__(
        self, x: Sequence[float], z: Sequence[bool], regressors: Sequence[Regressor], noise: Noise
    ) -> None:
        self.x = np.asarray(x, dtype=float)
        self.z = np.asarray([1.0 if b else 0.0 for b in z])
        self.n = len(self.x)
        self.n_bad = float(self.z.sum())
        self.names: list[str] = []
        self.centres: list[float] = []
        cols = [1.0 - self.z, self.z]
        precision = [0.0, 0.0]
        for reg in regressors:
            centre = math.fsum(reg.values) / len(reg.values)
            self.names.append(reg.name)
            self.centres.append(centre)
            cols.append(np.asarray(reg.values, dtype=float) - centre)
            precision.append(reg.precision)
        self.h = np.stack(cols, axis=1)
        self.precision = np.asarray(precision)
        self.prior_matrix = np.diag(self.precision)
        self.p = len(cols)
        self.ridge = None if self.p == 2 else self.prior_matrix  # None: two levels alone
        self.k2 = noise.scale**2
        self.log_k = math.log(noise.scale)
        self.tau = noise.side
        self.fixed_w = noise.outlier
        self.prior = noise.prior
        fitted = noise.outlier is None
        self.i_delta = self.p + 1 if self.tau > 0 else None
        self.i_u = self.p + 1 + (self.tau > 0) if fitted else None
        self.d = self.p + 1 + (self.tau > 0) + fitted

    def state(self, theta: Array) -> State:
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
            w, _, _ = self.prior.w_of(float(theta[self.i_u]))
            prior += self.prior.u_prior(float(theta[self.i_u]))[0]
        for k in range(2, self.p):
            prec = float(self.precision[k])
            prior += 0.5 * math.log(prec) - 0.5 * LOG_2PI - 0.5 * prec * float(theta[k]) ** 2
        q = e * e * np.exp(-2 * ls)
        r, both = e_step(q, w, self.log_k, self.k2)
        value = float(np.sum(both - ls)) - 0.5 * self.n * LOG_2PI + prior
        return State(theta, e, ls, w, r, q, value)

    # --- the gradient and the Hessian ---------------------------------------------------

    def hessian(self, st: State, core_only: bool = False) -> tuple[Array, Array]:
        """Gradient and Hessian of the log posterior at theta. Per sample, in the local
        variables (residual, log sigma, u), the mixture's Hessian in Louis' form,
        Σ_c r_c·(H_c + g_c·g_cᵀ) - ḡ·ḡᵀ, then by the chain rule. core_only: as if every
        sample were in the core part (where the full Hessian is not negative definite)."""
        theta = st.theta
        r = np.ones(self.n) if core_only else st.r
        w1 = w2 = 0.0
        if self.i_u is not None:
            _, w1, w2 = self.prior.w_of(float(theta[self.i_u]))
        w = st.w
        # d/du and d²/du² of log(1 - w) (core) and log w (wide)
        cu1, cu2 = -w1 / (1 - w), -w2 / (1 - w) - (w1 / (1 - w)) ** 2
        wu1, wu2 = (w1 / w, w2 / w - (w1 / w) ** 2) if w > 0 else (0.0, 0.0)
        inv = np.exp(-2 * st.ls)
        ge0, gs0 = -st.e * inv, -1.0 + st.q  # the core part's gradient in (e, ls)
        ge1, gs1 = ge0 / self.k2, -1.0 + st.q / self.k2  # the wide part's
        rw = 1.0 - r
        gbe, gbs, gbu = r * ge0 + rw * ge1, r * gs0 + rw * gs1, r * cu1 + rw * wu1
        # Σ_c r_c·(H_c + g_c·g_cᵀ) - ḡ·ḡᵀ, entry by entry (in the residual: les = hg)
        hh, les, gg = louis(st.e, inv, r, self.k2)
        leu = r * ge0 * cu1 + rw * ge1 * wu1 - gbe * gbu
        lsu = r * gs0 * cu1 + rw * gs1 * wu1 - gbs * gbu
        luu = r * (cu2 + cu1 * cu1) + rw * (wu2 + wu1 * wu1) - gbu * gbu
        p, h, z = self.p, self.h, self.z
        grad = np.zeros(self.d)
        hess = np.zeros((self.d, self.d))
        grad[:p] = -h.T @ gbe
        grad[p] = gbs.sum()
        hess[:p, :p] = -(h * hh[:, None]).T @ h
        hess[:p, p] = -h.T @ les
        hess[p, p] = -gg.sum()
        if self.i_delta is not None:
            i = self.i_delta
            grad[i] = float(gbs @ z) - theta[i] / self.tau**2
            hess[:p, i] = -h.T @ (les * z)
            hess[p, i] = hess[i, i] = -float(gg @ z)
            hess[i, i] -= 1.0 / self.tau**2
        if self.i_u is not None:
            i = self.i_u
            _, du1, du2 = self.prior.u_prior(float(theta[i]))
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
        coef = wls(self.h, self.x, np.ones(self.n), self.ridge)
        if self.i_u is not None:
            theta[self.i_u] = self.prior.u_of(self.prior.a / (self.prior.a + self.prior.b))
        if self.i_u is not None and robust:
            for g in (0, 1):
                side = self.x[self.z == g] - self.h[self.z == g, 2:] @ coef[2:]
                coef[g] = float(np.median(side))
        e = np.sort(np.abs(self.x - self.h @ coef))
        mad = float(e[self.n // 2]) / 0.6745
        theta[: self.p] = coef
        theta[self.p] = math.log(max(mad, 1e-6))
        return theta

    def m_step(self, st: State) -> Array:
        """One EM step: the levels and regressors by weighted least squares, the log sigmas
        (and delta) and u by Newton's method on their parts of the expected complete log
        posterior (each concave)."""
        theta, r = st.theta, st.r
        omega = r + (1.0 - r) / self.k2
        out = theta.copy()
        out[: self.p] = wls(self.h, self.x, omega * np.exp(-2 * st.ls), self.ridge)
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
            outliers = float(np.sum(1.0 - r))
            out[self.i_u] = self.prior.u_step(outliers, self.n, float(theta[self.i_u]))
        return out


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
