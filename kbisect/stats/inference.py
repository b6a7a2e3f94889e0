"""The study's level, and Holm's step-down correction for a family of tests (its
ratios and their p values: ratio.py)."""

from __future__ import annotations

from collections.abc import Sequence

CONFIDENCE = 0.95


def holm(ps: Sequence[float]) -> list[float]:
    """Holm-adjusted p values, in the input order."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    adjusted, running = [1.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        adjusted[i] = running
    return adjusted
