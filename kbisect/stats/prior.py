"""A noise prior for the sequential compare: what earlier runs of the same scenario on
the same machine say about the boot-to-boot noise, used as a prior for each side's
within-side variance of log tps (docs/statistics.md "A noise prior").

The prior is s0² (the pooled within-side variance of log tps of earlier runs: each
boot's log tps less its run-side's mean, squared, summed, over Σ(n_i - 1)) weighted as
ν0 = Σ(n_i - 1) degrees of freedom, capped at CAP. At each look a side's variance is
(ν0 s0² + (n - 1) c²)/(ν0 + n - 1), c² the side's own squared CV (the delta method's
variance of log tps, as ratio.ratio_ci), and the ratio's interval has the
Welch–Satterthwaite df of three independent parts: the prior (ν0 df, shared by both
sides) and each side's own sum of squares (n - 1 df), computed by ratio.ratio_ci. With
ν0 = 0 it is Welch's.

The guard: a host noisier now than in its history makes s0² too small and the interval
too narrow. At each look the run's own pooled variance is F-tested against s0² (df
n_A + n_B - 2 against the prior's uncapped df); once it is above at level GUARD the
prior is dropped for the rest of the run (`dropped`: the test is replayed over the
looks' prefixes, so a resumed run or a report finds the same look).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy import special

from kbisect.stats import means

CAP = 8  # the most df the prior weighs: ν0/(ν0 + n - 1) of a side's variance, 89% at
# 2 boots a side, under half at 10 (docs/statistics.md "A noise prior from earlier runs")
GUARD = 0.05  # the F test's level that drops the prior for a run noisier than it (simulated:
# docs/benchmarks.md "A noise prior")
METHOD = "delta-log-welch-prior"
LEAST = 2  # with a prior the first look is at 2 boots a side (docs/benchmarks.md)


@dataclass(frozen=True)
class Prior:
    """s0² (`var`), its weight ν0 (`df`, capped) and the uncapped df it was pooled over
    (`pooled_df`, the guard's), from `boots` boots of `runs` earlier runs (`source`:
    where they were read)."""

    var: float
    df: int
    pooled_df: int
    boots: int
    runs: int
    source: str = ""

    @property
    def cv(self) -> float:
        return math.sqrt(self.var)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cv": self.cv}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Prior:
        return cls(
            float(d["var"]),
            int(d["df"]),
            int(d["pooled_df"]),
            int(d["boots"]),
            int(d["runs"]),
            str(d.get("source") or ""),
        )

    def line(self) -> str:
        """`noise prior: CV 10.2% over ν0 = 8 df from 40 boots of 4 earlier runs`."""
        runs = f"{self.runs} earlier run{'s' * (self.runs != 1)}"
        return (
            f"noise prior: CV {self.cv * 100:.3g}% over ν0 = {self.df} df "
            f"from {self.boots} boots of {runs}"
        )


def pooled(groups: Mapping[tuple[str, str], Sequence[float]], cap: int = CAP) -> Prior | None:
    """The prior from earlier runs' boots, each (run, side) its own group: their log tps
    less the group's mean, pooled; None when no group has two boots, or they agree
    exactly (a prior of no noise would call any difference)."""
    ss, df, boots, runs = 0.0, 0, 0, set()
    for (run, _), tps in groups.items():
        logs = [math.log(x) for x in tps if x > 0 and math.isfinite(x)]
        if len(logs) < 2:
            continue
        mean = math.fsum(logs) / len(logs)
        ss += math.fsum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
        boots += len(logs)
        runs.add(run)
    if df == 0 or ss <= 0:
        return None
    return Prior(ss / df, min(cap, df), df, boots, len(runs))


def parts(sa: means.Summary, sb: means.Summary, nu0: float, s0: float) -> tuple[float, float]:
    """The variance of the log ratio and its Welch–Satterthwaite df, with a prior s0²
    of ν0 df (ν0 = 0: Welch's)."""
    da, db = nu0 + sa.n - 1, nu0 + sb.n - 1
    c0 = nu0 * s0 * (1.0 / (sa.n * da) + 1.0 / (sb.n * db))
    ca = (sa.n - 1) * sa.cv**2 / (sa.n * da)
    cb = (sb.n - 1) * sb.cv**2 / (sb.n * db)
    v = c0 + ca + cb
    den = (c0 * c0 / nu0 if nu0 else 0.0) + ca * ca / (sa.n - 1) + cb * cb / (sb.n - 1)
    return v, (v * v / den if den else math.inf)


def noisier(
    a: Sequence[float], b: Sequence[float], prior: Prior, level: float | None = None
) -> bool:
    """The run's own pooled variance is above the prior's at `level` (one-sided F test;
    GUARD unless given)."""
    level = GUARD if level is None else level
    sa, sb = means.summarize(a), means.summarize(b)
    d1 = sa.n + sb.n - 2
    if d1 < 1:
        return False
    own = ((sa.n - 1) * sa.cv**2 + (sb.n - 1) * sb.cv**2) / d1
    return float(special.fdtrc(d1, prior.pooled_df, own / prior.var)) < level


def dropped(a: Sequence[float], b: Sequence[float], prior: Prior, least: int) -> int | None:
    """The boots a side of the first look whose guard dropped the prior (the first k of
    each side for the looks before this one, all of them for this one), None if none."""
    n = min(len(a), len(b))
    for k in range(max(2, least), n + 1):
        if noisier(a[:k] if k < n else a, b[:k] if k < n else b, prior):
            return k
    return None
