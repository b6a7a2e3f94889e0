"""The kernel effect within machines: a compare over a pool of machines, each of which
measured both sides, with the machine as a block (a fixed effect).

Model, on the log of each boot's tps: log tps = machine + delta * [side B] + noise,
least squares with one level per machine (numpy). exp(delta) is B/A within a machine,
the same on every machine; a machine that is a few percent faster moves its own level,
never delta, however the boots fell on the machines (a quarantined machine's missing
boots included). The interval is exp(delta +- t * se) with the residual degrees of
freedom (boots - machines - 1) and the pooled within-machine spread.

A machine that measured one side only adds nothing to delta (its level absorbs it); when
no machine measured both sides, delta cannot be told from the machines': StatsError.
False positives under a 5% machine effect are simulated in docs/benchmarks.md
(scripts/simulate-pool).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kbisect.stats import means
from kbisect.stats.student import t_quantile

METHOD = "log-machine-blocked"


def log_effect(
    a: Sequence[float], b: Sequence[float], machines_a: Sequence[str], machines_b: Sequence[str]
) -> tuple[float, float, int]:
    """(delta, its standard error, residual df) of the fixed-effects fit."""
    if len(a) != len(machines_a) or len(b) != len(machines_b):
        raise means.StatsError("each boot needs its machine")
    if any(not (math.isfinite(x) and x > 0) for x in [*a, *b]):
        raise means.StatsError("tps must be positive finite numbers")
    both = set(machines_a) & set(machines_b)
    if not both:
        raise means.StatsError(
            "no machine measured both sides: the kernel's effect cannot be told from the machines'"
        )
    names = sorted(set(machines_a) | set(machines_b))
    col = {m: i for i, m in enumerate(names)}
    rows = [(x, m, 0.0) for x, m in zip(a, machines_a, strict=True)]
    rows += [(x, m, 1.0) for x, m in zip(b, machines_b, strict=True)]
    design = np.zeros((len(rows), len(names) + 1))
    for r, (_, m, side) in enumerate(rows):
        design[r, col[m]] = 1.0
        design[r, -1] = side
    y = np.log([x for x, _, _ in rows])
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    df = len(rows) - int(rank)
    if df < 1:
        raise means.StatsError(
            f"{len(rows)} boots on {len(names)} machines leave no spread to measure: add boots"
        )
    resid = y - design @ coef
    s2 = float(resid @ resid) / df
    cov = np.linalg.pinv(design.T @ design)
    return float(coef[-1]), math.sqrt(max(s2 * float(cov[-1, -1]), 0.0)), df


def ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    machines_a: Sequence[str],
    machines_b: Sequence[str],
    confidence: float = 0.95,
) -> means.RatioCI:
    """B/A within machines, with its interval at `confidence`."""
    if not 0.0 < confidence < 1.0:
        raise means.StatsError(f"confidence {confidence}: must be between 0 and 1")
    delta, se, df = log_effect(a, b, machines_a, machines_b)
    ratio = math.exp(delta)
    if se == 0:
        return means.RatioCI(ratio, ratio, ratio, METHOD, confidence, float(df))
    half = t_quantile(0.5 + confidence / 2, df) * se
    return means.RatioCI(
        ratio, math.exp(delta - half), math.exp(delta + half), METHOD, confidence, float(df)
    )
