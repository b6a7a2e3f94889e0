"""The robust ratio (kbisect/stats/robust.py): Welch's on clean samples, unmoved by a
half-speed boot, calibrated under noise it was not built for, and invariant as a ratio
must be."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbisect.stats import means, ratio, robust


def lognormal(rng: random.Random, level: float, cv: float, n: int) -> list[float]:
    return [level * math.exp(cv * rng.gauss(0.0, 1.0)) for _ in range(n)]


def width(r: means.RatioCI) -> float:
    return math.log(r.high / r.low)


def test_agrees_with_welch_on_clean_normal_samples() -> None:
    rng = random.Random(11)
    agree = 0
    for _ in range(40):
        n = rng.randint(4, 10)
        a = [1000.0 * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(n)]
        b = [850.0 * (1 + 0.08 * rng.gauss(0, 1)) for _ in range(n)]
        r, w = ratio.ratio_ci(a, b, robust=True), ratio.ratio_ci(a, b)
        agree += (
            r.ratio == pytest.approx(w.ratio, rel=0.005)
            and width(r) == pytest.approx(width(w), rel=0.05)
            and r.df == pytest.approx(w.df, rel=0.1)
        )
    assert agree >= 38  # the outlier fit may win on a rare clean sample, by its margin


def test_clean_samples_fit_all_core_and_give_welch_on_the_logs() -> None:
    a, b = [1000.0, 1040.0, 980.0, 1010.0, 995.0], [800.0, 830.0, 790.0, 815.0, 805.0]
    e = robust.estimate(a, b)
    assert e.a.w == e.b.w == 0.0 and e.a.n_eff == e.b.n_eff == 5
    la, lb = np.log(a), np.log(b)
    assert e.log_ratio == pytest.approx(lb.mean() - la.mean())
    va, vb = la.var(ddof=1) / 5, lb.var(ddof=1) / 5
    assert e.se == pytest.approx(math.sqrt(va + vb))
    assert e.df == pytest.approx(means.welch([(va, 4), (vb, 4)])[1])
    assert e.a.level == pytest.approx(math.exp(la.mean()))


def test_one_half_speed_boot_among_five_barely_moves_it() -> None:
    clean = [1000.0, 1030.0, 985.0, 1012.0]
    slow = [*clean, 505.0]  # one boot at half speed
    b = [800.0, 822.0, 790.0, 810.0, 803.0]
    without, with_slow = ratio.ratio_ci(clean, b, robust=True), ratio.ratio_ci(slow, b, robust=True)
    assert with_slow.ratio == pytest.approx(without.ratio, rel=0.01)
    assert width(with_slow) < 1.3 * width(without)
    assert with_slow.high < 1.0  # still a clear regression
    welch = ratio.ratio_ci(slow, b)
    assert welch.ratio > 1.08 * with_slow.ratio  # the mean is dragged down
    assert width(welch) > 5 * width(with_slow)  # and the interval blows up
    assert welch.low < 1.0 < welch.high  # Welch no longer sees the regression
    fit = robust.fit(slow)
    assert fit.core[-1] < 0.01 and min(fit.core[:-1]) > 0.99
    assert fit.n_eff == pytest.approx(4.0, abs=0.05)


def test_each_side_keeps_its_own_noise() -> None:
    rng = random.Random(3)
    e = robust.estimate(lognormal(rng, 1000, 0.02, 8), lognormal(rng, 900, 0.12, 8))
    assert e.b.s > 3 * e.a.s
    assert e.df is not None and e.df < 10  # Welch: the noisy side's 7 df dominate


@pytest.mark.parametrize(
    ("noise", "cv_a", "cv_b", "least"),
    [
        ("normal", 0.05, 0.12, 0.91),
        ("normal", 0.13, 0.07, 0.93),
        ("t3", 0.10, 0.05, 0.93),
        ("outliers", 0.08, 0.04, 0.93),
    ],
)
def test_the_95_interval_covers_the_true_ratio(
    noise: str, cv_a: float, cv_b: float, least: float
) -> None:
    """400 seeded draws of 6 boots a side (noise on the log scale, so the true ratio of
    the core levels is exactly 0.8): the 95% interval covers it 93% to 98.5% of the
    time, never far from 95% in either direction (the binomial's standard error is 1.1%).
    One side at 2.4 times the other's CV (beyond the 1.9x real compares show) is where the
    spreads' tie (LINK_SD) costs: a wide side's farthest boot is now and then set apart
    (measured 91.7%; 93.5% without the tie)."""
    rng = np.random.default_rng(20)

    def side(level: float, cv: float) -> list[float]:
        e = rng.standard_t(3, 6) / math.sqrt(3) if noise == "t3" else rng.normal(0, 1, 6)
        x = level * np.exp(cv * e)
        if noise == "outliers":
            x = np.where(rng.random(6) < 0.05, 0.5 * x, x)
        return [float(v) for v in x]

    draws = 400
    covered = 0
    for _ in range(draws):
        r = ratio.ratio_ci(side(1000.0, cv_a), side(800.0, cv_b), robust=True)
        covered += r.low <= 0.8 <= r.high
    assert least <= covered / draws <= 0.985


def test_small_and_degenerate_groups() -> None:
    two = robust.fit([1000.0, 1100.0])
    assert two.w == 0.0 and two.df == 1.0
    point = ratio.ratio_ci([500.0, 500.0, 500.0], [250.0, 250.0], robust=True)
    assert point.ratio == point.low == point.high == pytest.approx(0.5)
    with pytest.raises(means.NotEnoughSamples):
        robust.fit([1000.0])
    with pytest.raises(means.StatsError):
        robust.fit([1000.0, 0.0, 900.0])
    with pytest.raises(means.StatsError):
        ratio.ratio_ci([1.0, 2.0], [1.0, 2.0], 95, robust=True)


def test_the_verdict_on_the_robust_ratio_keeps_compares_warnings() -> None:
    slow = [1000.0, 1030.0, 985.0, 1012.0, 505.0]
    b = [800.0, 822.0, 790.0, 810.0, 803.0]
    assert ratio.verdict(slow, b).kind == means.NO_DIFFERENCE
    v = ratio.verdict(slow, b, boots_flag="--runs-max", interval=ratio.ROBUST)
    assert v.kind == "regression" and v.ratio.method == robust.METHOD
    assert v.a == means.summarize(slow)
    assert any("boot 5 (505.0 tps) is an outlier" in w for w in v.warnings)
    assert ratio.verdict(b, slow, interval=ratio.ROBUST).kind == "improvement"
    small = ratio.verdict(
        [1000.0, 1001.0, 999.0] * 3,
        [990.0, 991.0, 989.0] * 3,
        interval=ratio.ROBUST,
    )
    assert small.kind == means.NO_DIFFERENCE
    assert any("below --min-effect 2%" in w for w in small.warnings)


tps = st.lists(st.floats(100.0, 2000.0), min_size=2, max_size=9)


@settings(max_examples=60, deadline=None)
@given(tps, tps, st.floats(0.01, 100.0))
def test_scaling_every_sample_leaves_the_ratio(a: list[float], b: list[float], c: float) -> None:
    r = robust.estimate(a, b)
    scaled = robust.estimate([c * x for x in a], [c * x for x in b])
    assert scaled.ratio == pytest.approx(r.ratio, rel=1e-6)
    assert scaled.se == pytest.approx(r.se, rel=1e-5, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(tps, tps)
def test_swapping_the_sides_inverts_the_ratio(a: list[float], b: list[float]) -> None:
    r, back = ratio.ratio_ci(a, b, robust=True), ratio.ratio_ci(b, a, robust=True)
    assert back.ratio == pytest.approx(1.0 / r.ratio, rel=1e-9)
    assert back.low == pytest.approx(1.0 / r.high, rel=1e-9)
    assert back.high == pytest.approx(1.0 / r.low, rel=1e-9)


def test_two_half_speed_boots_among_eight_are_set_apart_by_the_other_sides_spread() -> None:
    """A re-check the simulator ended "unclear" (5% of boots at half speed, a 25% step at
    CV 10%): the parent's 572 and 494 are two of eight. Alone, one group cannot tell them
    from a wide spread (all core); with the culprit's tight boots and the tie between
    the two spreads, both are set apart and the step is clear at the re-check's level."""
    parent = [886.0, 572.0, 1060.0, 1079.0, 915.0, 494.0, 997.0, 1190.0]
    culprit = [820.0, 776.0, 754.0, 798.0, 714.0, 762.0, 744.0, 787.0]
    assert robust.fit(parent).n_eff == 8.0
    a, b = robust.fit_two(parent, culprit)
    assert a.core[1] < 0.05 and a.core[5] < 0.05
    assert sum(c > 0.9 for c in a.core) == 6 and b.n_eff > 7.5
    r = ratio.ratio_ci(parent, culprit, 0.9833, robust=True)
    assert r.high < 0.98 and 0.7 < r.ratio < 0.8


def test_the_tie_does_not_trim_two_clean_sides() -> None:
    """Two clean sides of equal spread: the tie changes nothing, the estimate is Welch's."""
    rng = np.random.default_rng(3)
    a = [float(v) for v in 1000.0 * np.exp(0.1 * rng.normal(0, 1, 8))]
    b = [float(v) for v in 800.0 * np.exp(0.1 * rng.normal(0, 1, 8))]
    fa, fb = robust.fit_two(a, b)
    assert fa.n_eff == 8.0 and fb.n_eff == 8.0
