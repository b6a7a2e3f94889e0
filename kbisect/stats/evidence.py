"""The evidence of one good/bad split (split.py's model): its maximum and the integral.

The evidence is the likelihood integrated over the levels, the noise scales, w and the
regressors' coefficients, with flat priors on the levels and on log sigma_good (improper,
but the same for every split: they cancel) and the proper priors of the rest. The
maximum: EM from fixed starts (each side's median, and least squares where the first
counts a boot as an outlier), never from the fits before it, so a stored run re-renders
to the figures it showed live (the fixed model keeps its old starts), then Newton's method
on all parameters at once. The integral: Laplace's method there, log m = l(theta^) +
(d/2)·log 2pi - ½·log det I(theta^), exact for a plain normal likelihood.

With few samples the posterior is far from normal and Laplace is off (by 0.4 to 1.9 nats
at 4-10 samples, and not by the same amount for every split), so up to SMALL samples the
evidence is importance sampling, DRAWS draws: w by Gauss-Legendre (NODES nodes), log
sigma_good and delta from a multivariate t (TAIL_DF) around the maximum, their block of
the Laplace covariance widened by WIDEN, the levels and regressors from a t around their
weighted least squares given those scales. The draws come from one seeded stream, in
antithetic pairs, the same for every split and refresh: deterministic, with common random
numbers. tests/bisect/test_likelihood.py checks it against exact integration (within 0.1
nat). Beyond SMALL Laplace stays: the sampler costs about 2 ms a split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np

from kbisect.stats import mixture
from kbisect.stats.mixture import LOG_2PI, Array, State, em
from kbisect.stats.split import Fit, Noise, Regressor, Split

SMALL = 10  # up to this many samples the evidence is importance sampling, not Laplace
DRAWS = 1024  # importance sampling draws
TAIL_DF = 3.0  # degrees of freedom of the multivariate t proposals
WIDEN = 1.5  # the scales' proposal: the Laplace covariance times this
NODES = 6  # Gauss-Legendre nodes for w's integral (1e-4 nat of the exact one at SMALL)
SEED = 20261125
EMTOL = 1e-6  # EM's tolerance where Newton's method polishes its end
ROUGH = 1e-3  # EM's tolerance for choosing among the starts
NEAR = 1e-6  # Newton's last step: the Hessian before it is the Hessian after it


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


def fit(
    x: Sequence[float],
    z: Sequence[bool],
    regressors: Sequence[Regressor],
    noise: Noise,
    start: Fit | None = None,
) -> Fit:
    """The split's maximum and evidence (x log tps, z bad; a sample on each side and more
    samples than parameters). The likelihood can have more than one maximum (a boot an
    outlier or not): EM from more than one start, the highest wins; `start`, the last fit
    of a similar split, is one of them in the fixed model only."""
    data = Split(x, z, regressors, noise)
    legacy = data.fixed_w is not None and data.i_delta is None
    tol = 1e-9 if legacy else EMTOL  # the model of earlier runs: EM's maximum as it was
    # every start climbs a little, the highest to the top: Newton's method from there
    # (EM creeps where w is fitted), EM's own slow climb only where Newton fails
    ends = [em(data, data.start(), tol if legacy else ROUGH)]
    if legacy and start is not None and start.regressors == tuple(data.names):
        ends.append(em(data, _resume(data, start, ends[0].theta), tol))
    elif not legacy and float(np.min(ends[0].r)) < 0.5:
        # a boot counted as an outlier from the medians' start: is it one from least
        # squares' too (the maximum the fit reaches must not depend on the fits before it)
        ends.append(em(data, data.start(robust=False), ROUGH))
    best, hess = max(ends, key=lambda st: st.value), None
    if legacy:
        best = em(data, best.theta, tol)
    else:
        polished, hess = _polish(data, best)
        if hess is None:
            polished, hess = _polish(data, em(data, best.theta, EMTOL))
        best = polished
    return _evidence(data, best, hess)


def _resume(data: Split, start: Fit, theta: Array) -> Array:
    """theta (a start) moved to where `start`, the last fit of a similar split, ended."""
    theta = theta.copy()
    theta[: data.p] = start.coef
    theta[data.p] = start.log_sigma
    if data.i_delta is not None and start.log_sigma_bad is not None:
        theta[data.i_delta] = start.log_sigma_bad - start.log_sigma
    if data.i_u is not None:
        lo, hi = data.prior.lo, data.prior.hi
        theta[data.i_u] = data.prior.u_of(min(max(start.outlier, lo * 1.001), hi * 0.999))
    return theta


def _polish(data: Split, st: State) -> tuple[State, Array | None]:
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


def _information(data: Split, st: State, hess: Array | None) -> Array:
    """-Hessian at the maximum; where it is not positive definite (not a maximum in every
    direction), the core part's."""
    info = -(data.hessian(st)[1] if hess is None else hess)
    if np.all(np.linalg.eigvalsh(info) > 0):
        return info
    info = -data.hessian(st, core_only=True)[1]
    vals, vecs = np.linalg.eigh(info)
    return np.asarray((vecs * np.maximum(np.abs(vals), 1e-8)) @ vecs.T, dtype=float)


def _evidence(data: Split, st: State, hess: Array | None) -> Fit:
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


def _marginal(data: Split, theta: Array) -> Array:
    """log ∫ likelihood × prior dw, per row of theta (m, d; u ignored): the other
    parameters' proper log priors, and w's integral by Gauss-Legendre."""
    e = data.x[None, :] - theta[:, : data.p] @ data.h.T
    ls = theta[:, data.p, None] + 0.0 * e
    if data.i_delta is not None:
        ls = ls + theta[:, data.i_delta, None] * data.z[None, :]
    w, log_weight = mixture.nodes(data.prior, NODES)
    q = e * e * np.exp(-2 * ls)
    core = -0.5 * q
    wide = -data.log_k - 0.5 * q / data.k2
    top = np.maximum(core, wide)
    a, b = np.exp(core - top), np.exp(wide - top)  # (m, n): the parts' densities, scaled
    # each factor is at least min(w, 1 - w): the product of SMALL of them stays normal
    mixed = a[:, None, :] + w[None, :, None] * (b - a)[:, None, :]  # (m, nodes, n)
    per_node = np.log(np.prod(mixed, axis=2)) + log_weight[None, :]
    peak = np.max(per_node, axis=1)
    out = peak + np.log(np.sum(np.exp(per_node - peak[:, None]), axis=1)) + top.sum(axis=1)
    out += -np.sum(ls, axis=1) - 0.5 * data.n * LOG_2PI
    for k in range(2, data.p):
        prec = data.precision[k]
        out += 0.5 * math.log(prec) - 0.5 * LOG_2PI - 0.5 * prec * theta[:, k] ** 2
    if data.i_delta is not None:
        tau = data.tau
        out += -0.5 * LOG_2PI - math.log(tau) - 0.5 * (theta[:, data.i_delta] / tau) ** 2
    return np.asarray(out)


def _sampled(data: Split, st: State, info: Array) -> float:
    """log evidence by importance sampling (module docstring; the levels' spread follows
    the noise: no funnel to miss)."""
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
    r = mixture.e_step(scaled, w, data.log_k, data.k2)[0]
    lam = (r + (1 - r) / data.k2) * np.exp(-2 * ls)
    rows[:, :p], log_det = _conditional(data, lam, zb * cb[:, None])
    log_q += _t_log_density(zb, cb, p) + log_det
    log_w = _marginal(data, rows) - log_q
    log_w = np.where(np.isfinite(log_w), log_w, -np.inf)  # a draw out in a tail: no weight
    top = float(np.max(log_w))
    return top + math.log(float(np.mean(np.exp(log_w - top))))


def _conditional(data: Split, lam: Array, steps: Array) -> tuple[Array, Array]:
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
