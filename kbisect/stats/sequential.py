"""One bisect step's sampling rule: is this commit good, bad, or does it need another boot?

After each boot the t interval of the mean tps is compared with the threshold: wholly on
the good side → "good", wholly on the bad side → "bad", otherwise boot again ("more")
until `runs_max` boots, then "unclear" (bisect maps it to skip, exit 125).

Multiple looks: deciding after boot 3, 4, ..., 10 is up to 8 looks at the data, and
stopping at the first look whose interval clears the threshold makes a plain interval
wrong far more often than it says. So the error is split over the looks (Bonferroni):
"good" claims the true mean is above the threshold, a one-sided claim, and with
K = runs_max - runs_min + 1 looks each look tests it at level α/K, α = 1 - confidence;
the same for "bad". The interval shown is the two-sided 1 - 2α/K one whose ends are those
one-sided bounds (98.75% for 95% over 8 looks). Whatever the true mean and whenever the
step stops, it ends on the wrong one of good/bad with probability at most α (under normal
boot-to-boot noise). Simulated error rates and sample counts are in docs/statistics.md
(scripts/simulate-stats).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kbisect.core.exceptions import UserError
from kbisect.stats import looks, means


class BadSequentialSettings(UserError):
    """runs_min/runs_max/confidence that cannot make a decision."""


@dataclass(frozen=True)
class Decision:
    verdict: str  # "good" | "bad" | "more" | "unclear"
    reason: str  # one log-ready line with the numbers
    mean: float  # nan without samples
    low: float  # -inf/+inf with fewer than 2 samples
    high: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: non-finite numbers become null."""
        return {
            k: v if not isinstance(v, float) or math.isfinite(v) else None
            for k, v in asdict(self).items()
        }


def per_look_level(confidence: float, runs_min: int, runs_max: int) -> float:
    """The two-sided level of each look's interval: 1 - 2α/K (looks.py: "good" and "bad"
    are one-sided claims)."""
    if not 0.0 < confidence < 1.0:
        raise BadSequentialSettings(f"confidence {confidence}: must be between 0 and 1")
    if runs_min < 2:
        raise BadSequentialSettings(f"runs_min {runs_min}: need at least 2 boots for an interval")
    if runs_max < runs_min:
        raise BadSequentialSettings(f"runs_max {runs_max} is below runs_min {runs_min}")
    return looks.level(1.0 - confidence, runs_min, runs_max, one_sided=True)


def decide(
    samples: Sequence[float],
    threshold: float,
    *,
    higher_is_better: bool = True,
    runs_min: int = 3,
    runs_max: int = 10,
    confidence: float = 0.95,
    unit: str = "tps",
) -> Decision:
    """good | bad | more | unclear for the samples of one commit against `threshold`."""
    level = per_look_level(confidence, runs_min, runs_max)
    n = len(samples)
    if n < runs_min:
        mean = math.fsum(samples) / n if n else math.nan
        low, high = means.mean_ci(samples, level)[1:] if n >= 2 else (-math.inf, math.inf)
        so_far = f" (mean {mean:.1f} {unit})" if n else ""
        reason = f"{n} of at least {runs_min} samples{so_far}: more"
        return Decision("more", reason, mean, low, high, n)
    mean, low, high = means.mean_ci(samples, level)
    above, below = low > threshold, high < threshold
    where = "wholly above" if above else "wholly below" if below else "contains"
    if above or below:
        verdict = "good" if above == higher_is_better else "bad"
    else:
        verdict = "unclear" if n >= runs_max else "more"
    k = runs_max - runs_min + 1
    reason = (
        f"mean {mean:.1f} {unit}, {level * 100:.4g}% CI [{low:.1f}, {high:.1f}] "
        f"(one-sided {confidence * 100:g}% over {k} look{'s' * (k > 1)}) {where} "
        f"threshold {threshold:.1f} after {n} of at most {runs_max} samples: {verdict}"
    )
    return Decision(verdict, reason, mean, low, high, n)
