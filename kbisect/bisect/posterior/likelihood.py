"""How much the samples support one split of the revisions into good and bad.

A hypothesis about the culprit splits every sample into the good group (z = 0) and the
bad group (z = 1). On the log scale, x = log(tps),

    x_j = mu_good·(1 - z_j) + mu_bad·z_j [+ slope·(t_j - t_mean)] [+ beta·(d_j - d_mean)]
          + sigma·e_j

with e_j from a two-part mixture: N(0, 1) with weight 1 - w, and N(0, k²) with weight w
(w = 0.05, k = 8: one boot in twenty may be far off, as TCG's slow first boots are). A
sample far from both levels is then explained by the wide part under either hypothesis
and moves the odds little; under a plain normal it would decide them.

d_j is the load of sample j: the share of the CPUs other work took while it ran, as
measured (targets/monitor.py: others' share of the host where the kernel runs on it, steal
time inside the kernel). A hog that starts halfway is a step, not a slope: the trend
alone cannot explain it, and good revisions then look bad (seen for real: scripts/drift-demo);
with the load as a regressor the samples taken under it stay evidence. It enters only
when the loads differ by at least LOAD_SPREAD (a run with disturbed samples kept).

The levels, the noise scale, the slope and beta are not plugged in: the evidence of a
split is the likelihood *integrated* over them, with flat priors on the levels and on
log sigma (the scale-invariant prior), a normal prior on the slope (sd: a change of
`drift_sd` over the samples' time span) and on beta (sd `load_sd` per unit of load).
The integral is done by Laplace's
method at the maximum, found by EM: log m = l(theta^) + (d/2)·log 2pi - ½·log det I(theta^),
with I the observed information (Louis' identity for the mixture). For a plain normal
likelihood this is exact: m ∝ (n_good·n_bad)^(-1/2)·S^(-(n-2)/2), S the residual sum of
squares, which is Student-t-like in the levels' uncertainty; the flat priors are improper
but the same for every split, so they cancel in the posterior.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

LOG_2PI = math.log(2 * math.pi)


@dataclass(frozen=True)
class Model:
    """The noise model: the outlier part's weight and width, and whether time drifts."""

    outlier: float = 0.05
    outlier_scale: float = 8.0
    trend: bool = False
    drift_sd: float = 0.2  # prior sd of the slope: this change over the samples' time span
    load: bool = True  # the measured load is a regressor when the samples' loads differ
    load_sd: float = 2.0  # prior sd of beta: log tps change per unit of load

    def as_dict(self) -> dict[str, float | bool]:
        return {
            "outlier": self.outlier,
            "outlier_scale": self.outlier_scale,
            "trend": self.trend,
            "drift_sd": self.drift_sd,
            "load": self.load,
            "load_sd": self.load_sd,
        }


LOAD_SPREAD = 0.05  # loads closer than this (a quiet run's background) add no regressor


@dataclass(frozen=True)
class Fit:
    """The maximum of one split and its Laplace evidence."""

    log_evidence: float
    coef: tuple[float, ...]  # mu_good, mu_bad, then one per regressor (slope, beta)
    log_sigma: float
    loglik: float  # log likelihood + the regressors' log priors: what EM maximises
    regressors: tuple[str, ...] = ()  # "t", "load": what coef[2:] are
    centres: tuple[float, ...] = ()  # the value each regressor is centred on

    def level(self, bad: bool, t: float, load: float = 0.0) -> float:
        """The fitted log tps of a good or bad revision at time t under a load."""
        at = {"t": t, "load": load}
        terms = zip(self.coef[2:], self.regressors, self.centres, strict=True)
        extra = math.fsum(c * (at[name] - centre) for c, name, centre in terms)
        return self.coef[int(bad)] + extra


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """a·x = b for a small symmetric positive definite a (Gaussian elimination)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for i in range(n):
        piv = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[piv] = m[piv], m[i]
        if m[i][i] == 0.0:
            raise ZeroDivisionError("singular system")
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            for c in range(i, n + 1):
                m[r][c] -= f * m[i][c]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (m[i][n] - sum(m[i][c] * x[c] for c in range(i + 1, n))) / m[i][i]
    return x


def _logdet(a: list[list[float]]) -> float:
    """log det of a symmetric positive definite matrix (Cholesky); nan if it is not."""
    n = len(a)
    low = [[0.0] * n for _ in range(n)]
    total = 0.0
    for i in range(n):
        for j in range(i + 1):
            s = a[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            if i == j:
                if s <= 0.0:
                    return math.nan
                low[i][i] = math.sqrt(s)
                total += math.log(s)
            else:
                low[i][j] = s / low[j][j]
    return total


class _Mixture:
    """Per-sample quantities of the two-part noise at given residuals and scale."""

    def __init__(self, model: Model) -> None:
        self.k2 = model.outlier_scale**2
        self.log_odds = math.log(model.outlier / (1 - model.outlier)) - math.log(
            model.outlier_scale
        )
        self.log_core = math.log(1 - model.outlier) - 0.5 * LOG_2PI

    def weights(self, e: Sequence[float], sigma: float) -> tuple[list[float], float]:
        """The responsibility r_j of the core part for each residual, and the log likelihood."""
        resp, ll = [], 0.0
        inv = 1.0 / (2 * sigma * sigma)
        shrink = 1.0 - 1.0 / self.k2
        for x in e:
            u = x * x * inv
            lr = self.log_odds + u * shrink  # log(wide part / core part)
            if lr > 30:
                resp.append(0.0)
                soft = lr
            else:
                q = math.exp(lr)
                resp.append(1.0 / (1.0 + q))
                soft = math.log1p(q)
            ll += self.log_core - u + soft
        return resp, ll - len(e) * math.log(sigma)


class _Data:
    """The samples of one split: log tps, group (0 good, 1 bad), and the regressors (time,
    load), each centred, with its prior precision."""

    def __init__(
        self,
        x: Sequence[float],
        z: Sequence[bool],
        t: Sequence[float] | None,
        drift_sd: float = 0.2,
        load: Sequence[float] | None = None,
        load_sd: float = 2.0,
    ) -> None:
        self.x = list(x)
        self.z = [1 if b else 0 for b in z]
        self.names: list[str] = []
        self.centres: list[float] = []
        self.precision: list[float] = []
        cols: list[list[float]] = []
        if t is not None:
            span = max(t) - min(t)
            # the slope's prior precision: drift_sd over the span is one standard deviation
            self._add(cols, "t", t, (span / drift_sd) ** 2 if span > 0 else 1e12)
        if load is not None:
            self._add(cols, "load", load, 1.0 / load_sd**2)
        self.k = len(cols)
        self.cols = cols  # each regressor's values, centred
        self.rows = [list(r) for r in zip(*cols, strict=True)] if cols else [[]] * len(x)

    def _add(
        self, cols: list[list[float]], name: str, values: Sequence[float], precision: float
    ) -> None:
        centre = math.fsum(values) / len(values)
        self.names.append(name)
        self.centres.append(centre)
        cols.append([v - centre for v in values])
        self.precision.append(precision)

    def log_prior(self, coef: Sequence[float]) -> float:
        """The regressors' normal priors (0 without one: the flat priors cancel)."""
        return math.fsum(
            0.5 * math.log(p) - 0.5 * LOG_2PI - 0.5 * p * c * c
            for p, c in zip(self.precision, coef[2:], strict=True)
        )

    def residuals(self, coef: Sequence[float]) -> list[float]:
        out = [x - coef[g] for x, g in zip(self.x, self.z, strict=True)]
        for c, col in zip(coef[2:], self.cols, strict=True):
            out = [r - c * u for r, u in zip(out, col, strict=True)]
        return out

    def _gram(self, w: Sequence[float], prior: float) -> list[list[float]]:
        """Σ w_j·h_j·h_jᵀ over the samples' design rows h_j = (1 - z_j, z_j, regressors),
        plus each regressor's prior precision times `prior` on the diagonal."""
        n = 2 + self.k
        a = [[0.0] * n for _ in range(n)]
        for wi, g, row in zip(w, self.z, self.rows, strict=True):
            a[g][g] += wi
            for k, u in enumerate(row):
                wu = wi * u
                a[g][2 + k] += wu
                for m in range(k, self.k):
                    a[2 + k][2 + m] += wu * row[m]
        for k, p in enumerate(self.precision):
            a[2 + k][2 + k] += prior * p
        for i in range(n):
            for j in range(i + 1, n):
                a[j][i] = a[i][j]
        return a

    def _cross(self, v: Sequence[float]) -> list[float]:
        """Σ v_j·h_j."""
        out = [0.0] * (2 + self.k)
        for vi, g, row in zip(v, self.z, self.rows, strict=True):
            out[g] += vi
            for k, u in enumerate(row):
                out[2 + k] += vi * u
        return out

    def wls(self, w: Sequence[float], s2: float = 1.0) -> list[float]:
        """Weighted least squares: the two levels [and the regressors, shrunk by their
        priors at the noise variance s2]."""
        return _solve(
            self._gram(w, s2), self._cross([wi * x for wi, x in zip(w, self.x, strict=True)])
        )

    def information(
        self, e: Sequence[float], resp: Sequence[float], sigma: float, k2: float
    ) -> list[list[float]]:
        """Observed information in (coef..., log sigma), Louis' identity per sample."""
        s2 = sigma * sigma
        q_aa, q_as, q_ss = [], [], 0.0
        for ej, r in zip(e, resp, strict=True):
            aa = as_ = ss = a_bar = b_bar = 0.0
            for weight, inv in ((r, 1.0), (1.0 - r, 1.0 / k2)):
                a = ej * inv / s2
                b = -1.0 + ej * a
                aa += weight * (inv / s2 - a * a)
                as_ += weight * (2 * a - a * b)
                ss += weight * (2 * ej * a - b * b)
                a_bar += weight * a
                b_bar += weight * b
            q_aa.append(aa + a_bar * a_bar)
            q_as.append(as_ + a_bar * b_bar)
            q_ss += ss + b_bar * b_bar
        m = self._gram(q_aa, 1.0)
        cross = self._cross(q_as)
        for row, c in zip(m, cross, strict=True):
            row.append(c)
        return [*m, [*cross, q_ss]]


def _start(data: _Data) -> tuple[list[float], float]:
    coef = data.wls([1.0] * len(data.x))
    e = sorted(abs(v) for v in data.residuals(coef))
    mad = e[len(e) // 2] / 0.6745
    return coef, math.log(max(mad, 1e-6))


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
) -> Fit:
    """The split's maximum and Laplace evidence. Needs a sample on each side and at least
    one more sample than parameters. The mixture's likelihood can have more than one
    maximum (a boot counted as an outlier or not), so EM runs from the least-squares start
    and, if given, from `start` (the last fit of a similar split); the higher one wins."""
    data = _Data(
        x,
        z,
        t if model.trend else None,
        model.drift_sd,
        load if loaded(model, load) else None,
        model.load_sd,
    )
    mix = _Mixture(model)
    fits = [_em(data, mix, *_start(data))]
    if start is not None and start.regressors == tuple(data.names):
        fits.append(_em(data, mix, list(start.coef), start.log_sigma))
    return max(fits, key=lambda f: f.loglik)


def _em(
    data: _Data,
    mix: _Mixture,
    coef: list[float],
    s: float,
    tol: float = 1e-9,
    iterations: int = 200,
) -> Fit:
    last = -math.inf
    n = len(data.x)
    for _ in range(iterations):
        resp, ll = mix.weights(data.residuals(coef), math.exp(s))
        ll += data.log_prior(coef)
        if ll - last < tol:
            break
        last = ll
        w = [r + (1.0 - r) / mix.k2 for r in resp]
        coef = data.wls(w, math.exp(2 * s))
        e = data.residuals(coef)
        s = 0.5 * math.log(
            max(math.fsum(wi * v * v for wi, v in zip(w, e, strict=True)) / n, 1e-300)
        )
    e = data.residuals(coef)
    resp, ll = mix.weights(e, math.exp(s))
    ll += data.log_prior(coef)
    d = len(coef) + 1
    logdet = _logdet(data.information(e, resp, math.exp(s), mix.k2))
    if math.isnan(logdet):  # not a maximum in every direction: the core part's information
        logdet = _logdet(data.information(e, [1.0] * len(e), math.exp(s), mix.k2))
    return Fit(
        ll + 0.5 * d * LOG_2PI - 0.5 * logdet,
        tuple(coef),
        s,
        ll,
        tuple(data.names),
        tuple(data.centres),
    )
