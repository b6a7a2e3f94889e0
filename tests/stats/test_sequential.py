"""kbisect.stats.sequential: the good/bad/more/unclear rule of one bisect step."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from kbisect.core.exceptions import UserError
from kbisect.stats import means, sequential

GOOD = [812.3, 790.1, 834.5]


def run_step(r: random.Random, mu: float, threshold: float, cv: float) -> sequential.Decision:
    xs: list[float] = []
    while (d := sequential.decide(xs, threshold)).verdict == "more":
        xs.append(r.gauss(mu, mu * cv))
    return d


def test_per_look_level_is_bonferroni_over_the_looks() -> None:
    assert sequential.per_look_level(0.95, 3, 10) == pytest.approx(1 - 0.1 / 8)
    assert sequential.per_look_level(0.95, 3, 3) == pytest.approx(0.90)  # two 5% tails


def test_clearly_above_is_good_and_reason_has_the_numbers() -> None:
    d = sequential.decide(GOOD, 600.0)
    mean, low, high = means.mean_ci(GOOD, 1 - 0.1 / 8)
    assert (d.verdict, d.n) == ("good", 3)
    assert (d.mean, d.low, d.high) == pytest.approx((mean, low, high))
    assert d.reason == (
        f"mean 812.3 tps, 98.75% CI [{low:.1f}, {high:.1f}] (one-sided 95% over 8 looks) "
        "wholly above threshold 600.0 after 3 of at most 10 samples: good"
    )
    assert "\n" not in d.reason


def test_direction() -> None:
    assert sequential.decide(GOOD, 1000.0).verdict == "bad"
    assert sequential.decide(GOOD, 600.0, higher_is_better=False).verdict == "bad"
    assert sequential.decide(GOOD, 1000.0, higher_is_better=False).verdict == "good"
    assert "wholly below threshold 1000.0" in sequential.decide(GOOD, 1000.0).reason
    # a single look: each end of a 90% interval is a one-sided 95% bound
    one = sequential.decide(GOOD, 700.0, runs_max=3)
    _, low, high = means.mean_ci(GOOD, 0.90)
    assert (one.verdict, one.low, one.high) == ("good", low, high)
    assert f"90% CI [{low:.1f}, {high:.1f}] (one-sided 95% over 1 look)" in one.reason


def test_boundary_of_the_interval_is_not_a_decision() -> None:
    d = sequential.decide(GOOD, 0.0)
    assert sequential.decide(GOOD, d.low - 1e-6).verdict == "good"
    assert sequential.decide(GOOD, d.low + 1e-6).verdict == "more"
    assert sequential.decide(GOOD, d.high + 1e-6).verdict == "bad"
    assert sequential.decide(GOOD, d.high - 1e-6).verdict == "more"


def test_fewer_than_runs_min_asks_for_more() -> None:
    for xs in ([], [5000.0], [5000.0, 5001.0]):
        d = sequential.decide(xs, 700.0)
        assert (d.verdict, d.n) == ("more", len(xs))
        assert f"{len(xs)} of at least 3 samples" in d.reason
    assert sequential.decide([5000.0, 5001.0], 700.0, runs_min=2).verdict == "good"
    d = json.loads(json.dumps(sequential.decide([], 1.0).as_dict(), allow_nan=False))
    assert d["mean"] is None and d["low"] is None and d["verdict"] == "more"


def test_mean_on_the_threshold_is_more_then_unclear_at_runs_max() -> None:
    xs = [690.0, 710.0, 700.0, 695.0, 705.0]
    assert sequential.decide(xs[:4], 700.0, runs_max=5).verdict == "more"
    d = sequential.decide(xs, 700.0, runs_max=5)
    assert d.verdict == "unclear" and "contains threshold 700.0" in d.reason
    assert sequential.decide(xs * 3, 700.0, runs_max=5).verdict == "unclear"  # past runs_max
    assert sequential.decide([700.0] * 3, 700.0, runs_max=3).verdict == "unclear"


def test_bad_settings_are_user_errors() -> None:
    for kw in ({"runs_min": 1}, {"runs_min": 5, "runs_max": 4}, {"confidence": 1.5}):
        with pytest.raises(UserError):
            sequential.decide(GOOD, 700.0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("mu", "wrong"), [(1250.0, "bad"), (750.0, "good")])
def test_simulated_wrong_verdicts_25_percent_from_threshold(mu: float, wrong: str) -> None:
    r, trials = random.Random(21), 1000
    ds = [run_step(r, mu, 1000.0, 0.10) for _ in range(trials)]
    counts = Counter(d.verdict for d in ds)
    assert counts[wrong] == 0  # the bound is 5%; this far from the threshold it is ~0
    assert counts["unclear"] <= 0.01 * trials  # skipped, not wrong: ~0.3% above, 0% below
    mean_n = sum(d.n for d in ds) / trials
    assert 3.0 <= mean_n <= 6.0  # docs/statistics.md: ~5.1 above, ~3.9 below


def test_simulated_error_on_the_threshold_stays_within_alpha() -> None:
    r, trials = random.Random(22), 1000
    counts = Counter(run_step(r, 1000.0, 1000.0, 0.10).verdict for _ in range(trials))
    # each wrong-side call is bounded by α = 5% (Bonferroni is conservative: ~2.5%)
    assert counts["good"] <= 0.05 * trials and counts["bad"] <= 0.05 * trials
    assert counts["unclear"] >= 0.85 * trials
