"""The kernel effect within machines (stats/blocked.py): exact without noise whatever
the machines' offsets and however the boots fell on them; unbiased under a machine
effect where the pooled ratio is not; refused when no machine measured both sides."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbisect.stats import blocked, means, ratio

offsets = st.lists(st.floats(0.8, 1.25), min_size=2, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    factors=offsets,
    effect=st.floats(0.7, 1.3),
    counts=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=4, max_size=4),
)
def test_without_noise_the_effect_is_exact_whatever_the_machines(
    factors: list[float], effect: float, counts: list[tuple[int, int]]
) -> None:
    a, b, ma, mb = [], [], [], []
    for j, f in enumerate(factors):
        n_a, n_b = counts[j]
        a += [1000.0 * f] * n_a
        ma += [f"m{j}"] * n_a
        b += [1000.0 * f * effect] * n_b
        mb += [f"m{j}"] * n_b
    if len(a) + len(b) <= len(factors) + 1:
        return  # no residual degrees of freedom: refused (tested below)
    r = ratio.ratio_ci(a, b, machines=(ma, mb))
    assert r.ratio == pytest.approx(effect, rel=1e-9)
    assert r.low == pytest.approx(effect, rel=1e-6) and r.high == pytest.approx(effect, rel=1e-6)
    assert r.method == blocked.METHOD


def test_unbiased_under_a_machine_effect_where_the_pooled_ratio_is_not() -> None:
    """Seeded: machine m1 5% faster, and it took more side-A boots (its B boots went
    elsewhere); no kernel effect. The blocked log ratio averages to 0, its interval
    covers 1 about 95% of the time; the pooled ratio is pulled below 1."""
    rng = random.Random(7)
    logs, pooled, covered = [], [], 0
    trials = 600
    for _ in range(trials):
        ma = ["m0"] * 4 + ["m1"] * 6
        mb = ["m0"] * 8 + ["m1"] * 2
        factor = {"m0": 1.0, "m1": 1.05}
        a = [1000 * factor[m] * math.exp(rng.gauss(0, 0.02)) for m in ma]
        b = [1000 * factor[m] * math.exp(rng.gauss(0, 0.02)) for m in mb]
        r = ratio.ratio_ci(a, b, machines=(ma, mb))
        logs.append(math.log(r.ratio))
        covered += r.low <= 1.0 <= r.high
        pooled.append(math.log(ratio.ratio_ci(a, b).ratio))
    se = 0.02 * math.sqrt(1 / 4 + 1 / 6 + 1 / 8 + 1 / 2) / math.sqrt(trials)  # a bound
    assert abs(sum(logs) / trials) < 4 * se
    assert 0.92 <= covered / trials <= 0.98
    assert sum(pooled) / trials < -0.015  # the machine effect leaks into the pooled one


def test_one_side_per_machine_cannot_be_told_from_the_machines() -> None:
    with pytest.raises(means.StatsError, match="no machine measured both sides"):
        ratio.ratio_ci([1.0, 1.1], [2.0, 2.1], machines=(["m0", "m0"], ["m1", "m1"]))


def test_no_spread_left_is_refused() -> None:
    with pytest.raises(means.StatsError, match="no spread"):
        ratio.ratio_ci([1.0, 1.1], [2.0], machines=(["m0", "m1"], ["m0"]))


def test_a_machine_with_one_side_adds_nothing_to_the_effect() -> None:
    a, ma = [100.0, 101.0, 300.0], ["m0", "m0", "m2"]
    b, mb = [110.0, 111.1], ["m0", "m0"]
    with_it = ratio.ratio_ci(a, b, machines=(ma, mb))
    alone = ratio.ratio_ci(a[:2], b, machines=(ma[:2], mb))
    assert with_it.ratio == pytest.approx(alone.ratio)


def test_a_contrast_of_two_groups_is_the_side_effect_and_an_untied_one_is_refused() -> None:
    a, ma = [100.0, 102.0, 95.0, 96.0], ["m0", "m0", "m1", "m1"]
    b, mb = [110.0, 111.0, 104.0], ["m0", "m1", "m1"]
    assert blocked.log_contrast([a, b], [ma, mb], [-1.0, 1.0]) == blocked.log_effect(a, b, ma, mb)
    # cells 0, 1 on m0 and cells 2, 3 on m1: (3 - 2) - (1 - 0) is tied down, 2 - 0 is not
    groups = [[100.0, 101.0], [90.0, 91.0], [80.0, 81.0], [72.0, 73.0]]
    on = [["m0", "m0"], ["m0", "m0"], ["m1", "m1"], ["m1", "m1"]]
    delta, _, df = blocked.log_contrast(groups, on, [1.0, -1.0, -1.0, 1.0])
    assert df == 4 and math.isfinite(delta)
    with pytest.raises(means.StatsError, match="cannot be told"):
        blocked.log_contrast(groups, on, [-1.0, 0.0, 1.0, 0.0])
