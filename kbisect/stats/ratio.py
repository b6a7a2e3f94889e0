"""The ratio B/A of two groups' typical tps with its interval, one function for every
caller (`ratio_ci`), and the A/B verdict on it (`verdict`).

Each estimate gives the log ratio, its standard error and degrees of freedom, and the
interval is ratio·exp(±t·se) at the confidence: on the log scale it stays positive and
finite even with 2 boots per side (Fieller's interval can be unbounded there), and A/B is
exactly the reciprocal of B/A. The estimate is chosen by `ratio_ci`'s options:

- none (Welch's): the delta method on log(mean_B / mean_A). The standard error of the
  log ratio is sqrt(cv_A²/n_A + cv_B²/n_B) (the relative standard errors of the two
  means), its df Welch–Satterthwaite's on those two terms (means.welch: any number
  of independent means, as a study's ratio of ratios of four). Coverage, false positives
  and power are simulated in docs/statistics.md (scripts/simulate-stats).
- `machines`: each boot's machine per side: B/A within machines, the machine a fixed
  effect (blocked.py).
- `prior`: each side's variance pooled with earlier runs' noise (prior.py); Welch's
  when the pooled variance is 0.
- `robust`: the two groups' outlier-robust mixture fits (robust.py).

`restored` is the share of a gap a change gives back: (log R - log B) / (log G - log B),
the ratio of two of these log ratios over the same B (a revert R of a culprit on the bad
kernel B, the good kernel G), its interval by the delta method on the three means.

`interval` is the same last step for an estimate made elsewhere (a contrast of a study's
fit); `p_value`, the two-sided p of "no change" of the same estimate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace

from scipy import special

from kbisect.stats import blocked, means
from kbisect.stats import prior as priors
from kbisect.stats import robust as robusts

METHOD = "delta-log-welch"

# (B/A, log(B/A), its standard error, df: None when both sides are constant, method)
Estimate = tuple[float, float, float, float | None, str]


def _estimate(
    a: Sequence[float],
    b: Sequence[float],
    machines: tuple[Sequence[str], Sequence[str]] | None,
    prior: priors.Prior | None,
    robust: bool,
) -> Estimate:
    if robust:
        e = robusts.estimate(a, b)
        return e.ratio, e.log_ratio, e.se, e.df, robusts.METHOD
    if machines is not None:
        delta, se, residual = blocked.log_effect(a, b, *machines)
        return math.exp(delta), delta, se, float(residual), blocked.METHOD
    sa, sb = means.checked(a, "side A"), means.checked(b, "side B")
    if sa.mean <= 0 or sb.mean <= 0:
        raise means.StatsError(
            f"ratio of means needs positive means (A {sa.mean:g}, B {sb.mean:g})"
        )
    ratio = sb.mean / sa.mean
    if prior is not None:
        v, pooled_df = priors.parts(sa, sb, prior.df, prior.var)
        if v != 0:
            return ratio, math.log(ratio), math.sqrt(v), pooled_df, priors.METHOD
    var, df = means.welch([(sa.cv**2 / sa.n, sa.n - 1), (sb.cv**2 / sb.n, sb.n - 1)])
    return ratio, math.log(ratio), math.sqrt(var), df, METHOD


def ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = 0.95,
    *,
    machines: tuple[Sequence[str], Sequence[str]] | None = None,
    prior: priors.Prior | None = None,
    robust: bool = False,
) -> means.RatioCI:
    """B/A with its interval at `confidence` (module docstring): Welch's; within
    `machines` (each boot's machine, side A's and side B's); with a noise `prior`; or
    `robust` to outlier boots."""
    ratio, _, se, df, method = _estimate(a, b, machines, prior, robust)
    return interval(ratio, se, df, confidence, method)


# ratio_ci robust to outlier boots, as the verdict's `interval` (bisect's endpoint check
# and re-checks)
ROBUST: means.Interval = functools.partial(ratio_ci, robust=True)


def p_value(
    a: Sequence[float],
    b: Sequence[float],
    *,
    machines: tuple[Sequence[str], Sequence[str]] | None = None,
) -> float:
    """The two-sided p of "no change" of ratio_ci's estimate."""
    _, log_ratio, se, df, _ = _estimate(a, b, machines, None, False)
    if se == 0 or df is None:
        return 1.0 if log_ratio == 0 else 0.0
    return min(1.0, 2 * float(special.stdtr(df, -abs(log_ratio) / se)))


def interval(
    ratio: float, se: float, df: float | None, confidence: float, method: str
) -> means.RatioCI:
    """`ratio` and its interval ratio·exp(±t·se) at `confidence`, t on `df`; a point
    when se is 0."""
    if not 0.0 < confidence < 1.0:
        raise means.StatsError(f"confidence {confidence}: must be between 0 and 1")
    if se == 0 or df is None:
        return means.RatioCI(ratio, ratio, ratio, method, confidence, df)
    half = float(special.stdtrit(df, 0.5 + confidence / 2.0)) * se
    return means.RatioCI(
        ratio, ratio * math.exp(-half), ratio * math.exp(half), method, confidence, df
    )


SIGNIFICANT, EQUIVALENT = "significant", "equivalent"


def settles(r: means.RatioCI, min_effect: float) -> str | None:
    """What the interval settles, which more boots would not change: SIGNIFICANT, wholly
    beyond 1 ± m (a change of at least m); EQUIVALENT, m > 0 and wholly within it (no
    change as large); None, neither (stats/stopping.py's rule stops at the first two)."""
    m = min_effect
    if r.high < 1.0 - m or r.low > 1.0 + m:
        return SIGNIFICANT
    return EQUIVALENT if m > 0 and 1.0 - m < r.low and r.high < 1.0 + m else None


RESTORED_METHOD = "share-of-log-gap-delta-welch"


def restored(
    good: Sequence[float],
    bad: Sequence[float],
    changed: Sequence[float],
    confidence: float = 0.95,
    *,
    robust: bool = False,
) -> means.RatioCI:
    """The share of the good-to-bad gap that `changed` (the bad kernel with one change,
    a revert) gives back: log(changed/bad) / log(good/bad), 1 all of it, 0 none, with a t
    interval at `confidence` (the delta method on the three log levels, each its own
    standard error, the bad side shared by both log ratios; Welch–Satterthwaite's df). A
    side's level is the log of its mean (variance cv²/n), or `robust`: its core level, an
    outlier boot set apart (robust.fit). In a RatioCI: `ratio` is the share."""
    g, b, c = _levels((good, bad, changed), ("good", "bad", "changed"), robust)
    gap = g[0] - b[0]
    if gap == 0:
        raise means.StatsError("good and bad have the same mean: no gap to restore")
    share = (c[0] - b[0]) / gap
    # d share / d log level of changed, good, bad: 1/gap, -share/gap, (share - 1)/gap
    weights = ((c, 1.0), (g, -share), (b, share - 1.0))
    var, df = means.welch([((w / gap) ** 2 * side[1], side[2]) for side, w in weights])
    method = RESTORED_METHOD + ("-robust" if robust else "")
    if var == 0 or df is None:
        return means.RatioCI(share, share, share, method, confidence, df)
    half = float(special.stdtrit(df, 0.5 + confidence / 2.0)) * math.sqrt(var)
    return means.RatioCI(share, share - half, share + half, method, confidence, df)


def at(ci: means.RatioCI, confidence: float) -> means.RatioCI:
    """A symmetric t interval (restored's) at another confidence, from its own df: no fit
    again."""
    if ci.df is None or ci.high == ci.low:
        return replace(ci, confidence=confidence)
    t = [float(special.stdtrit(ci.df, 0.5 + c / 2.0)) for c in (ci.confidence, confidence)]
    half = (ci.high - ci.low) / 2.0 * t[1] / t[0]
    return replace(ci, low=ci.ratio - half, high=ci.ratio + half, confidence=confidence)


def _levels(
    sides: Sequence[Sequence[float]], names: Sequence[str], robust: bool
) -> list[tuple[float, float, float]]:
    """Each side's log level, its variance and its df (restored's): robust, the sides'
    core levels fitted together (robust.fit_tied: one side alone cannot tell an outlier
    from a wide spread)."""
    if robust:
        return [(f.mu, f.se**2, f.df) for f in robusts.fit_tied(sides, names)]
    out = []
    for xs, what in zip(sides, names, strict=True):
        s = means.checked(xs, what)
        if s.mean <= 0:
            raise means.StatsError("the share restored needs positive means")
        out.append((math.log(s.mean), s.cv**2 / s.n, float(s.n - 1)))
    return out


def _side_warnings(
    name: str,
    xs: Sequence[float],
    s: means.Summary,
    flag: str | None,
    where: str = "",
    index: Sequence[int] | None = None,
) -> list[str]:
    """A side's CV and outlier warnings (no CV one without a `flag` to raise); `where`
    (" on m1") and `index` (each x's place among the side's boots) for the boots of one
    block of a side."""
    out = []
    if flag and s.cv > means.HIGH_CV:
        n = means.boots_needed(s.cv, means.REFERENCE_EFFECT)
        out.append(
            f"side {name}{where}: CV {s.cv * 100:.1f}% is high: add boots "
            f"({flag} {n} detects a {means.REFERENCE_EFFECT:.0%} regression at 80% power)"
        )
    for i in means.outliers(xs):
        j = i if index is None else index[i]
        out.append(
            f"side {name} boot {j + 1} ({xs[i]:.1f} tps){where} is an outlier: "
            "check its fingerprint"
        )
    return out


def _blocked_warnings(
    name: str, xs: Sequence[float], blocks: Sequence[str], flag: str | None
) -> list[str]:
    """A side's warnings within each block (a pool's machine), blocks in order of first
    boot: a spread between blocks is theirs (a machine effect), not noise."""
    out = []
    for block in dict.fromkeys(blocks):
        index = [i for i, b in enumerate(blocks) if b == block]
        mine = [xs[i] for i in index]
        out += _side_warnings(name, mine, means.summarize(mine), flag, f" on {block}", index)
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
    interval: means.Interval | None = None,
    blocks: tuple[Sequence[str], Sequence[str]] | None = None,
    settled_asks: bool = True,
) -> means.Verdict:
    """Regression, improvement, or no significant difference, for B against A.
    `boots_flag` is the option the warnings tell the user to raise for more boots;
    `planned`, the boots per side asked for (when samples were left out, fewer count,
    and asking for more would not help); `interval(a, b, confidence)`, the ratio's
    interval when not Welch's ratio_ci (the bisect gate's robust one); `blocks`,
    each boot's block per side (a pool's machine: compare/machines.py), the CV and
    outlier warnings then computed within each block; `settled_asks` False: no warning
    asks for boots once the interval settles the question (`settles`: a compare's)."""
    sa, sb = means.checked(a, "side A"), means.checked(b, "side B")
    r = ratio_ci(a, b, confidence) if interval is None else interval(a, b, confidence)
    significant = r.low > 1.0 or r.high < 1.0
    kind = means.NO_DIFFERENCE
    if significant and abs(r.ratio - 1.0) >= min_effect:
        kind = "regression" if (r.ratio < 1.0) == higher_is_better else "improvement"
    flag = boots_flag if settled_asks or settles(r, min_effect) is None else None
    if blocks is None:
        warnings = _side_warnings("A", a, sa, flag) + _side_warnings("B", b, sb, flag)
    else:
        warnings = _blocked_warnings("A", a, blocks[0], flag)
        warnings += _blocked_warnings("B", b, blocks[1], flag)
    if flag and (min(sa.n, sb.n) if planned is None else planned) < means.FEW_BOOTS:
        warnings.append(
            f"{sa.n} boots on side A and {sb.n} on side B: the interval is wide "
            f"below {means.FEW_BOOTS} per side: use {boots_flag} {means.FEW_BOOTS} or more"
        )
    if significant and kind == means.NO_DIFFERENCE:
        warnings.append(
            f"B/A = {r.ratio:.3f}x is statistically significant but below "
            f"--min-effect {min_effect * 100:g}%: reported as no significant "
            "difference"
        )
    return means.Verdict(kind, r, sa, sb, warnings)
