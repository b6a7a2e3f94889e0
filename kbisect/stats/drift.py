"""Drift-aware references: re-measure the good and bad references alongside the revisions
under test, estimate how the host's speed moved, and decide on the paired position.

A fixed threshold from endpoint samples taken in the first half hour turns a host that
gets 20% faster into wrong verdicts. Instead, a bisection boots the good and the bad
reference in turn alongside the revisions under test (bisect/references.py says when).
Their samples give the drift by a common-slope fit on the log scale (analysis of
covariance),

    log tps = a_revision + slope·t + noise,

whose slope is estimated from the changes *within* each reference revision over time, so a
revision's own level never passes for drift. Then:

- today's sequential rule (sequential.py, `git bisect run`) decides on samples brought
  back to time 0, tps·exp(-slope·t), against the threshold of the endpoints brought back
  the same way: the revision's position between the references at its own time;
- the posterior (posterior.py) puts the slope into its likelihood (Model(trend=True)) and
  integrates it out with the levels; the references' samples are ordinary evidence there.

The trend test (`trend`) is a t test on the slope; `warning` is the one line a
report or a compare prints: what moved, by how much, over how long, and what was done.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy import special

from kbisect.stats import means

ALPHA = 0.01  # the trend test's level for a warning
NOTICEABLE = 0.03  # and the least change over the run worth one


@dataclass(frozen=True)
class Timed:
    """One sample of a reference: which revision, when, and its tps."""

    revision: str
    t: float
    tps: float


@dataclass(frozen=True)
class Trend:
    slope: float  # log tps per time unit
    low: float  # 95% interval of the slope
    high: float
    p: float  # two-sided p value for "no drift"
    se: float  # standard error of the slope
    start: float  # the time the samples cover
    end: float
    n: int

    def moved(self, slope: float | None = None) -> float:
        """The relative change of tps over the samples' time span."""
        return math.expm1((self.slope if slope is None else slope) * (self.end - self.start))

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "moved": self.moved(),
            "moved_low": self.moved(self.low),
            "moved_high": self.moved(self.high),
        }


def trend(samples: Sequence[Timed], confidence: float = 0.95) -> Trend | None:
    """The common slope of log tps over time within each revision; None without at least
    one revision sampled at two times and one residual degree of freedom."""
    by_rev: dict[str, list[Timed]] = {}
    for s in samples:
        by_rev.setdefault(s.revision, []).append(s)
    centred: list[tuple[float, float]] = []
    for group in by_rev.values():
        tm = math.fsum(s.t for s in group) / len(group)
        xm = math.fsum(math.log(s.tps) for s in group) / len(group)
        for s in group:
            centred.append((s.t - tm, math.log(s.tps) - xm))
    stt = math.fsum(u * u for u, _ in centred)
    stx = math.fsum(u * v for u, v in centred)
    df = len(samples) - len(by_rev) - 1
    if stt <= 0 or df < 1:
        return None
    slope = stx / stt
    rss = math.fsum((v - slope * u) ** 2 for u, v in centred)
    se = math.sqrt(rss / df / stt)
    start, end = min(s.t for s in samples), max(s.t for s in samples)
    if se == 0:
        return Trend(slope, slope, slope, 0.0 if slope else 1.0, 0.0, start, end, len(samples))
    half = float(special.stdtrit(df, 0.5 + confidence / 2)) * se
    p = 2 * float(special.stdtr(df, -abs(slope) / se))
    return Trend(slope, slope - half, slope + half, p, se, start, end, len(samples))


def robust(samples: Sequence[Timed]) -> list[Timed]:
    """The samples without the boots means.far_from_median flags within their own
    revision (a half-speed boot of a reference would otherwise pass for drift; a boot
    dropped in error costs the fit little, so the trim is not the warning's test)."""
    by_rev: dict[str, list[Timed]] = {}
    for s in samples:
        by_rev.setdefault(s.revision, []).append(s)
    out = []
    for group in by_rev.values():
        drop = set(means.far_from_median([s.tps for s in group]))
        out += [s for i, s in enumerate(group) if i not in drop]
    return out


def correction(samples: Sequence[Timed]) -> float:
    """The slope to bring samples back by: the outlier-trimmed fit, shrunk toward zero by
    its own noise (slope·max(0, 1 - 1/z²), z = slope/se: the positive-part James-Stein
    factor), so that references that did not move are not 'corrected' by noise."""
    tr = trend(robust(samples))
    if tr is None or tr.slope == 0:
        return 0.0
    if tr.se == 0:
        return tr.slope
    z2 = (tr.slope / tr.se) ** 2
    return tr.slope * max(0.0, 1.0 - 1.0 / z2)


def detrended(samples: Sequence[Timed], slope: float) -> list[float]:
    """The samples' tps brought back to time 0 along the fitted drift."""
    return [s.tps * math.exp(-slope * s.t) for s in samples]


def threshold(refs: Sequence[Timed], good: str, bad: str, slope: float) -> float:
    """The sequential rule's threshold at time 0: the geometric mean of the good and bad
    references' means, each sample brought back along the drift first (slope 0: today's
    geometric mean of the endpoint means)."""

    def mean(revision: str) -> float:
        xs = [r for r in refs if r.revision == revision]
        return math.fsum(detrended(xs, slope)) / len(xs)

    return math.sqrt(mean(good) * mean(bad))


def warning(tr: Trend | None, span: str, action: str, what: str = "the references") -> str | None:
    """One line when the samples moved significantly and noticeably, else None.
    span: how the time span reads ("95 min", "40 boots"); action: what was done;
    what: whose samples moved ("the references", "both sides")."""
    if tr is None or tr.p >= ALPHA or abs(tr.moved()) < NOTICEABLE:
        return None
    word = "faster" if tr.slope > 0 else "slower"
    return (
        f"drift: {what} got {abs(tr.moved()):.1%} {word} over {span} "
        f"(95% CI {tr.moved(tr.low):+.1%} .. {tr.moved(tr.high):+.1%}, "
        f"p = {tr.p:.2g}, {tr.n} samples): {action}"
    )
