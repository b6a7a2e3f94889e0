"""The confidence of each look when a rule looks at its data again after every sample.

A rule that looks after sample `least`, `least + 1`, ..., `most` (K = most - least + 1
looks) and stops at the first look that makes its claim has K chances to be fooled. So the
error α = 1 - confidence is split over the looks (Bonferroni): each look may spend α/K,
and whenever the rule stops its claim is wrong with probability at most α. `level` is the
two-sided level of the interval each look computes; what it spends α/K on depends on the
claim:

- one-sided claims, each end of the interval its own claim: level 1 - 2α/K, so each end
  is a one-sided bound at α/K. The bisect step (sequential.py) claims "good" (the mean is
  wholly above the threshold) or "bad" (wholly below): two separate one-sided claims, each
  wrong at most α. The adaptive re-check (confirm.py) claims "confirmed" (the ratio is
  wholly beyond the minimum effect) or "refuted" (wholly short of it): the same. The
  endpoint check (bisect/check.py) passes on one claim, bad worse than good (the robust
  verdict's "regression", robust.py): endpoints that do not differ pass with probability
  at most α (until 2026-11-29 it was the two-sided claim below, 2.5% on the side that
  passes). (A single look prints the 90% interval of two one-sided 95% bounds.)
- a two-sided claim, the interval as a whole: level 1 - α/K, so each end spends α/(2K).
  The sequential compare (stopping.py, `kbisect compare --boots auto`) asks whether B
  differs from A either way with compare's own interval: "significant" (beyond the
  minimum effect either way) and "equivalent" (within it) are claims about the interval
  as a whole, and Bonferroni keeps compare's two-sided 95% for the family of looks.

The split holds only if the rule looks exactly K times: once per sample count from
`least` to `most`. Both rules that sample two sides look at complete pairs only (the same
count on each side, or, with stored samples, each time the shorter side grows): the
endpoint check tops both sides up before it looks, the re-check (bisect/recheck.py)
draws the second sample of a pair without looking, the sequential compare
(compare/sequential.py) looks after each pair when the shorter side has grown. Over a
pool of machines the sequential compare looks once per round instead (every machine one
more pair, compare/sequential.py `play`, `over_pool`): K is then the number of rounds that
look, `level(alpha, 1, K)`; so does a bisection's re-check over a pool (k/2 fresh pairs a
round, confirm.py `Rule.every`), and its endpoint check (k/2 pairs a side a round,
bisect/check.py): K is then `count(least, most, every)`, the looks `every` samples apart.
"""

from __future__ import annotations


def count(least: int, most: int, every: int = 1) -> int:
    """The looks of a rule that looks after `least` samples, then every `every` more, the
    last at `most` (a shorter last step when `every` does not divide the span)."""
    return -(-(most - least) // max(every, 1)) + 1


def spend(alpha: float, least: int, most: int) -> float:
    """α/K: the error each of the K = most - least + 1 looks may spend (Bonferroni)."""
    return alpha / (most - least + 1)


def level(alpha: float, least: int, most: int, *, one_sided: bool) -> float:
    """The two-sided level of each look's interval, looking after samples least..most
    with an error of at most `alpha` in all: 1 - 2α/K for one-sided claims, 1 - α/K for a
    two-sided one (K = most - least + 1)."""
    each = spend(alpha, least, most)
    return 1.0 - (2.0 * each if one_sided else each)
