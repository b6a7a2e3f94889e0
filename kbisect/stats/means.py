"""Summaries, Student t, the ratio of two means with its interval, and the A/B verdict.

Samples are tps figures, one per boot; boots are independent and the two sides may have
different spreads.

Ratio interval (`ratio_ci`): the delta method on log(mean_B / mean_A). The standard error
of the log ratio is sqrt(cv_A²/n_A + cv_B²/n_B) (the relative standard errors of the two
means), its degrees of freedom come from Welch–Satterthwaite on those two terms, and the
interval is exp(log r ± t·se). On the log scale the interval stays positive and finite
even with 2 boots per side (Fieller's interval can be unbounded there), and A/B is exactly
the reciprocal of B/A. Coverage, false positives and power are simulated in
docs/statistics.md (scripts/simulate-stats).

Student t quantiles: scipy.stats.t.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import scipy.stats

from kbisect.core.exceptions import UserError

METHOD = "delta-log-welch"
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


def welch_df(v_a: float, n_a: int, v_b: float, n_b: int) -> float:
    """Welch–Satterthwaite degrees of freedom for two variance-of-the-mean terms."""
    return (v_a + v_b) ** 2 / (v_a**2 / (n_a - 1) + v_b**2 / (n_b - 1))


def _two_sided(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise StatsError(f"confidence {confidence}: must be between 0 and 1")
    return 0.5 + confidence / 2.0


def mean_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the t interval of the mean."""
    p = _two_sided(confidence)
    s = _checked(xs, "samples")
    half = float(scipy.stats.t.ppf(p, s.n - 1)) * s.stdev / math.sqrt(s.n)
    return s.mean, s.mean - half, s.mean + half


def welch_ci(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """(mean_B - mean_A, low, high): Welch's interval for a difference of means."""
    p = _two_sided(confidence)
    sa, sb = _checked(a, "side A"), _checked(b, "side B")
    va, vb = sa.stdev**2 / sa.n, sb.stdev**2 / sb.n
    diff = sb.mean - sa.mean
    if va + vb == 0:
        return diff, diff, diff
    half = float(scipy.stats.t.ppf(p, welch_df(va, sa.n, vb, sb.n))) * math.sqrt(va + vb)
    return diff, diff - half, diff + half


# --- ratio and verdict -----------------------------------------------------------------


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


# an interval other than ratio_ci's for the ratio B/A: interval(a, b, confidence)
Interval = Callable[[Sequence[float], Sequence[float], float], RatioCI]


def _checked(xs: Sequence[float], what: str) -> Summary:
    if len(xs) < 2:
        raise NotEnoughSamples(f"{what}: need at least 2 boots per side, have {len(xs)}")
    if not all(math.isfinite(x) for x in xs):
        raise StatsError(f"{what}: samples must be finite numbers")
    return summarize(xs)


def ratio_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> RatioCI:
    """Ratio of means B/A with its interval (delta method on the log, Welch df)."""
    return _ratio(_checked(a, "side A"), _checked(b, "side B"), confidence)


def _ratio(sa: Summary, sb: Summary, confidence: float) -> RatioCI:
    p = _two_sided(confidence)
    if sa.mean <= 0 or sb.mean <= 0:
        raise StatsError(f"ratio of means needs positive means (A {sa.mean:g}, B {sb.mean:g})")
    ratio = sb.mean / sa.mean
    va, vb = sa.cv**2 / sa.n, sb.cv**2 / sb.n
    if va + vb == 0:
        return RatioCI(ratio, ratio, ratio, METHOD, confidence, None)
    df = welch_df(va, sa.n, vb, sb.n)
    half = float(scipy.stats.t.ppf(p, df)) * math.sqrt(va + vb)
    return RatioCI(ratio, ratio * math.exp(-half), ratio * math.exp(half), METHOD, confidence, df)


def boots_needed(cv: float, effect: float, confidence: float = 0.95, power: float = 0.8) -> int:
    """Boots per side (same CV both sides) to call a regression B/A = 1 - effect.

    Normal approximation on the log ratio, with the lowest df Welch can give (n - 1) so
    that the advice errs toward more boots; the simulated power is in docs/statistics.md.
    """
    if not 0.0 < effect < 1.0:
        raise StatsError(f"effect {effect}: must be between 0 and 1")
    p, log_effect = _two_sided(confidence), -math.log1p(-effect)
    for n in range(2, 1000):
        df = n - 1
        t = float(scipy.stats.t.ppf(p, df) + scipy.stats.t.ppf(power, df))
        if t * cv * math.sqrt(2 / n) <= log_effect:
            return n
    return 1000


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
        t = float(scipy.stats.t.ppf(1 - alpha / (2 * steps * m), m - 2))
        limit = t * math.sqrt(1 + 1 / (m - 1))
        if z > limit:
            found = step
        order.append(far)
        left.remove(far)
    return sorted(order[:found])


def _side_warnings(
    name: str,
    xs: Sequence[float],
    s: Summary,
    flag: str,
    where: str = "",
    index: Sequence[int] | None = None,
) -> list[str]:
    """A side's CV and outlier warnings; `where` (" on m1") and `index` (each x's place
    among the side's boots) for the boots of one block of a side."""
    out = []
    if s.cv > HIGH_CV:
        n = boots_needed(s.cv, REFERENCE_EFFECT)
        out.append(
            f"side {name}{where}: CV {s.cv * 100:.1f}% is high: add boots "
            f"({flag} {n} detects a {REFERENCE_EFFECT:.0%} regression at 80% power)"
        )
    for i in outliers(xs):
        j = i if index is None else index[i]
        out.append(
            f"side {name} boot {j + 1} ({xs[i]:.1f} tps){where} is an outlier: "
            "check its fingerprint"
        )
    return out


def _blocked_warnings(
    name: str, xs: Sequence[float], blocks: Sequence[str], flag: str
) -> list[str]:
    """A side's warnings within each block (a pool's machine), blocks in order of first
    boot: a spread between blocks is theirs (a machine effect), not noise."""
    out = []
    for block in dict.fromkeys(blocks):
        index = [i for i, b in enumerate(blocks) if b == block]
        mine = [xs[i] for i in index]
        out += _side_warnings(name, mine, summarize(mine), flag, f" on {block}", index)
    return out


def verdict(
    a: Sequence[float],
    b: Sequence[float],
    *,
    min_effect: float = 0.02,
    confidence: float = 0.95,
    higher_is_better: bool = True,
    boots_flag: str = "--boots",
    planned: int | None = None,
    interval: Interval | None = None,
    blocks: tuple[Sequence[str], Sequence[str]] | None = None,
) -> Verdict:
    """Regression, improvement, or no significant difference, for B against A.
    `boots_flag` is the option the warnings tell the user to raise for more boots;
    `planned`, the boots per side asked for (when samples were left out, fewer count,
    and asking for more would not help); `interval(a, b, confidence)`, the ratio's
    interval when not ratio_ci's (the bisect gate's robust one, robust.py); `blocks`,
    each boot's block per side (a pool's machine: compare/machines.py), the CV and
    outlier warnings then computed within each block."""
    sa, sb = _checked(a, "side A"), _checked(b, "side B")
    r = _ratio(sa, sb, confidence) if interval is None else interval(a, b, confidence)
    significant = r.low > 1.0 or r.high < 1.0
    kind = NO_DIFFERENCE
    if significant and abs(r.ratio - 1.0) >= min_effect:
        kind = "regression" if (r.ratio < 1.0) == higher_is_better else "improvement"
    if blocks is None:
        warnings = _side_warnings("A", a, sa, boots_flag) + _side_warnings("B", b, sb, boots_flag)
    else:
        warnings = _blocked_warnings("A", a, blocks[0], boots_flag)
        warnings += _blocked_warnings("B", b, blocks[1], boots_flag)
    if (min(sa.n, sb.n) if planned is None else planned) < FEW_BOOTS:
        warnings.append(
            f"{sa.n} boots on side A and {sb.n} on side B: the interval is wide "
            f"below {FEW_BOOTS} per side: use {boots_flag} {FEW_BOOTS} or more"
        )
    if significant and kind == NO_DIFFERENCE:
        warnings.append(
            f"B/A = {r.ratio:.3f}x is statistically significant but below "
            f"--min-effect {min_effect * 100:g}%: reported as no significant "
            "difference"
        )
    return Verdict(kind, r, sa, sb, warnings)
