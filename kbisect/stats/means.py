"""Summaries, t intervals of a mean and of a difference of means, Welch–Satterthwaite
df, the boots a change needs, outlier rules, and the types of the ratio B/A's interval
and of the A/B verdict (both computed by ratio.py).

Samples are tps figures, one per boot; boots are independent and the two sides may have
different spreads. Student t quantiles: scipy's (scipy.special.stdtrit, as scipy.stats.t uses).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy import special

from kbisect.core.exceptions import UserError

NO_DIFFERENCE = "no significant difference"
HIGH_CV = 0.10  # above this, a side is called noisy
FEW_BOOTS = 5  # below this, a side gets a hint to add boots
OUTLIER_FLOOR = 0.02  # the least spread an outlier rule assumes: 2% of the centre
OUTLIER_ALPHA = 0.05  # a side of boots of normal noise is flagged at most this often
TRIM_Z = 3.5  # far_from_median's modified z (Iglewicz & Hoaglin): stats/drift.py's trim
REFERENCE_EFFECT = 0.10  # the change the "add boots" hint sizes --boots for


class StatsError(UserError):
    """Samples that no statistic can be computed from."""


class NotEnoughSamples(StatsError):
    """Fewer than 2 samples on a side: no spread, no interval."""


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    stdev: float  # sample standard deviation (n-1); 0.0 when n == 1
    cv: float  # stdev / mean; 0.0 when n == 1
    min: float
    max: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(xs: Sequence[float]) -> Summary:
    if not xs:
        raise NotEnoughSamples("no samples to summarize")
    n, mean = len(xs), math.fsum(xs) / len(xs)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    cv = sd / abs(mean) if mean else 0.0
    return Summary(n, mean, statistics.median(xs), sd, cv, min(xs), max(xs))


def welch(terms: Sequence[tuple[float, float]]) -> tuple[float, float | None]:
    """The variance of a sum (or difference) of independent means, each term (its
    variance, its df), and its Welch–Satterthwaite df (None when the variance is 0)."""
    var = sum(v for v, _ in terms)
    if var == 0:
        return var, None
    return var, var**2 / sum(v**2 / df for v, df in terms)


def _two_sided(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise StatsError(f"confidence {confidence}: must be between 0 and 1")
    return 0.5 + confidence / 2.0


def mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the t interval of the mean."""
    p = _two_sided(confidence)
    s = checked(xs, "samples")
    half = float(special.stdtrit(s.n - 1, p)) * s.stdev / math.sqrt(s.n)
    return s.mean, s.mean - half, s.mean + half


# --- the ratio's interval and the verdict (ratio.py) -----------------------------------


@dataclass(frozen=True)
class RatioCI:
    ratio: float  # mean_B / mean_A
    low: float
    high: float
    method: str
    confidence: float = 0.95
    df: float | None = None  # Welch degrees of freedom; None when both sides are constant

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# the ratio B/A's interval the verdict takes: interval(a, b, confidence) (ratio.ratio_ci's)
Interval = Callable[[Sequence[float], Sequence[float], float], RatioCI]


def checked(xs: Sequence[float], what: str) -> Summary:
    if len(xs) < 2:
        raise NotEnoughSamples(f"{what}: need at least 2 boots per side, have {len(xs)}")
    if not all(math.isfinite(x) for x in xs):
        raise StatsError(f"{what}: samples must be finite numbers")
    return summarize(xs)


def boots_needed(cv: float, effect: float, confidence: float = 0.95, power: float = 0.8) -> int:
    """Boots per side (same CV both sides) to call a regression B/A = 1 - effect.

    Normal approximation on the log ratio, with the lowest df Welch can give (n - 1) so
    that the advice errs toward more boots; the simulated power is in docs/statistics.md.
    """
    if not 0.0 < effect < 1.0:
        raise StatsError(f"effect {effect}: must be between 0 and 1")
    p, log_effect = _two_sided(confidence), -math.log1p(-effect)
    for n, t in enumerate(_t_sums(p, power), start=2):
        if t * cv * math.sqrt(2 / n) <= log_effect:
            return n
    return 1000


@functools.cache
def _t_sums(p: float, power: float) -> list[float]:
    """t(p, n - 1) + t(power, n - 1) for n = 2 .. 999: boots_needed's, computed once
    (a verdict's warnings ask for them for every noisy side)."""
    df = range(1, 999)
    sums: list[float] = (special.stdtrit(df, p) + special.stdtrit(df, power)).tolist()
    return sums


@dataclass(frozen=True)
class Verdict:
    kind: str  # "regression" | "improvement" | NO_DIFFERENCE
    ratio: RatioCI
    a: Summary
    b: Summary
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """kind, ratio {ratio, low, high, method, confidence, df}, a, b, warnings."""
        return asdict(self)


def far_from_median(xs: Sequence[float], z: float = TRIM_Z) -> list[int]:
    """0-based indices of samples more than z robust standard deviations from the median:
    |x - median| / s > z, with s = MAD / 0.6745 (the modified z-score) but never below
    OUTLIER_FLOOR of the median. A trim before a fit (stats/drift.py), not a warning: it
    flags 10-28% of the sides of plain noise at n = 3-12 and CV 5-15% (a median absolute
    deviation of a few boots is often small by chance; docs/benchmarks.md "The outlier
    warning's level")."""
    if len(xs) < 3:
        return []
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    spread = max(mad / 0.6745, OUTLIER_FLOOR * abs(med))
    if spread == 0:
        return []
    return [i for i, x in enumerate(xs) if abs(x - med) / spread > z]


def _apart(xs: Sequence[float], i: int, left: Sequence[int]) -> float:
    """How far xs[i] is from the others of `left`: |x - their mean| over their standard
    deviation (never below OUTLIER_FLOOR of their mean), the externally studentized
    residual."""
    rest = [xs[j] for j in left if j != i]
    mean = statistics.fmean(rest)
    sd = max(statistics.stdev(rest), OUTLIER_FLOOR * abs(mean))
    return abs(xs[i] - mean) / sd if sd > 0 else 0.0


def outliers(xs: Sequence[float], alpha: float = OUTLIER_ALPHA) -> list[int]:
    """0-based indices of the boots the side's others call outliers, a side of normal
    noise flagged at most `alpha` of the time whatever its n and CV: the generalized ESD
    (Rosner) on the externally studentized residual. Up to r = (n - 1) // 2 times, the
    boot farthest from the rest is set aside; step k's boot, among m left, is an outlier
    when it lies beyond the prediction interval of a new boot from the other m - 1,
    t(m - 2, 1 - alpha / (2 r m)) x sqrt(1 + 1/(m - 1)) of their spread (Bonferroni over
    the m boots and the r steps). The outliers are the boots set aside up to the last step
    that passed, so two bad boots do not hide each other. The spread is never below
    OUTLIER_FLOOR of the mean: boot-to-boot noise of a few percent is normal, so a boot 4%
    off a side that agrees to 0.1% is not flagged. Three boots never flag one (one degree
    of freedom): a fixed robust z of 3.5 flagged 10-28% of the sides of plain noise."""
    n = len(xs)
    steps = (n - 1) // 2
    left, order, found = list(range(n)), [], 0
    for step in range(1, steps + 1):
        m = len(left)
        far, z = max(((i, _apart(xs, i, left)) for i in left), key=lambda p: p[1])
        t = float(special.stdtrit(m - 2, 1 - alpha / (2 * steps * m)))
        limit = t * math.sqrt(1 + 1 / (m - 1))
        if z > limit:
            found = step
        order.append(far)
        left.remove(far)
    return sorted(order[:found])
