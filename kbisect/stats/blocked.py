"""The kernel effect within machines: a compare over a pool of machines, each of which
measured both sides, with the machine as a block (a fixed effect).

Model, on the log of each boot's tps: log tps = machine + delta * [side B] + noise,
least squares with one level per machine (numpy). exp(delta) is B/A within a machine,
the same on every machine; a machine that is a few percent faster moves its own level,
never delta, however the boots fell on the machines (a quarantined machine's missing
boots included). The interval (ratio.ratio_ci) is exp(delta +- t * se) with the residual
degrees of freedom (boots - machines - 1) and the pooled within-machine spread.

A machine that measured one side only adds nothing to delta (its level absorbs it); when
no machine measured both sides, delta cannot be told from the machines': StatsError.
False positives under a 5% machine effect are simulated in docs/benchmarks.md
(scripts/simulate-pool).

The same fit with more groups than two (`log_contrast`): a study's cells of one kernel,
one level per machine and one effect per cell, and a contrast of the effects (a ratio
of ratios, study/analysis.py's interactions) with its standard error on the same
residual degrees of freedom. Two groups and the weights (-1, 1) are `log_effect`;
several contrasts of one fit (a square's two effects and its ratio of ratios) are
`log_contrasts`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kbisect.stats import means

METHOD = "log-machine-blocked"


def log_contrast(
    groups: Sequence[Sequence[float]],
    machines: Sequence[Sequence[str]],
    weights: Sequence[float],
    apart: str = "the groups' effects cannot be told from the machines'",
) -> tuple[float, float, int]:
    """(estimate, its standard error, residual df) of sum(weights[g] * effect of group g)
    in the fixed-effects fit: log tps = machine + effect of the boot's group + noise, the
    first group's effect 0. The weights sum to 0 (a contrast: the machines' levels take
    the rest). `apart` is the StatsError raised when the machines that measured the
    groups do not tie the contrast down (no machine measured the groups it compares)."""
    return log_contrasts(groups, machines, [weights], apart)[0]


def log_contrasts(
    groups: Sequence[Sequence[float]],
    machines: Sequence[Sequence[str]],
    contrasts: Sequence[Sequence[float]],
    apart: str = "the groups' effects cannot be told from the machines'",
) -> list[tuple[float, float, int]]:
    """`log_contrast` for each of several weight vectors, all from one fit; StatsError
    (`apart`) when any of them is not tied down."""
    if not contrasts:
        raise means.StatsError("no contrast to estimate")
    if (
        len(groups) != len(machines)
        or len(groups) < 2
        or any(len(w) != len(groups) for w in contrasts)
    ):
        raise means.StatsError("each group needs its machines and its weight")
    if any(len(g) != len(m) for g, m in zip(groups, machines, strict=True)):
        raise means.StatsError("each boot needs its machine")
    if any(not (math.isfinite(x) and x > 0) for g in groups for x in g):
        raise means.StatsError("tps must be positive finite numbers")
    if any(abs(math.fsum(w)) > 1e-9 for w in contrasts):
        raise means.StatsError("the weights of a contrast sum to 0")
    names = sorted({m for ms in machines for m in ms})
    col = {m: i for i, m in enumerate(names)}
    rows = [
        (x, m, g)
        for g, (xs, ms) in enumerate(zip(groups, machines, strict=True))
        for x, m in zip(xs, ms, strict=True)
    ]
    design = np.zeros((len(rows), len(names) + len(groups) - 1))
    for r, (_, m, g) in enumerate(rows):
        design[r, col[m]] = 1.0
        if g:
            design[r, len(names) + g - 1] = 1.0
    vectors = []
    for weights in contrasts:
        contrast = np.zeros(design.shape[1])
        contrast[len(names) :] = weights[1:]
        vectors.append(contrast)
    gram = design.T @ design
    cov = np.linalg.pinv(gram)
    if any(not np.allclose(c @ cov @ gram, c, atol=1e-6) for c in vectors):
        raise means.StatsError(apart)
    y = np.log([x for x, _, _ in rows])
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    df = len(rows) - int(rank)
    if df < 1:
        raise means.StatsError(
            f"{len(rows)} boots on {len(names)} machines leave no spread to measure: add boots"
        )
    resid = y - design @ coef
    s2 = float(resid @ resid) / df
    out = []
    for c in vectors:
        var = float(c @ cov @ c)
        out.append((float(c @ coef), math.sqrt(max(s2 * var, 0.0)), df))
    return out


def log_effect(
    a: Sequence[float], b: Sequence[float], machines_a: Sequence[str], machines_b: Sequence[str]
) -> tuple[float, float, int]:
    """(delta, its standard error, residual df) of the fixed-effects fit."""
    if len(a) != len(machines_a) or len(b) != len(machines_b):
        raise means.StatsError("each boot needs its machine")
    both = "no machine measured both sides: the kernel's effect cannot be told from the machines'"
    return log_contrast([a, b], [machines_a, machines_b], [-1.0, 1.0], both)
