"""Variance components of tps: within a boot (run to run) and between boots.

A boot's sample is the mean of its r measured runs. With run-to-run variance s_w² inside
a boot and boot-to-boot variance s_b² of the boots' true levels (one-way random effects),

    Var(boot mean) = s_b² + s_w²/r.

From boots with r_i runs each: s_w² is the pooled variance of runs around their boot's
mean; s_b² = Var(boot means) - s_w²·mean(1/r_i), floored at 0 (the usual ANOVA
estimator). A boot costs c_boot (boot, PostgreSQL start, warm-up) plus r·c_run; the
variance of the final mean per unit of time, (c_boot + r·c_run)·(s_b² + s_w²/r), is
smallest at r* = sqrt(c_boot·s_w² / (c_run·s_b²)): when boots dominate the noise (s_b²
large) one run per boot and more boots buy more per minute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kbisect.core.exceptions import UserError


@dataclass(frozen=True)
class Components:
    within: float  # variance of one run around its boot's level (tps²)
    between: float  # variance of the boots' levels (tps²)
    boots: int
    runs: int  # runs in all
    mean: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def per_minute(self, runs_per_boot: int, boot_s: float, run_s: float) -> float:
        """Variance of a boot mean times the minutes a boot takes (lower buys more per
        minute: the variance of a mean over m minutes of such boots is this / m)."""
        var_boot = self.between + self.within / runs_per_boot
        return var_boot * (boot_s + runs_per_boot * run_s) / 60.0

    def best_runs(self, boot_s: float, run_s: float) -> float:
        """r* above (infinite when boots add no variance of their own)."""
        if self.between <= 0:
            return math.inf
        return math.sqrt(boot_s * self.within / (run_s * self.between))


def components(boots: Sequence[Sequence[float]]) -> Components:
    """The decomposition from the runs' tps of each boot (boots with one run count only
    toward the spread of boot means)."""
    usable = [list(b) for b in boots if b]
    if len(usable) < 2 or not any(len(b) > 1 for b in usable):
        raise UserError("variance components need 2 boots and a boot with 2 runs or more")
    means = [math.fsum(b) / len(b) for b in usable]
    ss_within = math.fsum((x - m) ** 2 for b, m in zip(usable, means, strict=True) for x in b)
    df_within = sum(len(b) - 1 for b in usable)
    within = ss_within / df_within
    grand = math.fsum(means) / len(means)
    var_means = math.fsum((m - grand) ** 2 for m in means) / (len(means) - 1)
    inv_r = math.fsum(1.0 / len(b) for b in usable) / len(usable)
    between = max(0.0, var_means - within * inv_r)
    return Components(within, between, len(usable), sum(len(b) for b in usable), grand)
