"""Whether the re-checked step explains the endpoints' difference (confirm.explains)."""

from __future__ import annotations

import math
import random

import pytest

from kbisect.stats import confirm, robust

RULE = confirm.Rule()


def boots(rng: random.Random, level: float, cv: float, n: int) -> list[float]:
    return [level * math.exp(cv * rng.gauss(0.0, 1.0)) for _ in range(n)]


def explain(step: float, ends: float, cv: float = 0.04, n: int = 8, seed: int = 1):
    rng = random.Random(seed)
    s = robust.estimate(boots(rng, 1000, cv, n), boots(rng, 1000 * step, cv, n))
    e = robust.estimate(boots(rng, 1000, cv, n), boots(rng, 1000 * ends, cv, n))
    return confirm.explains(s, e, RULE)


@pytest.mark.parametrize("seed", range(5))
def test_one_step_that_is_the_whole_difference_is_full(seed: int) -> None:
    x = explain(0.8, 0.8, seed=seed)
    assert x.kind == "full"
    assert x.share == pytest.approx(1.0, abs=0.25)
    assert x.share_low is not None and x.share_high is not None
    assert x.share_low < x.share < x.share_high
    assert x.rest_low < x.rest < x.rest_high and x.level == pytest.approx(0.90)


@pytest.mark.parametrize("seed", range(5))
def test_one_of_two_equal_steps_is_partial(seed: int) -> None:
    x = explain(0.85, 0.85 * 0.85, seed=seed)
    assert x.kind == "partial"
    assert x.share == pytest.approx(0.5, abs=0.2)
    assert x.rest < 1.0  # the rest is a regression too, elsewhere


@pytest.mark.parametrize("seed", range(5))
def test_a_step_larger_than_the_difference_is_excess(seed: int) -> None:
    x = explain(0.7, 0.85, seed=seed)  # something in the range gave part of it back
    assert x.kind == "excess" and x.share is not None and x.share > 1.5
    assert x.rest > 1.0


def test_few_noisy_samples_are_unclear() -> None:
    x = explain(0.8, 0.8, cv=0.15, n=3, seed=2)
    assert x.kind == "unclear"


def test_the_direction_is_the_endpoints_own() -> None:
    """Lower is better (latency): the endpoints' change is upward; a step of the same
    size is full, half of it partial, by the same rule."""
    assert explain(1.25, 1.25).kind == "full"
    assert explain(1.12, 1.25).kind == "partial"


def test_a_share_beyond_fiellers_reach_is_unbounded() -> None:
    s = robust.estimate([1000.0, 1010.0, 990.0], [800.0, 810.0, 790.0])
    e = robust.estimate([1000.0, 1300.0, 700.0], [990.0, 1290.0, 690.0])
    x = confirm.explains(s, e, RULE)
    assert x.share_low is None and x.share_high is None
    assert x.kind in ("unclear", "excess")


@pytest.mark.parametrize("cv", [0.05, 0.10])
def test_each_claim_is_wrong_at_most_alpha(cv: float) -> None:
    """200 seeded draws (8 fresh pairs, 6 endpoint boots a side): a single step that is
    the whole difference is called partial or excess at most 5% of the time each, and a
    step that is half of it (in log terms) full at most 5%."""
    rng = random.Random(4)
    kinds: dict[str, list[str]] = {"single": [], "half": []}
    for _ in range(200):
        for name, step in (("single", 0.8), ("half", math.sqrt(0.8))):
            s = robust.estimate(boots(rng, 1000, cv, 8), boots(rng, 1000 * step, cv, 8))
            e = robust.estimate(boots(rng, 1000, cv, 6), boots(rng, 800, cv, 6))
            kinds[name].append(confirm.explains(s, e, RULE).kind)
    assert kinds["single"].count("partial") <= 10 and kinds["single"].count("excess") <= 10
    assert kinds["half"].count("full") <= 10
    if cv == 0.05:  # precise enough to tell, most of the time
        assert kinds["single"].count("full") >= 140 and kinds["half"].count("partial") >= 140


def test_a_rule_that_looks_every_few_pairs_splits_its_error_over_those_looks():
    """One machine: a look per pair from least to most (K = most - least + 1). Over a pool
    the re-check draws k/2 pairs a round and looks once per round: K is the count of those
    looks (bounded from above), so each look is less strict than a look per pair."""
    from kbisect.stats import looks

    one = confirm.Rule(least=3, most=12, confidence=0.95)
    assert one.level == pytest.approx(looks.level(0.05, 3, 12, one_sided=True))
    assert one.level == pytest.approx(1 - 2 * 0.05 / 10)
    assert confirm.Rule(least=3, most=12, every=1).level == one.level
    # 4 pairs a round (8 machines): looks at 4, 8, 12 at most 4 of them
    assert confirm.Rule(least=3, most=12, every=4).level == pytest.approx(1 - 2 * 0.05 / 4)
    # 2 pairs a round: at most 6 looks
    assert confirm.Rule(least=3, most=12, every=2).level == pytest.approx(1 - 2 * 0.05 / 6)
    assert confirm.Rule(least=3, most=3, every=4).level == pytest.approx(1 - 2 * 0.05)
