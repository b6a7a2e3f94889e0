"""The sequential compare's stopping rule (`kbisect compare --boots auto`): after each
complete pair of boots, stop when the ratio B/A is settled, else boot another pair.

At each look, with n = the boots that count on the shorter side (n >= `least`), the
ratio's interval is ratio.ratio_ci's (delta method on the log, Welch df), at the level
looks.py gives a two-sided claim over K = most - least + 1 looks (1 - α/K, α = 1 -
confidence), and:

- significant: the whole interval is beyond the minimum effect m: high < 1 - m (a
  regression of at least m, higher tps being better) or low > 1 + m (an improvement);
- equivalent: the whole interval lies within 1 ± m: no difference larger than m;
- more: neither, below `most` boots a side (or before the plan's end);
- undecided: neither, at the last look; the verdict is reported as usual.

"Significant" is a two-sided claim, the interval as a whole (the fixed compare's 95%
interval is two-sided too): whatever the true ratio and whenever the run stops, the
chance that a look's interval misses it is at most α/K, so at most α over every look;
a "significant" B/A that is not (or an "equivalent" one that is not) is at most that.
The final verdict (ratio.verdict at the same level) can call a difference the rule did
not stop for (the interval clears 1 but not 1 ± m); that claim is covered by the same α.
A look is made once per n (the caller looks when the shorter side has grown); with m = 0
"equivalent" never happens. Simulated error rates and boots: docs/statistics.md
(scripts/simulate-sequential).

Over a pool of machines (compare/sequential.py `play`, `over_pool`) the rule looks once per
round, not per pair: `at` lists the boots a side the plan has dealt after each round
that looks (every machine one more pair), K = len(at), each look at 1 - α/K (looks.py),
and the interval is the caller's (`interval`: the blocked one, stats/blocked.py, the
machine a fixed effect). The three outcomes are the same.

With a noise prior (stats/prior.py: earlier runs of the scenario on the machine) the
interval pools each side's variance with the prior's, the first look is at 2 boots a
side (K counts it), and the guard drops the prior for a run noisier than its history
(`Stop.dropped`); `reason` ends with the prior's line. Without one, nothing changes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kbisect.core.exceptions import UserError
from kbisect.stats import blocked, looks, means, ratio
from kbisect.stats import prior as priors

LEAST = 3  # boots a side before the first look: at 2 the interval is too wide to decide
MOST = 10  # the default most boots a side
SIGNIFICANT, EQUIVALENT = ratio.SIGNIFICANT, ratio.EQUIVALENT  # what an interval settles
MORE, UNDECIDED = "more", "undecided"
FINAL = (SIGNIFICANT, EQUIVALENT, UNDECIDED)


class BadStoppingRule(UserError):
    """Boots or a minimum effect no sequential compare can run with."""


@dataclass(frozen=True)
class Rule:
    min_effect: float = 0.02
    least: int = LEAST
    most: int = MOST
    confidence: float = 0.95
    # a pool's rule: the boots a side planned at each look (one look per round); empty,
    # a look at every count from least to most
    at: tuple[int, ...] = ()
    # a noise prior from earlier runs (stats/prior.py), or why none is used ("" when the
    # question was not asked: a pool, an older plan)
    prior: priors.Prior | None = None
    no_prior: str = ""

    @classmethod
    def upto(
        cls,
        most: int,
        min_effect: float = 0.02,
        confidence: float = 0.95,
        *,
        prior: priors.Prior | None = None,
        no_prior: str = "",
    ) -> Rule:
        """The rule for at most `most` boots a side: the first look at LEAST boots (with
        a noise prior, priors.LEAST), or at `most` when that is fewer."""
        least = LEAST if prior is None else priors.LEAST
        rule = cls(min_effect, min(least, most), most, confidence, (), prior, no_prior)
        rule.check()
        return rule

    def check(self) -> None:
        if not 2 <= self.least <= self.most:
            raise BadStoppingRule(
                f"sequential boots {self.least}..{self.most}: need 2 <= least <= most"
            )
        if not 0.0 <= self.min_effect < 1.0:
            raise BadStoppingRule(f"minimum effect {self.min_effect}: must be in [0, 1)")
        if not 0.0 < self.confidence < 1.0:
            raise BadStoppingRule(f"confidence {self.confidence}: must be between 0 and 1")
        at = self.at
        if at and (at[0] < self.least or at[-1] != self.most or list(at) != sorted(set(at))):
            raise BadStoppingRule(
                f"looks at {list(at)} boots a side: must rise from {self.least} or more "
                f"to {self.most}"
            )

    @property
    def looks(self) -> int:
        return len(self.at) if self.at else self.most - self.least + 1

    @property
    def level(self) -> float:
        """The two-sided level of each look's interval: 1 - α/K (looks.py)."""
        if self.at:  # K looks, one per round: looks 1..K
            return looks.level(1.0 - self.confidence, 1, len(self.at), one_sided=False)
        return looks.level(1.0 - self.confidence, self.least, self.most, one_sided=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "least": self.least,
            "max_boots": self.most,
            "min_effect": self.min_effect,
            "confidence": self.confidence,
            "looks": self.looks,
            "level": self.level,
            **({"look_at": list(self.at)} if self.at else {}),
            **({"noise_prior": self.prior_dict()} if self.prior or self.no_prior else {}),
        }

    def prior_dict(self) -> dict[str, Any]:
        """The plan's and the summary's "noise_prior": the prior, or why there is none."""
        return self.prior.as_dict() if self.prior else {"none": self.no_prior}

    def prior_line(self) -> str:
        """`noise prior: CV ...`, `noise prior: none (why)`, or "" (not asked)."""
        if self.prior is not None:
            return self.prior.line()
        return f"noise prior: none ({self.no_prior})" if self.no_prior else ""

    def interval(self, a: Sequence[float], b: Sequence[float]) -> means.Interval | None:
        """The interval with the rule's noise prior for these boots; None (ratio_ci's)
        without one or once the guard has dropped it."""
        return None if self.prior is None else with_prior(self.prior, a, b, self.least)


def with_prior(
    prior: priors.Prior, a: Sequence[float], b: Sequence[float], least: int
) -> means.Interval | None:
    """The interval with the noise prior for these boots, None once the guard has
    dropped it."""
    if priors.dropped(a, b, prior, least) is not None:
        return None
    return functools.partial(ratio.ratio_ci, prior=prior)


@dataclass(frozen=True)
class Stop:
    kind: str  # SIGNIFICANT | EQUIVALENT | MORE | UNDECIDED
    n: int  # boots that count on the shorter side
    look: int  # which look this is, 1-based (n - least + 1); 0 before the first
    ratio: means.RatioCI | None  # None before the first look
    dropped: int | None = None  # the boots a side at which the guard dropped the prior

    @property
    def final(self) -> bool:
        return self.kind in FINAL


def decide(
    a: Sequence[float],
    b: Sequence[float],
    rule: Rule,
    *,
    last: bool = False,
    interval: means.Interval | None = None,
    look: int | None = None,
) -> Stop:
    """significant | equivalent | more | undecided for the boots so far of sides A and B;
    `last`: no boot follows (the plan is done), so "more" is "undecided". A pool's look
    gives its `interval(a, b, level)` (the blocked one) and which `look` it is; an
    interval that cannot be computed (no machine measured both sides) decides nothing."""
    n = min(len(a), len(b))
    if n < rule.least:
        return Stop(UNDECIDED if last else MORE, n, look or 0, None)
    if interval is None and rule.prior is not None:
        dropped = priors.dropped(a, b, rule.prior, rule.least)
        if dropped is None:
            r = ratio.ratio_ci(a, b, rule.level, prior=rule.prior)
            return _settle(rule, n, look, r, last, None)
        return _settle(rule, n, look, ratio.ratio_ci(a, b, rule.level), last, dropped)
    try:
        r = (ratio.ratio_ci if interval is None else interval)(a, b, rule.level)
    except means.StatsError:
        if interval is None:
            raise
        return Stop(UNDECIDED if last or n >= rule.most else MORE, n, look or 0, None)
    return _settle(rule, n, look, r, last, None)


def _settle(
    rule: Rule, n: int, look: int | None, r: means.RatioCI, last: bool, dropped: int | None
) -> Stop:
    kind = ratio.settles(r, rule.min_effect) or (UNDECIDED if last or n >= rule.most else MORE)
    return Stop(kind, n, n - rule.least + 1 if look is None else look, r, dropped)


def reason(stop: Stop, rule: Rule) -> str:
    """How the run stopped, in one sentence with the numbers, and the noise prior's line
    when the rule was given one or asked for one."""
    said = _reason(stop, rule)
    if not (line := rule.prior_line()):
        return said
    if stop.dropped is not None:
        line += (
            f", dropped after {stop.dropped} boots a side: this run is noisier "
            f"(F test at {priors.GUARD * 100:g}%)"
        )
    return f"{said}; {line}"


def _reason(stop: Stop, rule: Rule) -> str:
    r, m = stop.ratio, f"{rule.min_effect * 100:g}%"
    how = (
        f"(sequential: {rule.confidence * 100:g}% over up to {rule.looks} "
        f"look{'s' * (rule.looks > 1)}, each at {rule.level * 100:.4g}%)"
    )
    if r is None:
        return f"stopped with {stop.n} boots a side, too few for a look: undecided {how}"
    within = " within machines" if r.method == blocked.METHOD else ""
    ci = f"the {rule.level * 100:.4g}% CI{within} [{r.low:.3f}, {r.high:.3f}]"
    after = f"after {stop.n} boot{'s' * (stop.n > 1)} a side (look {stop.look})"
    if stop.kind == SIGNIFICANT:
        return f"stopped {after}: {ci} clears the {m} minimum effect {how}"
    if stop.kind == EQUIVALENT:
        return f"stopped {after}: {ci} lies within ±{m}: no difference larger than {m} {how}"
    return (
        f"undecided {after}: {ci} neither clears the {m} minimum effect nor lies within ±{m} {how}"
    )


def as_dict(stop: Stop, rule: Rule) -> dict[str, Any]:
    """summary.json's "sequential": the rule, how it stopped and why."""
    return {
        **rule.as_dict(),
        "stop": stop.kind,
        "n": stop.n,
        "look": stop.look,
        "reason": reason(stop, rule),
        **({"prior_dropped": stop.dropped} if stop.dropped is not None else {}),
    }
