"""The whole range as a story: the tps along good..bad as a few level changes on the
commit graph, not one step.

One culprit is the common case, not an assumption. A hypothesis h is a set of up to
KMAX changes, each in one class of candidates (posterior.py: commits every tested
revision treats alike); a revision's level is the good level plus the effect of every
change among its ancestors-or-self. So a regression at c10 that c15 fixes, with the real
culprit at c19, is the hypothesis {c10: -15%, c15: +15%, c19: -15%}, and two culprits of
-15% each are {c8, c19}. On the log scale, for sample j,

    x_j = mu + Σ_k d_k·z_jk [+ slope·t_j] [+ beta·load_j] + e_j
    log sd_j = s_0 + Σ_k s_k·z_jk

z_jk = 1 when change k is among the ancestors of sample j's revision. Each change may
change the noise too (s_k): a level may be noisier than another, as real compares show
(the fast side at twice the slow side's CV). e_j is a two-part mixture: the core
N(0, sd_j²) with weight 1 - w, a wide part N(0, (kappa·sd_j)²) with weight w, for the
boot that is far off; w and kappa are fitted (empirical Bayes, under the most probable
hypothesis, w with a Beta(1, 19) prior), not fixed.

Priors: mu and s_0 flat (the same in every hypothesis: they cancel); each effect
d_k ~ N(0, TAU²) and noise change s_k ~ N(0, NOISE_SD²) (proper, so hypotheses with
different numbers of changes compare honestly); the number of changes K with P(K) ∝
RHO^(K - 1), its positions uniform over the K-subsets of the range's commits. The
evidence of each hypothesis is the likelihood integrated over (mu, d, slope, beta, s) by
Laplace's method at the EM maximum, with the observed information from Louis' identity;
every hypothesis is fitted at once (numpy, a batch per K).

What the story says (Story): the changes whose class holds a change with P >= 0.5, each
with its probability, its ratio (tps after / before, 95% interval) and the ratio of its
noise; P(one change); and the kind:

- single: one change, and one change is the more probable story;
- several: two or more changes;
- contradicted: the samples do not support one step (P(one change) < 0.5), but the other
  changes are not located yet;
- undecided: no change holds 0.5.

`settled(confidence)`: every named change holds the confidence and is one commit (or a
group no test can split). The search (search.py) goes on until the story is settled, and
checks a settled single step where it has not looked (`probe`): a long stretch of the
range no test has split, where a fix and a second regression could hide.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kbisect.bisect.posterior import choice
from kbisect.bisect.posterior.graph import Graph
from kbisect.bisect.posterior.likelihood import (
    Model,
    loaded,
    machine_columns,
    regressor_value,
)

KMAX = 3  # changes in one hypothesis, at most
RHO = 0.25  # prior odds of one more change
TAU = 0.25  # prior sd of a change's effect on log tps (a 22% change is one sd)
NOISE_SD = 0.3  # prior sd of a change's effect on log sd (x1.5 is one sd)
W_PRIOR = (1.0, 19.0)  # Beta prior of the outlier weight (mean 5%)
W_RANGE = (0.005, 0.3)
KAPPA_RANGE = (4.0, 20.0)
MATTERS = 1 / 3  # a change matters from this share of the endpoints' difference on
LEAST = math.log(1 / 0.98)  # and from 2% at least
NAMED = 0.5  # a class is named as a change when it holds one with at least this
ALONE = 0.8  # P(one change) a single step's story needs to be confirmed (exit 0)
WORTH = 0.02  # nats per boot: a story test below this is not worth its boot
LIVE = 1e-3  # hypotheses lighter than this are left out of the choice of revision
PROBE_BOOTS = 8  # samples of one probe, at most
LOG_2PI = math.log(2 * math.pi)
Array = NDArray[np.float64]


@dataclass(frozen=True)
class Change:
    """One level change: the commits no test has told apart, where it is."""

    members: tuple[str, ...]  # graph order
    p: float  # P(a change among the members)
    ratio: float  # tps after / before
    low: float  # 95% interval of the ratio
    high: float
    noise: float  # sd after / sd before
    count: int = 1  # changes in this group in the most probable hypothesis

    @property
    def commit(self) -> str:
        """The group's newest member: the one a test of the group is made on."""
        return self.members[-1]

    def as_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "members": list(self.members),
            "p": self.p,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "noise": self.noise,
            "count": self.count,
        }


@dataclass(frozen=True)
class Story:
    kind: str  # single | several | contradicted | undecided
    changes: tuple[Change, ...]
    p_single: float  # P(exactly one change)
    p_best: float  # P of the most probable hypothesis
    outlier: float  # the fitted outlier weight
    notes: tuple[str, ...] = ()

    def settled(self, confidence: float) -> bool:
        """Every named change holds `confidence`, and the story is several, or single
        with one change holding it too."""
        return self.kind in ("single", "several") and all(c.p >= confidence for c in self.changes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "p_single": self.p_single,
            "p_best": self.p_best,
            "outlier": self.outlier,
            "steps": [c.as_dict() for c in self.changes],
            "notes": list(self.notes),
        }


Row = tuple[str, float, float, float] | tuple[str, float, float, float, str]
# a sample as the story sees it: (commit, tps, t, load[, the pool's machine])


@dataclass(frozen=True)
class Data:
    """The samples as the model sees them: log tps, which classes each revision holds,
    the regressors (centred) with their prior precisions."""

    x: Array  # (N,)
    z: Array  # (N, m): z[j, c] = 1 when class c is among sample j's revision's ancestors
    regressors: Array  # (N, R)
    precision: tuple[float, ...]  # the regressors' prior precisions
    names: tuple[str, ...]  # "t", "load": what the regressors are
    centres: tuple[float, ...]  # the value each regressor is centred on
    sites: tuple[int | None, ...]  # each sample's revision in the graph (None: a good one)
    least: float  # the smallest change that matters (log scale)


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
    w: float = 0.05
    kappa: float = 8.0


def data(
    graph: Graph,
    classes: Sequence[tuple[int, frozenset[int]]],
    samples: Sequence[Row],
    model: Model,
) -> Data:
    """samples: (commit, tps, t, load[, machine])."""
    x = np.log(np.array([s[1] for s in samples], dtype=float))
    z = np.zeros((len(samples), len(classes)))
    for j, s in enumerate(samples):
        i = graph.index.get(s[0])
        if i is None:
            continue
        for c, (_, bad) in enumerate(classes):
            if i in bad:
                z[j, c] = 1.0
    cols, precision, names, centres = [], [], [], []
    if model.trend:
        t = np.array([s[2] for s in samples], dtype=float)
        span = float(t.max() - t.min())
        names.append("t")
        centres.append(float(t.mean()))
        cols.append(t - t.mean())
        precision.append((span / model.drift_sd) ** 2 if span > 0 else 1e12)
    load = [s[3] for s in samples]
    if loaded(model, load):
        arr = np.array(load, dtype=float)
        names.append("load")
        centres.append(float(arr.mean()))
        cols.append(arr - arr.mean())
        precision.append(1.0 / model.load_sd**2)
    machine = [str(s[4]) if len(s) > 4 else "" for s in samples]
    for name, values in machine_columns(model, machine):
        arr = np.array(values)
        names.append(name)
        centres.append(float(arr.mean()))
        cols.append(arr - arr.mean())
        precision.append(1.0 / model.machine_sd**2)
    reg = np.stack(cols, axis=1) if cols else np.zeros((len(samples), 0))
    sites = tuple(graph.index.get(s[0]) for s in samples)
    goods = [v for v, i in zip(x, sites, strict=True) if i is None]
    bads = [v for v, i in zip(x, sites, strict=True) if i == graph.n - 1]
    ends = abs(float(np.median(goods)) - float(np.median(bads))) if goods and bads else 0.0
    least = max(MATTERS * ends, LEAST)
    return Data(x, z, reg, tuple(precision), tuple(names), tuple(centres), sites, least)


def _designs(d: Data, idx: NDArray[np.int64]) -> tuple[Array, Array]:
    """The mean design (H, N, 1 + K + R) and the log-sd design (H, N, 1 + K)."""
    h = idx.shape[0]
    n = d.x.shape[0]
    zk = np.transpose(d.z[:, idx], (1, 0, 2))  # (H, N, K)
    ones = np.ones((h, n, 1))
    reg = np.broadcast_to(d.regressors, (h, n, d.regressors.shape[1]))
    return np.concatenate([ones, zk, reg], axis=2), np.concatenate([ones, zk], axis=2)


def _parts(e: Array, ls: Array, mix: Mixture) -> tuple[Array, Array]:
    """The core part's responsibility and each sample's log likelihood."""
    u = e * e * np.exp(-2 * ls)
    core = math.log(1 - mix.w) - ls - 0.5 * u
    wide = math.log(mix.w) - math.log(mix.kappa) - ls - 0.5 * u / mix.kappa**2
    top = np.maximum(core, wide)
    ll = top + np.log(np.exp(core - top) + np.exp(wide - top)) - 0.5 * LOG_2PI
    return np.exp(core - ll - 0.5 * LOG_2PI), ll


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


def fit(d: Data, idx: NDArray[np.int64], mix: Mixture, iterations: int = 80) -> Fits:
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
    inv = np.exp(-2 * ls)
    weights = (r, 1 - r)
    scales = (1.0, 1.0 / mix.kappa**2)
    hh = np.zeros_like(e)
    hg = np.zeros_like(e)
    gg = np.zeros_like(e)
    ma = np.zeros_like(e)
    mb = np.zeros_like(e)
    maa = np.zeros_like(e)
    mbb = np.zeros_like(e)
    mab = np.zeros_like(e)
    for w, sc in zip(weights, scales, strict=True):
        p = inv * sc  # 1 / sd_c²
        alpha = e * p
        beta = e * e * p - 1
        hh += w * p
        hg += 2 * w * e * p
        gg += 2 * w * e * e * p
        ma += w * alpha
        mb += w * beta
        maa += w * alpha * alpha
        mbb += w * beta * beta
        mab += w * alpha * beta
    hh -= maa - ma * ma
    hg -= mab - ma * mb
    gg -= mbb - mb * mb
    top = np.concatenate(
        [_gram(hx, hh, hx), _gram(hx, hg, gx)],
        axis=2,
    )
    low = np.concatenate(
        [_gram(gx, hg, hx), _gram(gx, gg, gx)],
        axis=2,
    )
    info = np.concatenate([top, low], axis=1)
    return info + np.diag(np.concatenate([lam_m, lam_s]))  # type: ignore[no-any-return]


def _matters(f: Fits, least: float) -> Array:
    """log P(every change is at least `least` in size) under the fitted posterior, over
    the same under the prior: the effects' prior is N(0, TAU²) cut to |d| >= least, so
    that a story of one step is not doubted for changes too small to matter (the
    Laplace posterior of each effect taken as normal)."""
    k = f.idx.shape[1]
    out = np.full(f.idx.shape[0], -k * math.log(2 * _phi(-least / TAU)))
    for q in range(k):
        m = f.theta[:, 1 + q]
        sd = np.sqrt(np.maximum(f.cov[:, 1 + q, 1 + q], 1e-12))
        tail = _phis((-least - m) / sd) + _phis((m - least) / sd)
        out += np.log(np.maximum(tail, 1e-300))
    return out


def _phi(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def _phis(z: Array) -> Array:
    """The standard normal CDF, elementwise."""
    return np.asarray([_phi(float(v)) for v in z.ravel()]).reshape(z.shape)


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
class RangeModel:
    """The story's model at the samples so far: every hypothesis fitted and weighed."""

    graph: Graph
    classes: Sequence[tuple[int, frozenset[int]]]
    d: Data
    fits: dict[int, Fits] = field(default_factory=dict)
    log_post: dict[int, Array] = field(default_factory=dict)
    mix: Mixture = field(default_factory=Mixture)

    @classmethod
    def build(
        cls,
        graph: Graph,
        classes: Sequence[tuple[int, frozenset[int]]],
        samples: Sequence[Row],
        model: Model,
    ) -> RangeModel:
        m = cls(graph, classes, data(graph, classes, samples, model))
        sizes = [mask.bit_count() for mask, _ in classes]
        hyps = hypotheses(sizes, graph.n)
        m._weigh(hyps)  # the outlier part fitted under the most probable hypothesis
        m._refit_mixture()
        m._weigh(hyps)
        return m

    def _weigh(self, hyps: dict[int, tuple[NDArray[np.int64], Array]]) -> None:
        for k, (idx, prior) in hyps.items():
            f = fit(self.d, idx, self.mix)
            self.fits[k] = f
            self.log_post[k] = prior + f.log_evidence + _matters(f, self.d.least)
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

    def _refit_mixture(self) -> None:
        k, row = self.best()
        f = self.fits[k]
        r = f.resp[row]
        hx, gx = _designs(self.d, f.idx[row : row + 1])
        e = self.d.x - hx[0] @ f.theta[row]
        u = e * e * np.exp(-2 * (gx[0] @ f.s[row]))
        a, b = W_PRIOR
        wide = float((1 - r).sum())
        w = (wide + a - 1) / (len(r) + a + b - 2)
        self.mix.w = min(max(w, W_RANGE[0]), W_RANGE[1])
        if wide > 0.5:
            kappa = math.sqrt(float(((1 - r) * u).sum()) / wide)
            self.mix.kappa = min(max(kappa, KAPPA_RANGE[0]), KAPPA_RANGE[1])

    # --- what it says -----------------------------------------------------------------

    def marginals(self) -> list[float]:
        """P(at least one change in class c), per class."""
        out = np.zeros(len(self.classes))
        for k, f in self.fits.items():
            p = np.exp(self.log_post[k])
            for c in range(len(self.classes)):
                out[c] += float(p[(f.idx == c).any(axis=1)].sum())
        return [min(float(v), 1.0) for v in out]

    def p_single(self) -> float:
        return float(np.exp(self.log_post[1]).sum()) if 1 in self.log_post else 0.0

    def _effect(self, c: int) -> tuple[float, float, float, int]:
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

    def story(self) -> Story:
        marg = self.marginals()
        named = [c for c, p in enumerate(marg) if p >= NAMED]
        order = sorted(named, key=lambda c: self._newest(c))
        changes = []
        for c in order:
            d, sd, noise, count = self._effect(c)
            members = tuple(self.graph.commits[i] for i in self.graph.members(self.classes[c][0]))
            changes.append(
                Change(
                    members,
                    marg[c],
                    math.exp(d),
                    math.exp(d - 1.96 * sd),
                    math.exp(d + 1.96 * sd),
                    math.exp(noise),
                    count,
                )
            )
        single = self.p_single()
        k, row = self.best()
        p_best = float(math.exp(self.log_post[k][row]))
        if not changes:
            kind = "undecided"
        elif len(changes) == 1 and changes[0].count == 1:
            kind = "single" if single >= 0.5 else "contradicted"
        else:
            kind = "several"
        return Story(kind, tuple(changes), single, p_best, self.mix.w, tuple(self._notes()))

    def _newest(self, c: int) -> int:
        return max(self.graph.members(self.classes[c][0]))

    def _notes(self) -> list[str]:
        """A revision that is clearly at the bad level and an ancestor of one clearly at
        the good level: one step cannot explain both. Clearly: its samples' mean is
        nearer one endpoint's level, by more than two standard errors of the noise."""
        g = self.graph
        by_site: dict[int | None, list[float]] = {}
        for j, i in enumerate(self.d.sites):
            by_site.setdefault(i, []).append(float(self.d.x[j]))
        goods, bads = by_site.get(None), by_site.get(g.n - 1)
        if not goods or not bads:
            return []
        k, row = self.best()
        sd = math.exp(float(self.fits[k].s[row, 0]))
        good, bad = float(np.median(goods)), float(np.median(bads))
        mid = 0.5 * (good + bad)

        def looks(i: int) -> str | None:
            v = by_site[i]
            off = (math.fsum(v) / len(v) - mid) * (1 if good > bad else -1)
            if abs(off) < 2 * sd / math.sqrt(len(v)):
                return None
            return "good" if off > 0 else "bad"

        seen = [i for i in by_site if i is not None and i != g.n - 1]
        out = []
        for a, b in itertools.permutations(seen, 2):
            if g.anc[b] >> a & 1 and looks(a) == "bad" and looks(b) == "good":
                out.append(
                    f"{g.commits[a][:12]} is at the bad level and an ancestor of "
                    f"{g.commits[b][:12]}, which is at the good level: one step cannot "
                    "explain both"
                )
        return out[:3]

    # --- where to look next ------------------------------------------------------------

    def predictive(self, commit: str, t: float, load: float) -> list[tuple[float, float, float]]:
        """The next sample of commit as a mixture of normals over the live hypotheses and
        over which of their changes are among its ancestors: (weight, mean, sd)."""
        g = self.graph
        i = g.index.get(commit)
        anc = g.anc[i] if i is not None else 0
        frac = [(anc & mask).bit_count() / mask.bit_count() for mask, _ in self.classes]
        at = self._regressor_row(t, load)
        parts = []
        for k, f in self.fits.items():
            p = np.exp(self.log_post[k])
            for row in np.nonzero(p >= LIVE)[0]:
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

    def _regressor_row(self, t: float, load: float) -> Array:
        """The regressors' values at (t, load), centred as the samples' are."""
        return np.array(
            [
                regressor_value(n, c, t, load, None) - c
                for n, c in zip(self.d.names, self.d.centres, strict=True)
            ]
        )

    def information(self, commit: str, t: float, load: float) -> float:
        """The expected information (nats) one sample of commit brings about the story."""
        parts = self.predictive(commit, t, load)
        total = math.fsum(w for w, _, _ in parts)
        if total <= 0:
            return 0.0
        parts = [(w / total, m, s) for w, m, s in parts]
        cond = math.fsum(w * 0.5 * math.log(2 * math.pi * math.e * s * s) for w, _, s in parts)
        return max(0.0, choice.entropy(parts) - cond)

    def halves(self) -> list[str]:
        """For every class with a live change, the member that splits it nearest half."""
        marg = self.marginals()
        out = []
        for c, (mask, _) in enumerate(self.classes):
            if marg[c] < LIVE or mask.bit_count() < 2:
                continue
            out.append(self.graph.commits[middle(self.graph, mask, self.graph.members(mask))])
        return out


def middle(graph: Graph, mask: int, members: Sequence[int]) -> int:
    """The one of members (of the group `mask`) whose ancestors split the group nearest
    half: the test that tells the most about where in the group a change is."""
    size = mask.bit_count()
    return min(members, key=lambda i: (abs(2 * (graph.anc[i] & mask).bit_count() - size), i))


def stretch(
    graph: Graph,
    classes: Sequence[tuple[int, frozenset[int]]],
    change: Change,
    untestable: set[str],
) -> str | None:
    """Where one step has not been checked: the middle of the longest group of commits no
    test has split, if it is longer than the range allows. After the change (the group's
    commits are its descendants) a fix and a second regression can hide and make the
    answer wrong, so the limit is an eighth of the range (at least 2); before it, where
    they would only leave the story incomplete, a quarter (at least 3)."""
    g = graph
    at = g.index[change.commit]
    own = {g.index[c] for c in change.members}
    best: tuple[float, int] | None = None
    for mask, _ in classes:
        size = mask.bit_count()
        members = g.members(mask)
        if size < 2 or own & set(members):
            continue
        after = all(g.anc[i] >> at & 1 for i in members)
        limit = max(2, g.n // 8) if after else max(3, g.n // 4)
        if size > limit and (best is None or size / limit > best[0]):
            best = (size / limit, mask)
    if best is None:
        return None
    mask = best[1]
    testable = [i for i in g.members(mask) if g.commits[i] not in untestable]
    return g.commits[middle(g, mask, testable)] if testable else None


def recheck_of(step: dict[str, Any], rechecks: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The re-check of a story's change (run.rechecks is keyed by the commit re-checked,
    one of the change's members), or None. A finished one first: a member's re-check
    still "running" may have been started early for an answer that did not stand
    (Search._early_pairs)."""
    found = [rechecks[c] for c in step["members"] if c in rechecks]
    done = [rc for rc in found if rc.get("kind") != "running"]
    return (done or found)[0] if found else None


def confirmed(
    told: dict[str, Any] | None, rechecks: dict[str, dict[str, Any]], confidence: float
) -> bool:
    """What exit 0 means: the story is single or several, every change in it holds the
    confidence, and each one's re-check confirmed it (a single step's also as the whole
    difference between the endpoints: not "partial")."""
    if not told or told["kind"] not in ("single", "several"):
        return False
    single = told["kind"] == "single"
    if single and (told["p_single"] < ALONE or told.get("against") or told.get("unclear")):
        return False  # one step is doubted: by the story, or by a revision it does not fit
    for step in told["steps"]:
        if step["p"] < confidence:
            return False
        rc = recheck_of(step, rechecks)
        if rc is None or not rc.get("confirmed"):
            return False
        if told["kind"] == "single" and rc.get("partial"):
            return False  # the step explains only part of good -> bad
    return True


def level_test(
    points: Sequence[tuple[float, float, float]], sd: float, w: float, kappa: float
) -> float:
    """The log likelihood ratio of "at the bad level" against "at the good level" for a
    revision's samples, each point (tps, the good level, the bad level) with the levels on
    the log scale at that sample's time and load, each sample under the likelihood's own
    two-part mixture (weight w on a part kappa times as wide): positive says bad, negative
    good. A clean boot tells the levels apart as the core part does; a boot far from both
    (half speed) tells almost nothing, so one outlier never makes a revision clearly at a
    level."""
    total = 0.0
    for v, good, bad in points:
        x = math.log(v)
        total += _mixed(x - bad, sd, w, kappa) - _mixed(x - good, sd, w, kappa)
    return total


def _mixed(d: float, sd: float, w: float, kappa: float) -> float:
    """log of the two-part mixture's density at the residual d."""
    core = math.log1p(-w) - 0.5 * (d / sd) ** 2 - math.log(sd)
    wide = math.log(w) - 0.5 * (d / (kappa * sd)) ** 2 - math.log(kappa * sd)
    return max(core, wide) + math.log1p(math.exp(-abs(core - wide)))
