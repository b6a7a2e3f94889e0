"""kbisect.stats.means against scipy, textbook values, and simulated error rates."""

from __future__ import annotations

import json
import math
import random

import pytest
from scipy import stats as sp

from kbisect.core.exceptions import UserError
from kbisect.stats import means, ratio

# Student's sleep data (Cushny & Peebles), as in R's `t.test(extra ~ group, data = sleep)`.
SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]


def side(r: random.Random, mu: float, cv: float, n: int) -> list[float]:
    return [r.gauss(mu, mu * cv) for _ in range(n)]


# --- summaries and intervals -----------------------------------------------------------


def test_summarize() -> None:
    s = means.summarize([100.0, 110.0, 90.0, 120.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (4, 105.0, 105.0, 90.0, 120.0)
    assert s.stdev == pytest.approx(12.909944487)
    assert s.cv == pytest.approx(s.stdev / 105.0)
    assert set(s.as_dict()) == {"n", "mean", "median", "stdev", "cv", "min", "max"}
    one = means.summarize([512.3])
    assert (one.n, one.mean, one.stdev, one.cv) == (1, 512.3, 0.0, 0.0)
    with pytest.raises(means.NotEnoughSamples):
        means.summarize([])


def test_mean_ci_textbook_sleep_group_1() -> None:
    # R: t.test(sleep$extra[1:10]) -> 95 percent confidence interval: -0.5297804 2.0297804
    mean, low, high = means.mean_ci(SLEEP_1)
    assert (round(mean, 7), round(low, 7), round(high, 7)) == (0.75, -0.5297804, 2.0297804)


@pytest.mark.parametrize("conf", [0.8, 0.95, 0.99])
def test_mean_ci_matches_scipy(conf: float) -> None:
    xs = [812.3, 790.1, 834.5, 801.0, 777.7]
    ref = sp.t.interval(conf, len(xs) - 1, loc=sp.tmean(xs), scale=sp.sem(xs))
    assert means.mean_ci(xs, conf)[1:] == pytest.approx(ref, rel=1e-10)


def test_ratio_ci_is_the_delta_method_on_the_log_with_welch_df() -> None:
    a, b = [1000.0, 1100.0, 950.0, 1020.0], [520.0, 480.0, 540.0, 500.0, 515.0]
    va = sp.variation(a, ddof=1) ** 2 / len(a)
    vb = sp.variation(b, ddof=1) ** 2 / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = sp.t.ppf(0.975, df) * math.sqrt(va + vb)
    r = sp.tmean(b) / sp.tmean(a)
    ci = ratio.ratio_ci(a, b)
    assert (ci.ratio, ci.low, ci.high, ci.df) == pytest.approx(
        (r, r * math.exp(-half), r * math.exp(half), df), rel=1e-10
    )
    assert ci.method == ratio.METHOD
    back = ratio.ratio_ci(b, a)  # A/B is exactly the reciprocal interval
    assert (back.ratio, back.low, back.high) == pytest.approx(
        (1 / ci.ratio, 1 / ci.high, 1 / ci.low)
    )


def test_ratio_ci_two_boots_per_side_is_wide_but_finite() -> None:
    ci = ratio.ratio_ci([1000.0, 1150.0], [1900.0, 2200.0])
    assert 0 < ci.low < 1.6 and 2.3 < ci.high < math.inf
    assert ci.low < ci.ratio < ci.high


def test_ratio_ci_needs_two_boots_per_side() -> None:
    with pytest.raises(means.NotEnoughSamples, match="need at least 2 boots per side") as e:
        ratio.ratio_ci([1000.0], [900.0, 950.0])
    assert isinstance(e.value, UserError) and "side A" in str(e.value)
    with pytest.raises(UserError, match="side B"):
        ratio.verdict([1000.0, 990.0], [])


def test_ratio_ci_rejects_non_positive_means_and_bad_confidence() -> None:
    with pytest.raises(means.StatsError, match="positive means"):
        ratio.ratio_ci([1.0, -3.0], [1.0, 2.0])
    with pytest.raises(means.StatsError, match="confidence"):
        ratio.ratio_ci([1.0, 2.0], [1.0, 2.0], confidence=95)


def test_ratio_ci_constant_sides_give_a_point() -> None:
    ci = ratio.ratio_ci([500.0, 500.0], [250.0, 250.0, 250.0])
    assert (ci.ratio, ci.low, ci.high, ci.df) == (0.5, 0.5, 0.5, None)


# --- verdict -----------------------------------------------------------------------------

A = [1000.0, 1030.0, 980.0, 1010.0, 995.0]


def test_verdict_regression_improvement_and_direction() -> None:
    slower = [x * 0.8 for x in reversed(A)]
    assert ratio.verdict(A, slower).kind == "regression"
    assert ratio.verdict(slower, A).kind == "improvement"
    # latency: B higher is worse
    assert ratio.verdict(A, [x * 1.25 for x in A], higher_is_better=False).kind == "regression"
    assert ratio.verdict(A, [x * 1.25 for x in A]).kind == "improvement"


def test_verdict_revert_example_is_defensible() -> None:
    v = ratio.verdict([512.0, 540.0, 498.0, 530.0, 515.0], [1010.0, 985.0, 1030.0, 990.0, 1005.0])
    assert v.kind == "improvement"
    assert 1.85 < v.ratio.low < v.ratio.ratio < v.ratio.high < 2.1
    assert v.warnings == []


def test_verdict_no_difference_when_the_interval_holds_one() -> None:
    v = ratio.verdict(A, [1020.0, 990.0, 1005.0, 1000.0, 985.0])
    assert v.kind == means.NO_DIFFERENCE and v.ratio.low < 1 < v.ratio.high


def test_verdict_significant_but_below_min_effect() -> None:
    a = [1000.0, 1001.0, 999.0, 1000.5, 999.5]
    b = [x * 0.99 for x in a]
    v = ratio.verdict(a, b)
    assert v.kind == means.NO_DIFFERENCE and v.ratio.high < 1.0
    assert any("below --min-effect 2%" in w for w in v.warnings)
    assert ratio.verdict(a, b, min_effect=0.005).kind == "regression"


def test_verdict_warnings_say_what_to_do() -> None:
    noisy = [1000.0, 1300.0, 820.0, 1150.0, 900.0]  # CV ~19%
    b = [500.0, 510.0, 212.0, 505.0, 498.0, 502.0]
    v = ratio.verdict(noisy, b)
    cv_a = v.a.cv * 100
    assert f"side A: CV {cv_a:.1f}% is high: add boots (--boots " in v.warnings[0]
    assert "side B boot 3 (212.0 tps) is an outlier: check its fingerprint" in v.warnings
    assert (
        v.warnings[1].startswith(f"side B: CV {v.b.cv * 100:.1f}% is high") and len(v.warnings) == 3
    )
    assert "detects a 10% regression at 80% power" in v.warnings[0]
    few = ratio.verdict([1000.0, 1010.0, 990.0], [800.0, 805.0, 795.0])
    assert any("use --boots 5" in w for w in few.warnings)
    assert not any("--boots 5" in w for w in ratio.verdict(A, A[::-1]).warnings)
    recheck = ratio.verdict(
        [1000.0, 1010.0, 990.0], [800.0, 805.0, 795.0], boots_flag="--recheck-samples"
    )
    assert any("use --recheck-samples 5" in w for w in recheck.warnings)
    assert not any("--boots" in w for w in recheck.warnings)


def test_outliers_need_three_points_and_spread() -> None:
    assert means.outliers([1.0, 100.0]) == []
    assert means.outliers([5.0, 5.0, 5.0, 9.0]) == [3]  # MAD 0: the floor is the scale
    assert means.outliers([5.0, 5.0, 5.0, 5.2]) == []  # 4% off: within the floor
    assert means.outliers([500.0, 510.0, 212.0, 505.0, 498.0]) == [2]
    assert means.outliers([500.0, 510.0, 480.0, 505.0, 490.0]) == []
    assert means.far_from_median([5.0, 5.0, 5.0, 9.0]) == [3]  # drift's trim, as before


@pytest.mark.parametrize("n", [4, 6, 10])
def test_a_side_of_plain_noise_is_rarely_called_an_outlier(n: int) -> None:
    """At CV 10% the fixed robust z of 3.5 called 12-20% of such sides an outlier; the
    warning's own level is 5% a side (2000 sides: 7% is 4 standard errors past 5%)."""
    rng = random.Random(n)
    sides = [[1000.0 * (1 + 0.10 * rng.gauss(0, 1)) for _ in range(n)] for _ in range(2000)]
    flagged = sum(bool(means.outliers(xs)) for xs in sides) / len(sides)
    old = sum(bool(means.far_from_median(xs)) for xs in sides) / len(sides)
    assert flagged <= 0.07
    assert old > 0.10  # the same draws: the test tells the two rules apart


def test_two_bad_boots_do_not_hide_each_other() -> None:
    """One boot set aside at a time: the second half-speed boot is judged without the first."""
    rng = random.Random(1)
    xs = [1000.0 * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(6)] + [510.0, 495.0]
    assert means.outliers(xs) == [6, 7]
    assert means.outliers([*xs[:6], 510.0]) == [6]
    assert means.outliers(xs[:6]) == []


def test_verdict_as_dict_is_strict_json() -> None:
    v = ratio.verdict([500.0, 500.0], [250.0, 250.0])
    d = json.loads(json.dumps(v.as_dict(), allow_nan=False))
    assert d["kind"] == "regression" and d["ratio"]["df"] is None
    assert d["a"]["n"] == 2 and d["ratio"]["method"] == ratio.METHOD


def test_boots_needed_grows_with_noise_and_shrinks_with_effect() -> None:
    assert means.boots_needed(0.10, 0.25) == 5
    assert means.boots_needed(0.15, 0.25) > means.boots_needed(0.10, 0.25)
    assert means.boots_needed(0.10, 0.50) < means.boots_needed(0.10, 0.25)


# --- simulated error rates (fixed seeds; figures in docs/statistics.md) -----------------


def test_ratio_ci_coverage_at_cv_10_n_5() -> None:
    r, trials, hits = random.Random(11), 2000, 0
    for _ in range(trials):
        ci = ratio.ratio_ci(side(r, 1000, 0.10, 5), side(r, 800, 0.10, 5))
        hits += ci.low <= 0.8 <= ci.high
    assert 0.92 <= hits / trials <= 0.98


@pytest.mark.parametrize("cv", [0.10, 0.15])
def test_false_positive_rate_same_distribution(cv: float) -> None:
    r, trials = random.Random(12), 2000
    wrong = sum(
        ratio.verdict(side(r, 1000, cv, 5), side(r, 1000, cv, 5)).kind != means.NO_DIFFERENCE
        for _ in range(trials)
    )
    assert wrong / trials <= 0.06


def test_power_for_a_25_percent_regression_at_cv_10_n_5() -> None:
    r, trials = random.Random(13), 2000
    hits = sum(
        ratio.verdict(side(r, 1000, 0.10, 5), side(r, 750, 0.10, 5)).kind == "regression"
        for _ in range(trials)
    )
    assert hits / trials >= 0.95


def test_few_boots_advice_counts_the_boots_asked_for_not_those_that_count() -> None:
    few = "the interval is wide below 5 per side"
    a, b = [600.0, 610.0, 620.0, 615.0], [1200.0, 1210.0, 1190.0, 1205.0, 1215.0]
    assert any(few in w for w in ratio.verdict(a, b).warnings)
    assert not any(few in w for w in ratio.verdict(a, b, planned=5).warnings)
    assert any(few in w for w in ratio.verdict(a, b, planned=3).warnings)


def test_restored_is_the_share_of_the_log_gap_with_a_covering_interval() -> None:
    """A revert at the good level restores 1, at the bad level 0, half-way (on the log)
    0.5; over simulated boots the 95% interval covers the true share about 95% of the
    time, whatever the share."""
    good, bad = [1000.0, 990.0, 1010.0], [500.0, 495.0, 505.0]
    assert ratio.restored(good, bad, good).ratio == pytest.approx(1.0)
    assert ratio.restored(good, bad, bad).ratio == pytest.approx(0.0)
    half = ratio.restored(good, bad, [707.1, 700.0, 714.3])
    assert half.ratio == pytest.approx(0.5, abs=0.01) and half.low < 0.5 < half.high
    rng = random.Random(7)
    for true in (0.0, 0.6, 1.0):
        level = 1000.0 * (750.0 / 1000.0) ** (1 - true)
        covered = 0
        for _ in range(400):
            good, bad, reverted = (
                [m * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(n)]
                for m, n in ((1000.0, 6), (750.0, 8), (level, 4))
            )
            ci = ratio.restored(good, bad, reverted)
            covered += ci.low <= true <= ci.high
        assert 0.92 <= covered / 400 <= 0.99


def test_restored_refuses_what_has_no_gap_or_too_few_boots() -> None:
    with pytest.raises(means.StatsError, match="no gap"):
        ratio.restored([500.0, 500.0], [500.0, 500.0], [400.0, 410.0])
    with pytest.raises(means.NotEnoughSamples):
        ratio.restored([1000.0, 990.0], [500.0, 505.0], [700.0])


def test_a_share_at_another_confidence_is_the_same_fit_widened():
    """ratio.at re-derives restored's interval at another level from its df, exactly as
    restored computes it there (the revert check's 95% and 99% from one robust fit)."""
    good, bad, rev = [1000.0, 1010.0, 990.0, 980.0, 1020.0], [750.0, 760.0, 740.0], [930.0, 950.0]
    for robust in (False, True):
        at99 = ratio.at(ratio.restored(good, bad, rev, 0.95, robust=robust), 0.99)
        direct = ratio.restored(good, bad, rev, 0.99, robust=robust)
        assert at99.low == pytest.approx(direct.low) and at99.high == pytest.approx(direct.high)
        assert at99.confidence == 0.99 and at99.ratio == direct.ratio
