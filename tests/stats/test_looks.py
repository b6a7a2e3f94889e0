"""The one Bonferroni split over repeated looks (kbisect/stats/looks.py) and its users."""

from __future__ import annotations

import pytest

from kbisect.bisect import check
from kbisect.stats import confirm, looks, sequential


def test_one_sided_claims_spend_alpha_over_k_at_each_end() -> None:
    assert looks.level(0.05, 3, 10, one_sided=True) == pytest.approx(1 - 2 * 0.05 / 8)
    assert looks.level(0.05, 3, 3, one_sided=True) == pytest.approx(0.90)  # two 5% ends


def test_a_two_sided_claim_spends_alpha_over_k_in_all() -> None:
    assert looks.level(0.05, 3, 10, one_sided=False) == pytest.approx(1 - 0.05 / 8)
    assert looks.level(0.05, 4, 4, one_sided=False) == pytest.approx(0.95)  # compare's


@pytest.mark.parametrize(("least", "most"), [(3, 10), (2, 4), (3, 3), (5, 20)])
def test_every_user_gets_its_split_of_alpha(least: int, most: int) -> None:
    k = most - least + 1
    assert check.endpoint_confidence(least, most) == 1 - 2 * 0.05 / k  # one-sided
    for c in (0.9, 0.95, 0.975, 0.99):
        assert sequential.per_look_level(c, least, most) == 1.0 - 2.0 * (1.0 - c) / k
        rule = confirm.Rule(least=least, most=most, confidence=c)
        assert rule.level == 1.0 - 2.0 * (1.0 - c) / k


def test_looks_every_few_samples_are_counted_with_a_shorter_last_step() -> None:
    assert looks.count(3, 10) == 8
    assert looks.count(4, 10, 2) == 4  # 4, 6, 8, 10
    assert looks.count(4, 10, 4) == 3  # 4, 8, 10
    assert looks.count(3, 3, 5) == 1
    for every in (1, 2, 3):  # the re-check over a pool counts its looks the same way
        rule = confirm.Rule(least=3, most=12, every=every)
        assert rule.level == looks.level(0.05, 1, looks.count(3, 12, every), one_sided=True)
