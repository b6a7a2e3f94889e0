"""The sequential compare's noise prior (stats/prior.py): pooling earlier runs, the
interval's variance and df (ν0 = 0 is Welch's), the guard, and the rule that uses it."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbisect.stats import means, ratio, stopping
from kbisect.stats import prior as priors

TPS = st.floats(min_value=100.0, max_value=5000.0, allow_nan=False)


def make(var: float, df: int, pooled_df: int | None = None) -> priors.Prior:
    return priors.Prior(var, df, df if pooled_df is None else pooled_df, 40, 4, "test")


def test_pooled_is_the_within_group_variance_of_log_tps_capped_in_weight() -> None:
    groups = {
        ("r1", "A"): [1000.0, 1100.0, 950.0],
        ("r1", "B"): [800.0, 820.0],
        ("r2", "A"): [1000.0, 900.0, 1050.0, 980.0],
        ("r3", "A"): [700.0],  # one boot: no residual
    }
    got = priors.pooled(groups, cap=4)
    assert got is not None
    logs = [[math.log(x) for x in g] for g in groups.values() if len(g) > 1]
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in logs)
    assert got.pooled_df == 2 + 1 + 3 and got.df == 4  # Σ(n - 1) = 6, weighed as 4
    assert got.var == pytest.approx(ss / 6, rel=1e-12)
    assert (got.boots, got.runs) == (9, 2)
    assert got.cv == pytest.approx(math.sqrt(ss / 6))


def test_no_prior_without_two_boots_in_a_group_or_with_no_noise() -> None:
    assert priors.pooled({("r", "A"): [1000.0], ("r", "B"): [900.0]}) is None
    assert priors.pooled({("r", "A"): [1000.0, 1000.0]}) is None
    assert priors.pooled({}) is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(TPS, min_size=2, max_size=10),
    st.lists(TPS, min_size=2, max_size=10),
    st.floats(min_value=1e-4, max_value=0.1),
    st.sampled_from([0.95, 0.99, 0.99375]),
)
def test_with_no_prior_weight_the_interval_is_welchs(
    a: list[float], b: list[float], var: float, confidence: float
) -> None:
    welch = ratio.ratio_ci(a, b, confidence)
    got = ratio.ratio_ci(a, b, confidence, prior=make(var, 0, 5))
    assert got.ratio == welch.ratio
    if welch.df is None:  # both sides without noise: the point
        return
    assert got.df == pytest.approx(welch.df, rel=1e-9)
    assert got.low == pytest.approx(welch.low, rel=1e-9)
    assert got.high == pytest.approx(welch.high, rel=1e-9)


def test_the_df_counts_the_shared_prior_once() -> None:
    """Three boots a side whose CV equals the prior's, ν0 = 8: the variance is s0²·2/3,
    and Satterthwaite's df is 11.1: the prior's 8 once and each side's 2, not 8 per side
    (which would give ~20)."""
    s = 0.1
    a = [1000 * (1 + s * z) for z in (-1.0, 0.0, 1.0)]  # sd exactly s x the mean
    v, df = priors.parts(means.summarize(a), means.summarize(a), 8, s * s)
    assert v == pytest.approx(s * s * 2 / 3)
    c0, c = 8 * s * s * 2 / 30, 2 * s * s / 30
    assert df == pytest.approx((c0 + 2 * c) ** 2 / (c0**2 / 8 + 2 * c**2 / 2))
    assert 11.0 < df < 11.2


def test_a_prior_at_the_true_noise_keeps_the_intervals_coverage() -> None:
    """Seeded Monte Carlo: 3 boots a side at CV 10%, the prior an estimate over 8 df of
    the same noise: the 95% interval covers the true ratio 95% of the time or more."""
    r = random.Random(7)
    trials, covered = 3000, 0
    for _ in range(trials):
        var = 0.01 * r.gammavariate(4.0, 2.0) / 8
        a = [r.gauss(1000, 100) for _ in range(3)]
        b = [r.gauss(800, 80) for _ in range(3)]
        ci = ratio.ratio_ci(a, b, 0.95, prior=make(var, 8))
        covered += ci.low <= 0.8 <= ci.high
    assert covered / trials >= 0.94


def test_the_guard_drops_a_prior_the_run_is_much_noisier_than() -> None:
    quiet = make(0.0001, 8, 30)  # CV 1%
    a, b = [1000.0, 1200.0, 850.0], [900.0, 1100.0, 760.0]  # CV ~17%
    assert priors.noisier(a, b, quiet)
    assert priors.dropped(a, b, quiet, 2) == 2  # already at the first look's 2 boots
    assert stopping.with_prior(quiet, a, b, 2) is None
    like = make(0.17**2, 8, 30)
    assert not priors.noisier(a, b, like)
    assert priors.dropped(a, b, like, 2) is None
    assert stopping.with_prior(like, a, b, 2) is not None


def test_the_guard_replays_the_looks_so_a_later_calm_does_not_restore_the_prior() -> None:
    p = make(0.0025, 8, 8)  # CV 5%
    a = [1000.0, 1300.0] + [1150.0] * 8  # noisy at 2 a side, then flat
    b = [1000.0, 1300.0] + [1150.0] * 8
    assert not priors.noisier(a, b, p)  # all ten a side would pass on their own
    assert priors.dropped(a, b, p, 2) == 2
    assert priors.dropped(a[:2], b[:2], p, 3) is None  # not a look yet at least 3


def test_a_rule_with_a_prior_looks_at_two_and_stops_a_halving_there() -> None:
    a, b = [1000.0, 1040.0], [500.0, 515.0]
    rule = stopping.Rule.upto(10, prior=make(0.01, 8, 20))
    assert rule.least == 2 and rule.looks == 9
    stop = stopping.decide(a, b, rule)
    assert (stop.kind, stop.n, stop.look) == (stopping.SIGNIFICANT, 2, 1)
    assert stop.ratio is not None and stop.ratio.method == priors.METHOD
    plain = stopping.Rule.upto(10)
    assert plain.least == 3 and plain == stopping.Rule()  # no prior: today's rule
    assert stopping.decide(a, b, plain).kind == stopping.MORE


def test_the_reason_and_the_summary_say_the_prior() -> None:
    rule = stopping.Rule.upto(10, prior=make(0.0121, 8, 20))
    stop = stopping.decide([1000.0, 1040.0], [500.0, 515.0], rule)
    record = stopping.as_dict(stop, rule)
    assert record["reason"].endswith(
        "; noise prior: CV 11% over ν0 = 8 df from 40 boots of 4 earlier runs"
    )
    assert record["noise_prior"]["cv"] == pytest.approx(0.11)
    none = stopping.Rule.upto(10, no_prior="turned off (--noise-prior off)")
    stop = stopping.decide([1000.0] * 3, [500.0, 510, 505], none)
    said = stopping.reason(stop, none)
    assert said.endswith("; noise prior: none (turned off (--noise-prior off))")
    assert "noise prior" not in stopping.reason(stop, stopping.Rule())


def test_a_dropped_prior_is_said_and_recorded() -> None:
    rule = stopping.Rule.upto(10, prior=make(0.0001, 8, 30))
    a, b = [1000.0, 1200.0, 850.0], [900.0, 1100.0, 760.0]
    stop = stopping.decide(a, b, rule)
    assert stop.dropped == 2 and stop.ratio is not None
    assert stop.ratio.method == ratio.METHOD  # today's interval from then on
    said = stopping.as_dict(stop, rule)
    assert said["prior_dropped"] == 2
    assert "dropped after 2 boots a side: this run is noisier" in said["reason"]
