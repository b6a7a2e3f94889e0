"""Change points and drift in a series of points, each measured by several boots.

The series is the log of each point's mean tps (so a step is relative: a 5% drop is the
same step at 500 tps as at 5000). Each point i has a standard error

    se_i² = s² / n_i + τ²

where s² is the within-point variance of log tps pooled over every point (df = Σ(n_i - 1):
boot-to-boot noise is about the same relative size along a series), and τ² the extra
point-to-point variance (sessions on different days vary more than boots of one session),
estimated from successive differences of the point means (half their mean square, which a
few steps barely move) minus what s²/n_i already explains, never below 0.

Change points: binary segmentation. In a segment, every split k gives the weighted
difference of the two sides' means over its standard error, z_k; the largest |z_k| is a
change point when it exceeds the 95th percentile of the same maximum over NULL_DRAWS
simulated step-free segments with the same standard errors (and s² drawn from its
chi-square, so few boots widen the threshold as they should). The calibration is by
simulation because the maximum over k of correlated z's has no simple law for uneven
weights. Then both sides are searched again. Each side of a split keeps at least
MIN_SIDE points, so a single odd point in the middle is not a step.

The newest point (`newest_step`): a step at the newest point is what an -rc watch exists
for, and binary segmentation cannot place one there. It is a step when its ratio to the
point before (stats/ratio.py: Welch's interval on the log scale) excludes 1 and the
difference of their log means exceeds the two-sided CONFIDENCE t quantile of its standard
error under the noise model of the points before it (so a series whose sessions vary more
than their boots asks more of it; the step itself does not widen the yardstick). Then the
rest of the series (`analyse`) is searched and judged for drift without that point.

Levels (`levels`): each segment between change points has a level (the weighted mean of
its log means); it fits when no point is further from it than the t quantile at
CONFIDENCE, Bonferroni-corrected over the segment's points, of the point's residual
standard error (se_i² - 1/Σw: the level shares the point's noise). A plot draws only the
levels that fit, none through points they do not describe.

Drift (`drift`): several small steps that no single split calls. From the baseline point
to the newest: the weighted least-squares slope of log mean on the position, with a t test
(level SLOPE_ALPHA), and the newest point against the baseline (the ratio of means with
its 95% interval, stats/means.py). Drift is flagged when either is significant and the
change it implies is at least MIN_DRIFT.

The rates measured on generated series are in docs/history.md and asserted in
tests/stats/test_changepoint.py.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import special

from kbisect.stats import means, ratio

CONFIDENCE = 0.97  # a change point's level: the threshold is this quantile of the null max
NULL_DRAWS = 2000
MIN_SIDE = 2
SLOPE_ALPHA = 0.01
MIN_DRIFT = 0.03  # the least change over the drift span worth a flag
SEED = 20261201  # the simulated thresholds are the same from one run to the next


@dataclass(frozen=True)
class Step:
    """A change point: the level changes between point `index - 1` and point `index`."""

    index: int
    ratio: float  # mean after / mean before (the two segments' weighted means)
    low: float
    high: float
    z: float
    threshold: float
    newest: bool = False  # the newest point against the one before it (newest_step)

    @property
    def kind(self) -> str:
        return "regression" if self.ratio < 1.0 else "improvement"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind}


@dataclass(frozen=True)
class Noise:
    """The noise model of a series: pooled within-point variance of log tps (s2, df) and
    the extra point-to-point variance tau2."""

    s2: float
    df: int
    tau2: float

    def se2(self, n: Sequence[int]) -> np.ndarray:
        return self.s2 / np.asarray(n, dtype=float) + self.tau2

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _logs(points: Sequence[Sequence[float]]) -> list[np.ndarray]:
    out = []
    for xs in points:
        arr = np.asarray(xs, dtype=float)
        if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise means.StatsError("every point needs positive, finite tps samples")
        out.append(np.log(arr))
    return out


def noise(points: Sequence[Sequence[float]], fallback_cv: float = 0.05) -> Noise:
    """The series' noise model from its boots (see the module doc). Without a point of two
    boots, s² is fallback_cv² (a point of one boot, such as an old rc history entry)."""
    logs = _logs(points)
    ss = sum(float(np.sum((x - x.mean()) ** 2)) for x in logs)
    df = sum(x.size - 1 for x in logs)
    s2 = ss / df if df > 0 else fallback_cv**2
    m = np.array([x.mean() for x in logs])
    n = np.array([x.size for x in logs], dtype=float)
    tau2 = 0.0
    if m.size >= 3:
        within = s2 / n
        mssd = float(np.mean(np.diff(m) ** 2)) / 2.0
        if mssd > _extra_limit(tuple(np.round(within / within.max(), 3))) * float(np.mean(within)):
            tau2 = mssd - float(np.mean(within))
    return Noise(s2, df, tau2)


@functools.lru_cache(maxsize=256)
def _extra_limit(shape: tuple[float, ...]) -> float:
    """The 95th percentile of (half the mean square successive difference / the mean
    variance of a point) over step-free series whose points have variances of this shape:
    above it, the points vary more than their boots say, and tau² is kept."""
    rng = np.random.default_rng(SEED)
    v = np.asarray(shape)
    draws = rng.standard_normal((NULL_DRAWS, v.size)) * np.sqrt(v)
    ratio = np.mean(np.diff(draws, axis=-1) ** 2, axis=-1) / 2.0 / float(np.mean(v))
    return float(np.quantile(ratio, CONFIDENCE))


def _split_z(m: np.ndarray, w: np.ndarray, lo: int) -> np.ndarray:
    """z of every split of one segment (rows: draws) between positions lo..len-lo."""
    cw = np.cumsum(w, axis=-1)
    cwm = np.cumsum(w * m, axis=-1)
    total_w, total_wm = cw[..., -1:], cwm[..., -1:]
    left_w, left_wm = cw[..., lo - 1 : -lo], cwm[..., lo - 1 : -lo]
    right_w, right_wm = total_w - left_w, total_wm - left_wm
    diff = right_wm / right_w - left_wm / left_w
    return np.asarray(diff / np.sqrt(1.0 / left_w + 1.0 / right_w))


def threshold(se2: np.ndarray, df: int) -> float:
    """The CONFIDENCE quantile of max |z| over a step-free segment with these variances
    (z does not change when every variance is scaled: cached on their shape)."""
    return _threshold(tuple(np.round(se2 / se2.max(), 3)), min(df, 1000))


@functools.lru_cache(maxsize=1024)
def _threshold(shape: tuple[float, ...], df: int) -> float:
    rng = np.random.default_rng(SEED)
    se2 = np.asarray(shape)
    draws = rng.standard_normal((NULL_DRAWS, se2.size)) * np.sqrt(se2)
    # The pooled variance is itself estimated: scale each draw's standardisation by it.
    scale = np.sqrt(rng.chisquare(df, (NULL_DRAWS, 1)) / df) if df > 0 else 1.0
    z = np.abs(_split_z(draws, 1.0 / se2, MIN_SIDE)) / scale
    return float(np.quantile(z.max(axis=-1), CONFIDENCE))


def _search(m: np.ndarray, se2: np.ndarray, start: int, df: int) -> list[Step]:
    if m.size < 2 * MIN_SIDE:
        return []
    w = 1.0 / se2
    z = _split_z(m, w, MIN_SIDE)
    best = int(np.argmax(np.abs(z)))
    limit = threshold(se2, df)
    if abs(z[best]) <= limit:
        return []
    k = best + MIN_SIDE  # the first point of the right side
    left_w, right_w = float(w[:k].sum()), float(w[k:].sum())
    diff = float((w[k:] * m[k:]).sum() / right_w - (w[:k] * m[:k]).sum() / left_w)
    se = math.sqrt(1.0 / left_w + 1.0 / right_w)
    t = _t(df, 0.975)
    step = Step(
        start + k,
        math.exp(diff),
        math.exp(diff - t * se),
        math.exp(diff + t * se),
        float(z[best]),
        limit,
    )
    left = _search(m[:k], se2[:k], start, df)
    right = _search(m[k:], se2[k:], start + k, df)
    return [*left, step, *right]


def change_points(points: Sequence[Sequence[float]], model: Noise | None = None) -> list[Step]:
    """The change points of a series of points (each a list of tps samples), oldest first."""
    logs = _logs(points)
    model = model or noise(points)
    m = np.array([x.mean() for x in logs])
    se2 = model.se2([x.size for x in logs])
    return _search(m, se2, 0, model.df)


def _t(df: int, p: float) -> float:
    return float(special.stdtrit(df, p)) if df > 0 else float(special.ndtri(p))


def newest_step(points: Sequence[Sequence[float]]) -> Step | None:
    """The newest point as a step from the one before it (module doc); None when it is
    not one, or either point has fewer than 2 boots."""
    if len(points) < 2 or len(points[-2]) < 2 or len(points[-1]) < 2:
        return None
    whole, before = noise(points), noise(points[:-1])
    model = Noise(whole.s2, whole.df, before.tau2)
    a, b = _logs(points[-2:])
    z = float((b.mean() - a.mean()) / math.sqrt(model.se2([a.size, b.size]).sum()))
    limit = _t(model.df, (1 + CONFIDENCE) / 2)
    r = ratio.ratio_ci(points[-2], points[-1])
    if abs(z) <= limit or r.low <= 1.0 <= r.high:
        return None
    return Step(len(points) - 1, r.ratio, r.low, r.high, z, limit, newest=True)


@dataclass(frozen=True)
class Level:
    """A segment's level: points start..end-1 at `tps`, and whether they all fit it."""

    start: int
    end: int
    tps: float
    fits: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def levels(points: Sequence[Sequence[float]], steps: Sequence[Step], model: Noise) -> list[Level]:
    """One level per segment between the change points `steps` (module doc)."""
    logs = _logs(points)
    edges = [0, *(s.index for s in steps), len(points)]
    out = []
    for a, b in itertools.pairwise(edges):
        m = np.array([x.mean() for x in logs[a:b]])
        se2 = model.se2([x.size for x in logs[a:b]])
        w = 1.0 / se2
        level = float((w * m).sum() / w.sum())
        resid = np.sqrt(np.maximum(se2 - 1.0 / w.sum(), 1e-300))
        limit = _t(model.df, 1 - (1 - CONFIDENCE) / (2 * m.size))
        fits = m.size == 1 or bool(np.all(np.abs(m - level) / resid <= limit))
        out.append(Level(a, b, math.exp(level), fits))
    return out


@dataclass(frozen=True)
class Analysis:
    noise: Noise
    steps: list[Step]
    drift: Drift | None
    levels: list[Level]


def analyse(points: Sequence[Sequence[float]], start: int = 0) -> Analysis:
    """A series' change points (a step at the newest point first: the rest is searched
    and judged for drift without it), its drift from point `start`, and its levels."""
    last = newest_step(points)
    body = points[:-1] if last else points
    model = noise(body)
    steps = [*change_points(body, model), *([last] if last else [])]
    return Analysis(model, steps, drift(body, start, model), levels(points, steps, model))


@dataclass(frozen=True)
class Drift:
    """The drift from the baseline point to the newest one."""

    start: int  # the baseline's index
    points: int  # how many points the slope saw
    slope: float  # log tps per point
    slope_p: float
    moved: float  # the change the slope implies over the span (relative)
    last_ratio: means.RatioCI | None  # newest / baseline, when both have 2 boots or more
    flagged: bool
    reasons: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "regression" if self.moved < 0 else "improvement"

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind
        out["last_ratio"] = self.last_ratio.as_dict() if self.last_ratio else None
        return out


def drift(
    points: Sequence[Sequence[float]], start: int = 0, model: Noise | None = None
) -> Drift | None:
    """Drift from point `start` (the baseline) to the newest; None with fewer than 3
    points in that span."""
    span = list(points[start:])
    if len(span) < 3:
        return None
    model = model or noise(points)
    logs = _logs(span)
    m = np.array([x.mean() for x in logs])
    se2 = model.se2([x.size for x in logs])
    w = 1.0 / se2
    x = np.arange(m.size, dtype=float)
    xm = float((w * x).sum() / w.sum())
    sxx = float((w * (x - xm) ** 2).sum())
    slope = float((w * (x - xm) * m).sum() / sxx)
    se = math.sqrt(1.0 / sxx)
    df = model.df if model.df > 0 else m.size - 2
    p = 2 * float(special.stdtr(df, -abs(slope) / se)) if se > 0 else (0.0 if slope else 1.0)
    moved = math.expm1(slope * (m.size - 1))
    reasons = []
    if p < SLOPE_ALPHA and abs(moved) >= MIN_DRIFT:
        reasons.append(f"slope {moved:+.1%} over {m.size} points (p = {p:.2g} < {SLOPE_ALPHA:g})")
    last: means.RatioCI | None = None
    first, newest = span[0], span[-1]
    if len(first) >= 2 and len(newest) >= 2:
        last = ratio.ratio_ci(first, newest)
        if (last.low > 1.0 or last.high < 1.0) and abs(last.ratio - 1.0) >= MIN_DRIFT:
            reasons.append(
                f"newest/baseline {last.ratio:.3f}x [{last.low:.3f}, {last.high:.3f}] excludes 1"
            )
            if not reasons[0].startswith("slope"):
                moved = last.ratio - 1.0
    return Drift(start, m.size, slope, p, moved, last, bool(reasons), reasons)
