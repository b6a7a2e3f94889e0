"""A range of revisions as a few level changes: the model of story (bisect/posterior/
story.py), every hypothesis of a batch fitted at once (numpy).

A hypothesis puts K changes in classes of revisions; z_jk = 1 when change k is among the
ancestors of sample j's revision. On the log scale, for sample j,

    x_j = mu + Σ_k d_k·z_jk [+ Σ_r beta_r·reg_jr] + e_j,    log sd_j = s_0 + Σ_k s_k·z_jk

with e_j the two-part mixture of mixture.py (core sd sd_j), its w and kappa fitted under
the most probable hypothesis (refit: empirical Bayes, kappa within KAPPA_RANGE). Priors:
mu and s_0 flat (they cancel); each effect d_k ~ N(0, TAU²) and noise change s_k ~ N(0,
NOISE_SD²), proper, so hypotheses with different numbers of changes compare honestly; the
regressors' coefficients normal (Design.precision). Each hypothesis's evidence: Laplace's
method at the EM maximum, the observed information from Louis' identity (fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from kbisect.stats.mixture import LOG_2PI, OUTLIERS, WIDE, Array, Prior, e_step, louis

TAU = 0.25  # prior sd of a change's effect on log tps (a 22% change is one sd)
NOISE_SD = 0.3  # prior sd of a change's effect on log sd (x1.5 is one sd)
KAPPA_RANGE = (4.0, 20.0)


@dataclass(frozen=True)
class Design:
    """The samples as the model sees them: log tps, which classes each revision holds,
    the regressors (centred) with their prior precisions."""

    x: Array  # (N,)
    z: Array  # (N, m): z[j, c] = 1 when class c is among sample j's revision's ancestors
    regressors: Array  # (N, R)
    precision: tuple[float, ...]  # the regressors' prior precisions


@dataclass
class Fits:
    """A batch of hypotheses with K changes each, fitted."""

    idx: NDArray[np.int64]  # (H, K) class numbers
    theta: Array  # (H, 1 + K + R)
    s: Array  # (H, 1 + K)
    log_evidence: Array  # (H,)
    cov: Array  # (H, P, P): the Laplace covariance of (theta, s)
    resp: Array  # (H, N): the core part's responsibility per sample


@dataclass
class Mixture:
    """The noise mixture's outlier weight and width, as fitted (refit), and w's prior."""

    w: float = 0.05
    kappa: float = WIDE
    prior: Prior = OUTLIERS


def _designs(d: Design, idx: NDArray[np.int64]) -> tuple[Array, Array]:
    """The mean design (H, N, 1 + K + R) and the log-sd design (H, N, 1 + K)."""
    h = idx.shape[0]
    n = d.x.shape[0]
    zk = np.transpose(d.z[:, idx], (1, 0, 2))  # (H, N, K)
    ones = np.ones((h, n, 1))
    reg = np.broadcast_to(d.regressors, (h, n, d.regressors.shape[1]))
    return np.concatenate([ones, zk, reg], axis=2), np.concatenate([ones, zk], axis=2)


def _parts(e: Array, ls: Array, mix: Mixture) -> tuple[Array, Array]:
    """The core part's responsibility and each sample's log likelihood."""
    r, both = e_step(e * e * np.exp(-2 * ls), mix.w, math.log(mix.kappa), mix.kappa**2)
    return r, both - ls - 0.5 * LOG_2PI


def _gram(a: Array, w: Array | None, b: Array) -> Array:
    """Σ_n w_n·a_n·b_nᵀ per hypothesis: (H, N, P), (H, N) or None, (H, N, Q) -> (H, P, Q)."""
    left = a if w is None else a * w[..., None]
    return np.asarray(np.matmul(left.transpose(0, 2, 1), b), dtype=float)


def _cross(a: Array, v: Array) -> Array:
    """Σ_n a_n·v_n per hypothesis as a column: v (N,) or (H, N) -> (H, P, 1)."""
    col = np.broadcast_to(v, a.shape[:2])[..., None]
    return np.asarray(np.matmul(a.transpose(0, 2, 1), col), dtype=float)


def _solve(a: Array, b: Array) -> Array:
    """a·x = b per hypothesis, b a column: (H, P, P), (H, P, 1) -> (H, P)."""
    return np.asarray(np.linalg.solve(a, b)[..., 0], dtype=float)


def _apply(a: Array, coef: Array) -> Array:
    """a·coef per hypothesis: (H, N, P), (H, P) -> (H, N)."""
    return np.asarray(np.matmul(a, coef[..., None])[..., 0], dtype=float)


def fit(d: Design, idx: NDArray[np.int64], mix: Mixture, iterations: int = 80) -> Fits:
    """Every hypothesis of the batch (class numbers idx, (H, K)) fitted by EM, with its
    Laplace evidence."""
    hx, gx = _designs(d, idx)
    h, _, pm = hx.shape
    ps = gx.shape[2]
    k = idx.shape[1]
    lam_m = np.array([0.0, *([1 / TAU**2] * k), *d.precision])
    lam_s = np.array([0.0, *([1 / NOISE_SD**2] * k)])
    x = d.x
    # start: least squares with the priors, the median absolute residual as the sd
    a = _gram(hx, None, hx) + np.diag(lam_m + 1e-9)
    theta = _solve(a, _cross(hx, x))
    e = x - _apply(hx, theta)
    mad = np.median(np.abs(e), axis=1) / 0.6745
    s = np.zeros((h, ps))
    s[:, 0] = np.log(np.maximum(mad, 1e-4))
    last = np.full(h, -np.inf)
    k2 = mix.kappa**2

    def at(hx: Array, gx: Array, theta: Array, s: Array) -> tuple[Array, Array, Array, Array]:
        """log sd, residuals, responsibilities, and the log likelihood plus log priors."""
        ls = _apply(gx, s)
        e = x - _apply(hx, theta)
        r, ll = _parts(e, ls, mix)
        obj = ll.sum(1) - 0.5 * np.einsum("hp,p,hp->h", theta, lam_m, theta)
        return ls, e, r, obj - 0.5 * np.einsum("hp,p,hp->h", s, lam_s, s)

    # each hypothesis is iterated until its own objective stops moving, then left out: the
    # few in a batch of thousands that never settle do not keep the rest iterating to the
    # cap (a hypothesis's fit does not depend on the batch it is fitted in)
    live, hxl, gxl = np.arange(h), hx, gx  # the designs of the live ones
    for _ in range(iterations):
        ls, e, r, obj = at(hxl, gxl, theta[live], s[live])
        moving = np.abs(obj - last[live]) >= 1e-8  # a step that fell is not the end
        if not moving.any():
            break
        live, hxl, gxl = live[moving], hxl[moving], gxl[moving]
        ls, r = ls[moving], r[moving]
        last[live] = obj[moving]
        wt = (r + (1 - r) / k2) * np.exp(-2 * ls)
        a = _gram(hxl, wt, hxl) + np.diag(lam_m)
        a[:, 0, 0] += 1e-12
        theta[live] = _solve(a, _cross(hxl, wt * x))
        e = x - _apply(hxl, theta[live])
        c = (r + (1 - r) / k2) * e * e * np.exp(-2 * ls)
        sl = s[live]
        grad = _cross(gxl, c - 1)[..., 0] - lam_s * sl
        hess = 2 * _gram(gxl, c, gxl) + np.diag(lam_s)
        hess[:, 0, 0] += 1e-9
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        size = np.linalg.norm(step, axis=1, keepdims=True)
        s[live] = sl + step * np.minimum(1.0, 1.0 / np.maximum(size, 1e-12))
    ls, e, r, obj = at(hx, gx, theta, s)
    proper = lam_m[lam_m > 0].tolist() + lam_s[lam_s > 0].tolist()
    norm = math.fsum(0.5 * math.log(p) - 0.5 * LOG_2PI for p in proper)
    info = _information(hx, gx, e, ls, r, mix, lam_m, lam_s)
    sign, logdet = np.linalg.slogdet(info)
    bad = sign <= 0
    if np.any(bad):  # not a maximum in every direction: the core part's information
        core = _information(hx, gx, e, ls, np.ones_like(r), mix, lam_m, lam_s)
        sign2, logdet2 = np.linalg.slogdet(core[bad])
        logdet[bad] = np.where(sign2 > 0, logdet2, np.inf)
        info[bad] = core[bad]
    evidence = obj + norm + 0.5 * (pm + ps) * LOG_2PI - 0.5 * logdet
    try:
        cov = np.asarray(np.linalg.inv(info), dtype=float)
    except np.linalg.LinAlgError:
        cov = np.asarray(np.linalg.pinv(info), dtype=float)
    return Fits(idx, theta, s, evidence, cov, r)


def _information(
    hx: Array, gx: Array, e: Array, ls: Array, r: Array, mix: Mixture, lam_m: Array, lam_s: Array
) -> Array:
    """The observed information in (theta, s), Louis' identity per sample, plus the
    priors' precisions."""
    hh, hg, gg = louis(e, np.exp(-2 * ls), r, mix.kappa**2)
    top = np.concatenate([_gram(hx, hh, hx), _gram(hx, hg, gx)], axis=2)
    low = np.concatenate([_gram(gx, hg, hx), _gram(gx, gg, gx)], axis=2)
    info = np.concatenate([top, low], axis=1)
    return info + np.diag(np.concatenate([lam_m, lam_s]))  # type: ignore[no-any-return]


def matters(f: Fits, least: float) -> Array:
    """log P(every change is at least `least` in size) under the fitted posterior, over
    the same under the prior: the effects' prior is N(0, TAU²) cut to |d| >= least, so
    that a story of one step is not doubted for changes too small to matter (the
    Laplace posterior of each effect taken as normal)."""
    k = f.idx.shape[1]
    out = np.full(f.idx.shape[0], -k * math.log(2 * special.ndtr(-least / TAU)))
    for q in range(k):
        m = f.theta[:, 1 + q]
        sd = np.sqrt(np.maximum(f.cov[:, 1 + q, 1 + q], 1e-12))
        tail = special.ndtr((-least - m) / sd) + special.ndtr((m - least) / sd)
        out += np.log(np.maximum(tail, 1e-300))
    return out


def refit(d: Design, f: Fits, row: int, mix: Mixture) -> None:
    """The mixture's w (its maximum a posteriori, within the prior's range) and kappa
    fitted to row `row` of the batch f (the most probable hypothesis): empirical Bayes."""
    r = f.resp[row]
    hx, gx = _designs(d, f.idx[row : row + 1])
    e = d.x - hx[0] @ f.theta[row]
    u = e * e * np.exp(-2 * (gx[0] @ f.s[row]))
    wide = float((1 - r).sum())
    mix.w = mix.prior.w_map(wide, len(r))
    if wide > 0.5:
        kappa = math.sqrt(float(((1 - r) * u).sum()) / wide)
        mix.kappa = min(max(kappa, KAPPA_RANGE[0]), KAPPA_RANGE[1])
