"""How much the samples support one split of the revisions into good and bad.

A hypothesis about the culprit splits every sample into the good group (z = 0) and the
bad group (z = 1). On the log scale, x = log(tps),

    x_j = mu_good·(1 - z_j) + mu_bad·z_j [+ slope·(t_j - t_mean)] + sigma·e_j

with e_j from a two-part mixture: N(0, 1) with weight 1 - w, and N(0, k²) with weight w
(w = 0.05, k = 8: one boot in twenty may be far off, as TCG's slow first boots are). A
sample far from both levels is then explained by the wide part under either hypothesis
and moves the odds little; under a plain normal it would decide them.

The levels, the noise scale and (with drift) the slope are not plugged in: the evidence
of a split is the likelihood *integrated* over them, with flat priors on the levels and on
log sigma (the scale-invariant prior) and a normal prior on the slope (sd: a change of
`drift_sd` over the samples' time span). The integral is done by Laplace's
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

    def as_dict(self) -> dict[str, float | bool]:
        return {"outlier": self.outlier, "outlier_scale": self.outlier_scale,
                "trend": self.trend, "drift_sd": self.drift_sd}  # fmt: skip


@dataclass(frozen=True)
class Fit:
    """The maximum of one split and its Laplace evidence."""

    log_evidence: float
    coef: tuple[float, ...]  # mu_good, mu_bad[, slope per time unit]
    log_sigma: float
    loglik: float  # log likelihood + the slope's log prior: what EM maximises
    t_mean: float = 0.0  # the time the slope is centred on

    def level(self, bad: bool, t: float) -> float:
        """The fitted log tps of a good or bad revision at time t."""
        drift = self.coef[2] * (t - self.t_mean) if len(self.coef) > 2 else 0.0
        return self.coef[int(bad)] + drift


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
    """The samples of one split: log tps, group (0 good, 1 bad), centred time or None."""

    def __init__(self, x: Sequence[float], z: Sequence[bool], t: Sequence[float] | None,
                 drift_sd: float = 0.2) -> None:  # fmt: skip
        self.x = list(x)
        self.z = [1 if b else 0 for b in z]
        self.t_mean = 0.0 if t is None else math.fsum(t) / len(t)
        self.t = None if t is None else [u - self.t_mean for u in t]
        span = 0.0 if t is None else max(t) - min(t)
        # the slope's prior precision: drift_sd over the span is one standard deviation
        self.precision = (span / drift_sd) ** 2 if span > 0 else 1e12

    def log_prior(self, coef: Sequence[float]) -> float:
        """The slope's normal prior (0 without a trend: the flat priors cancel)."""
        if self.t is None:
            return 0.0
        return 0.5 * math.log(self.precision) - 0.5 * LOG_2PI - 0.5 * self.precision * coef[2] ** 2

    def residuals(self, coef: Sequence[float]) -> list[float]:
        if self.t is None:
            return [x - coef[g] for x, g in zip(self.x, self.z, strict=True)]
        slope = coef[2]
        return [x - coef[g] - slope * u for x, g, u in zip(self.x, self.z, self.t, strict=True)]

    def wls(self, w: Sequence[float], s2: float = 1.0) -> list[float]:
        """Weighted least squares: the two levels [and the slope, shrunk by its prior at
        the noise variance s2]."""
        sw, sx = [0.0, 0.0], [0.0, 0.0]
        st, stt, stx = [0.0, 0.0], 0.0, 0.0
        tt = self.t if self.t is not None else [0.0] * len(self.x)
        for wi, x, g, u in zip(w, self.x, self.z, tt, strict=True):
            sw[g] += wi
            sx[g] += wi * x
            st[g] += wi * u
            stt += wi * u * u
            stx += wi * u * x
        if self.t is None:
            return [sx[0] / sw[0], sx[1] / sw[1]]
        a = [[sw[0], 0.0, st[0]], [0.0, sw[1], st[1]], [st[0], st[1], stt + s2 * self.precision]]
        return _solve(a, [sx[0], sx[1], stx])

    def information(self, e: Sequence[float], resp: Sequence[float], sigma: float, k2: float
                    ) -> list[list[float]]:  # fmt: skip
        """Observed information in (coef..., log sigma), Louis' identity per sample."""
        s2 = sigma * sigma
        q_aa, q_as = [0.0, 0.0], [0.0, 0.0]
        q_aat, q_ast, q_aatt, q_ss = [0.0, 0.0], 0.0, 0.0, 0.0
        tt = self.t if self.t is not None else [0.0] * len(self.x)
        for ej, r, g, u in zip(e, resp, self.z, tt, strict=True):
            aa = as_ = ss = a_bar = b_bar = 0.0
            for weight, inv in ((r, 1.0), (1.0 - r, 1.0 / k2)):
                a = ej * inv / s2
                b = -1.0 + ej * a
                aa += weight * (inv / s2 - a * a)
                as_ += weight * (2 * a - a * b)
                ss += weight * (2 * ej * a - b * b)
                a_bar += weight * a
                b_bar += weight * b
            aa += a_bar * a_bar
            as_ += a_bar * b_bar
            q_ss += ss + b_bar * b_bar
            q_aa[g] += aa
            q_as[g] += as_
            q_aat[g] += aa * u
            q_aatt += aa * u * u
            q_ast += as_ * u
        if self.t is None:
            return [[q_aa[0], 0.0, q_as[0]], [0.0, q_aa[1], q_as[1]], [q_as[0], q_as[1], q_ss]]
        q_aatt += self.precision  # the slope's prior
        return [[q_aa[0], 0.0, q_aat[0], q_as[0]], [0.0, q_aa[1], q_aat[1], q_as[1]],
                [q_aat[0], q_aat[1], q_aatt, q_ast], [q_as[0], q_as[1], q_ast, q_ss]]  # fmt: skip


def _start(data: _Data) -> tuple[list[float], float]:
    coef = data.wls([1.0] * len(data.x))
    e = sorted(abs(v) for v in data.residuals(coef))
    mad = e[len(e) // 2] / 0.6745
    return coef, math.log(max(mad, 1e-6))


def fit(x: Sequence[float], z: Sequence[bool], model: Model, t: Sequence[float] | None = None,
        start: Fit | None = None) -> Fit:  # fmt: skip
    """The split's maximum and Laplace evidence. Needs a sample on each side and at least
    one more sample than parameters. The mixture's likelihood can have more than one
    maximum (a boot counted as an outlier or not), so EM runs from the least-squares start
    and, if given, from `start` (the last fit of a similar split); the higher one wins."""
    data = _Data(x, z, t if model.trend else None, model.drift_sd)
    mix = _Mixture(model)
    fits = [_em(data, mix, *_start(data))]
    if start is not None and len(start.coef) == len(fits[0].coef):
        fits.append(_em(data, mix, list(start.coef), start.log_sigma))
    return max(fits, key=lambda f: f.loglik)


def _em(data: _Data, mix: _Mixture, coef: list[float], s: float, tol: float = 1e-9,
        iterations: int = 200) -> Fit:  # fmt: skip
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
        s = 0.5 * math.log(max(math.fsum(wi * v * v for wi, v in zip(w, e, strict=True)) / n,
                               1e-300))  # fmt: skip
    e = data.residuals(coef)
    resp, ll = mix.weights(e, math.exp(s))
    ll += data.log_prior(coef)
    d = len(coef) + 1
    logdet = _logdet(data.information(e, resp, math.exp(s), mix.k2))
    if math.isnan(logdet):  # not a maximum in every direction: the core part's information
        logdet = _logdet(data.information(e, [1.0] * len(e), math.exp(s), mix.k2))
    return Fit(ll + 0.5 * d * LOG_2PI - 0.5 * logdet, tuple(coef), s, ll, data.t_mean)
