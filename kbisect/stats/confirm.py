"""The adaptive re-check: fresh samples of the culprit and its parent, a pair at a time,
until the ratio's interval clears the minimum effect, or rules it out, or the maximum.

At each complete pair from `least` pairs on, the ratio culprit/parent and its interval
come from robust.py (the two sides' core levels on the log scale, an outlier boot set
apart, each side its own noise, Welch df on the effective sample sizes):

- confirmed: the whole interval is beyond the minimum effect (a regression of at least
  `min_effect`: high < 1 - min_effect when higher is better);
- refuted: the whole interval is on the other side of 1 - min_effect (no regression of
  that size);
- more: neither, below `most` pairs; unclear at `most`.

Looking once per pair count is K = most - least + 1 looks (the caller, recheck.py, asks
only when a pair is complete), so each look uses the two-sided 1 - 2α/K interval
(α = 1 - confidence; Bonferroni, looks.py): a confirmation is wrong with probability at
most α whenever the re-check stops. The fresh
samples are also evidence for the posterior (they were chosen by the earlier samples,
which a Bayesian update allows), so a refuted culprit sends the bisection on.

A step confirmed is not yet the answer: `explains` asks whether it accounts for the
endpoints' difference. With S the step's log ratio culprit/parent and E the endpoints'
log ratio bad/good, both measured in the direction of the endpoints' change (so E > 0),
the unexplained part is D = S - E, its interval Welch's on the two independent estimates
at level 1 - 2α (each end a one-sided claim at α, as above):

- partial: D is wholly below -m (m = -log(1 - min_effect)): the step is significantly
  smaller than the endpoints' difference, by more than the minimum effect: the rest is
  elsewhere in the range;
- excess: D is wholly above m: the step is larger, something else in the range gave part
  of it back;
- full: D lies wholly within ±max(m, REST·E): the step accounts for the difference up to
  the minimum effect, or up to REST of it when the samples cannot resolve finer (a second
  step half the size of the whole is never called full, save by the interval's α);
- unclear: none of these (the samples are too few to tell).

The numbers: the share S/E of the endpoints' log difference the step explains, with
Fieller's interval for a ratio of two estimates (None when E itself is not clear of 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy import special

from kbisect.core.exceptions import UserError
from kbisect.stats import looks, ratio, robust

REST = 0.5  # the share of the endpoints' difference a "full" step may leave unexplained


@dataclass(frozen=True)
class Rule:
    min_effect: float = 0.02
    least: int = 3
    most: int = 10
    confidence: float = 0.95
    higher_is_better: bool = True
    # pairs between two looks: 1 on one machine; over a pool of k machines the re-check
    # draws k/2 pairs a round and looks once per round (bisect/posterior/search.py)
    every: int = 1

    def check(self) -> None:
        if not 2 <= self.least <= self.most:
            raise UserError(f"re-check pairs {self.least}..{self.most}: need 2 <= least <= most")
        if not 0.0 <= self.min_effect < 1.0:
            raise UserError(f"minimum effect {self.min_effect}: must be in [0, 1)")

    @property
    def level(self) -> float:
        """The two-sided level of each look's interval: 1 - 2α/K (looks.py: "confirmed"
        and "refuted" are one-sided claims). K: the looks from `least` pairs to `most`,
        `every` pairs apart (the last at `most`); at most most - least + 1."""
        looks_k = looks.count(self.least, self.most, self.every)
        return looks.level(1.0 - self.confidence, 1, looks_k, one_sided=True)


@dataclass(frozen=True)
class Step:
    kind: str  # "confirmed" | "refuted" | "more" | "unclear"
    ratio: float | None  # culprit / parent
    low: float | None
    high: float | None
    n: int  # pairs so far

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(parent: Sequence[float], culprit: Sequence[float], rule: Rule) -> Step:
    """confirmed | refuted | more | unclear for the fresh samples so far."""
    n = min(len(parent), len(culprit))
    if n < rule.least:
        return Step("more", None, None, None, n)
    r = ratio.ratio_ci(parent, culprit, rule.level, robust=True)
    # higher is better: a regression is a ratio below 1; lower is better: above 1
    edge = 1.0 - rule.min_effect if rule.higher_is_better else 1.0 / (1.0 - rule.min_effect)
    beyond = r.high < edge if rule.higher_is_better else r.low > edge
    short = r.low > edge if rule.higher_is_better else r.high < edge
    kind = "confirmed" if beyond else "refuted" if short else "more"
    if kind == "more" and n >= rule.most:
        kind = "unclear"
    return Step(kind, r.ratio, r.low, r.high, n)


@dataclass(frozen=True)
class Explanation:
    kind: str  # "full" | "partial" | "excess" | "unclear"
    share: float | None  # the step's share of the endpoints' log difference
    share_low: float | None  # Fieller's interval; None when unbounded
    share_high: float | None
    step: float  # ratio culprit / parent
    ends: float  # ratio bad / good
    rest: float  # the ratio left unexplained: ends / step
    rest_low: float  # its interval
    rest_high: float
    level: float  # the two-sided level of the intervals

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def explains(step: robust.Estimate, ends: robust.Estimate, rule: Rule) -> Explanation:
    """Whether the step culprit/parent accounts for the endpoints' bad/good (module
    docstring): full | partial | excess | unclear, with the share and the rest."""
    level = 1.0 - 2.0 * (1.0 - rule.confidence)
    sign = 1.0 if ends.log_ratio >= 0 else -1.0
    size_s, size_e = sign * step.log_ratio, sign * ends.log_ratio
    vs, ve = step.se**2, ends.se**2
    d = size_s - size_e
    if vs + ve > 0:
        df = (vs + ve) ** 2 / (vs**2 / (step.df or math.inf) + ve**2 / (ends.df or math.inf))
        q = float(special.stdtrit(df, 0.5 + level / 2.0))
    else:
        q = 0.0
    low, high = d - q * math.sqrt(vs + ve), d + q * math.sqrt(vs + ve)
    m = -math.log1p(-rule.min_effect)
    tolerance = max(m, REST * size_e)
    if high < -m:
        kind = "partial"
    elif low > m:
        kind = "excess"
    elif size_e > 0 and -tolerance < low and high < tolerance:
        kind = "full"
    else:
        kind = "unclear"
    share, share_low, share_high = _fieller(size_s, vs, size_e, ve, q)
    rest = [math.exp(-sign * x) for x in (d, low, high)]  # ends / step, as a ratio
    return Explanation(
        kind,
        share,
        share_low,
        share_high,
        step.ratio,
        ends.ratio,
        rest[0],
        min(rest[1:]),
        max(rest[1:]),
        level,
    )


def _fieller(
    s: float, vs: float, e: float, ve: float, q: float
) -> tuple[float | None, float | None, float | None]:
    """s/e with Fieller's interval at the quantile q: every θ with (s - θe)² <= q²(vs +
    θ²ve); (None, None) for the interval when e is not clear of 0 (it is unbounded)."""
    if e == 0:
        return None, None, None
    a = e * e - q * q * ve
    if a <= 0:
        return s / e, None, None
    half = math.sqrt(max(s * s * e * e - a * (s * s - q * q * vs), 0.0))
    return s / e, (s * e - half) / a, (s * e + half) / a
