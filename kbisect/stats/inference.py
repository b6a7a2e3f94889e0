"""The study's inference on log ratios of means (the delta method, as kbisect.stats does
for two sides), for any number of independent means: a ratio of two means, or a ratio
of ratios of four; and Holm's step-down correction for a family of tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

import scipy.stats

from kbisect.stats import means

CONFIDENCE = 0.95


def log_terms(s: means.Summary) -> tuple[float, int]:
    """(variance of log mean, n): cv^2 / n by the delta method."""
    return s.cv**2 / s.n, s.n


def combine(terms: Sequence[tuple[float, int]], log_ratio: float) -> tuple[float, float, float]:
    """(p of "no change", low, high) for a log ratio with these variance terms."""
    var = sum(v for v, _ in terms)
    if var == 0:
        p = 1.0 if log_ratio == 0 else 0.0
        return p, math.exp(log_ratio), math.exp(log_ratio)
    df = var**2 / sum(v**2 / (n - 1) for v, n in terms if v > 0)
    se = math.sqrt(var)
    p = min(1.0, 2 * float(scipy.stats.t.sf(abs(log_ratio) / se, df)))
    half = float(scipy.stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    return p, math.exp(log_ratio - half), math.exp(log_ratio + half)


def holm(ps: Sequence[float]) -> list[float]:
    """Holm-adjusted p values, in the input order."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adjusted, running = [1.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        adjusted[i] = running
    return adjusted
