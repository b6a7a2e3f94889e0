"""The adaptive re-check: fresh samples of the culprit and its parent, a pair at a time,
until the ratio's interval clears the minimum effect, or rules it out, or the maximum.

After each pair from `least` pairs on, the ratio culprit/parent and its interval come
from stats.ratio_ci (delta method on the log, Welch df):

- confirmed: the whole interval is beyond the minimum effect (a regression of at least
  `min_effect`: high < 1 - min_effect when higher is better);
- refuted: the whole interval is on the other side of 1 - min_effect (no regression of
  that size);
- more: neither, below `most` pairs; unclear at `most`.

Looking after every pair is up to K = most - least + 1 looks, so each look uses the
two-sided 1 - 2α/K interval (α = 1 - confidence; Bonferroni, looks.py): a
confirmation is wrong with probability at most α whenever the re-check stops. The fresh
samples are also evidence for the posterior (they were chosen by the earlier samples,
which a Bayesian update allows), so a refuted culprit sends the bisection on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kbisect.core.exceptions import UserError
from kbisect.stats import looks, means


@dataclass(frozen=True)
class Rule:
    min_effect: float = 0.02
    least: int = 3
    most: int = 10
    confidence: float = 0.95
    higher_is_better: bool = True

    def check(self) -> None:
        if not 2 <= self.least <= self.most:
            raise UserError(f"re-check pairs {self.least}..{self.most}: need 2 <= least <= most")
        if not 0.0 <= self.min_effect < 1.0:
            raise UserError(f"minimum effect {self.min_effect}: must be in [0, 1)")

    @property
    def level(self) -> float:
        """The two-sided level of each look's interval: 1 - 2α/K (looks.py: "confirmed"
        and "refuted" are one-sided claims)."""
        return looks.level(1.0 - self.confidence, self.least, self.most, one_sided=True)


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
    r = means.ratio_ci(parent, culprit, rule.level)
    # higher is better: a regression is a ratio below 1; lower is better: above 1
    edge = 1.0 - rule.min_effect if rule.higher_is_better else 1.0 / (1.0 - rule.min_effect)
    beyond = r.high < edge if rule.higher_is_better else r.low > edge
    short = r.low > edge if rule.higher_is_better else r.high < edge
    kind = "confirmed" if beyond else "refuted" if short else "more"
    if kind == "more" and n >= rule.most:
        kind = "unclear"
    return Step(kind, r.ratio, r.low, r.high, n)
