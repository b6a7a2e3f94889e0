"""The sequential compare's stopping rule (kbisect/stats/stopping.py) and the loop that
boots and looks (kbisect/compare/sequential.py `play`)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbisect.compare import schedule, sequential
from kbisect.stats import looks, ratio, stopping

RULE = stopping.Rule()  # 2% min effect, looks after 3..10 boots a side


def side(mu: float, cv: float, n: int, seed: int) -> list[float]:
    r = random.Random(seed)
    return [r.gauss(mu, mu * cv) for _ in range(n)]


def test_each_look_spends_alpha_over_k_two_sided() -> None:
    assert RULE.looks == 8
    assert RULE.level == looks.level(0.05, 3, 10, one_sided=False) == pytest.approx(0.99375)
    assert stopping.Rule.upto(2).least == 2  # at most 2 a side: one look, at 95%
    assert stopping.Rule.upto(2).level == pytest.approx(0.95)
    assert stopping.Rule.upto(20).least == stopping.LEAST


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (stopping.Rule(least=1), "need 2 <= least <= most"),
        (stopping.Rule(least=5, most=4), "need 2 <= least <= most"),
        (stopping.Rule(min_effect=1.0), "must be in [0, 1)"),
        (stopping.Rule(confidence=1.0), "must be between 0 and 1"),
    ],
)
def test_a_rule_that_cannot_decide_is_refused(rule: stopping.Rule, words: str) -> None:
    with pytest.raises(stopping.BadStoppingRule, match=re.escape(words)):
        rule.check()


def test_before_the_first_look_more_and_at_the_plans_end_undecided() -> None:
    a, b = [1000.0, 1010.0], [500.0, 505.0]
    assert stopping.decide(a, b, RULE) == stopping.Stop(stopping.MORE, 2, 0, None)
    assert stopping.decide(a, b, RULE, last=True).kind == stopping.UNDECIDED


def test_a_halving_is_significant_at_the_first_look() -> None:
    stop = stopping.decide(side(1000, 0.1, 3, 1), side(500, 0.1, 3, 2), RULE)
    assert (stop.kind, stop.n, stop.look) == (stopping.SIGNIFICANT, 3, 1)
    assert stop.ratio is not None and stop.ratio.high < 0.98
    assert stop.ratio.confidence == RULE.level
    why = stopping.reason(stop, RULE)
    assert why.startswith("stopped after 3 boots a side (look 1): the 99.38% CI [")
    assert "clears the 2% minimum effect (sequential: 95% over up to 8 looks" in why


def test_tight_equal_sides_are_equivalent_and_wide_ones_go_on() -> None:
    a, b = side(1000, 0.002, 3, 3), side(1000, 0.002, 3, 4)
    stop = stopping.decide(a, b, RULE)
    assert stop.kind == stopping.EQUIVALENT
    assert "lies within ±2%: no difference larger than 2%" in stopping.reason(stop, RULE)
    wide = stopping.decide(side(1000, 0.1, 5, 5), side(1000, 0.1, 5, 6), RULE)
    assert (wide.kind, wide.look) == (stopping.MORE, 3)
    at_most = stopping.decide(side(1000, 0.1, 10, 5), side(1000, 0.1, 10, 6), RULE)
    assert at_most.kind == stopping.UNDECIDED
    assert "neither clears the 2% minimum effect nor lies within ±2%" in stopping.reason(
        at_most, RULE
    )


def test_with_no_minimum_effect_nothing_is_equivalent() -> None:
    rule = stopping.Rule(min_effect=0.0)
    a, b = [1000.0, 1000.0, 1000.0], [1000.0, 1000.0, 1000.0]
    assert stopping.decide(a, b, rule, last=True).kind == stopping.UNDECIDED


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(3, 10),
    change=st.floats(0.3, 2.0),
    cv=st.floats(0.001, 0.3),
    effect=st.floats(0.0, 0.3),
    seed=st.integers(0, 10**6),
)
def test_the_kind_is_what_the_interval_at_the_looks_level_says(
    n: int, change: float, cv: float, effect: float, seed: int
) -> None:
    rule = stopping.Rule(min_effect=effect)
    a, b = side(1000, cv, n, seed), side(1000 * change, cv, n, seed + 1)
    stop = stopping.decide(a, b, rule)
    r = ratio.ratio_ci(a, b, rule.level)
    assert stop.ratio == r and stop.look == n - 2
    beyond = r.high < 1 - effect or r.low > 1 + effect
    within = 1 - effect < r.low and r.high < 1 + effect
    expected = "significant" if beyond else "equivalent" if within else None
    assert stop.kind == expected or (expected is None and stop.kind in ("more", "undecided"))
    assert (stop.kind == "undecided") == (expected is None and n == 10)
    # a significant stop is a difference by the verdict at the same level
    v = sequential.verdict(a, b, min_effect=effect, confidence=rule.level, planned=None, most=10)
    if stop.kind == "significant":
        assert v.kind in ("regression", "improvement")


# -- the loop ----------------------------------------------------------------------------


class Feed:
    """Slots taken from two lists of tps (None: a slot that yields no figure)."""

    def __init__(self, a: Sequence[float | None], b: Sequence[float | None]) -> None:
        self.left = {"A": list(a), "B": list(b)}
        self.tps: dict[str, list[float]] = {"A": [], "B": []}
        self.taken: list[int] = []
        self.order = schedule.order(len(a))[0]
        self.ends = list(range(2, len(self.order) + 1, 2))  # a round a pair: one target

    def rounds(self, lo: int, hi: int) -> None:
        for i in range(lo, hi):
            self.take(i)

    def take(self, i: int) -> None:
        self.taken.append(i)
        x = self.left[self.order[i]].pop(0)
        if x is not None:
            self.tps[self.order[i]].append(x)

    def counted(self) -> tuple[list[float], list[float], None]:
        return self.tps["A"], self.tps["B"], None


def test_play_stops_at_the_first_settling_pair() -> None:
    feed = Feed(side(1000, 0.05, 10, 7), side(500, 0.05, 10, 8))
    stop, reached = sequential.play(RULE, feed.ends, 0, feed.rounds, feed.counted)
    assert stop is not None and (stop.kind, stop.n, reached) == (stopping.SIGNIFICANT, 3, 6)
    assert feed.taken == [0, 1, 2, 3, 4, 5]


def test_play_without_a_rule_takes_every_slot() -> None:
    feed = Feed([1000.0] * 3, [500.0, 501.0, 502.0])
    assert sequential.play(None, feed.ends, 0, feed.rounds, feed.counted) == (None, 6)
    assert feed.taken == [0, 1, 2, 3, 4, 5]


def test_play_runs_to_the_most_when_nothing_settles() -> None:
    rule = stopping.Rule.upto(4)
    feed = Feed(side(1000, 0.1, 4, 9), side(1000, 0.1, 4, 10))
    stop, reached = sequential.play(rule, feed.ends, 0, feed.rounds, feed.counted)
    assert stop is not None and (stop.kind, stop.n, reached) == (stopping.UNDECIDED, 4, 8)


def test_a_resumed_play_looks_before_its_next_boot() -> None:
    feed = Feed(side(1000, 0.05, 10, 7), side(500, 0.05, 10, 8))
    for i in range(6):  # taken before the interruption, never looked at
        feed.take(i)
    feed.taken.clear()
    stop, reached = sequential.play(RULE, feed.ends, 6, feed.rounds, feed.counted)
    assert stop is not None and (stop.kind, reached, feed.taken) == ("significant", 6, [])


def test_a_pair_that_did_not_grow_the_shorter_side_is_no_new_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked: list[int] = []
    real = stopping.decide

    def counting(
        a: list[float], b: list[float], rule: stopping.Rule, *, last: bool = False, **kw: Any
    ) -> stopping.Stop:
        looked.append(min(len(a), len(b)))
        return real(a, b, rule, last=last, **kw)

    monkeypatch.setattr(stopping, "decide", counting)
    a: list[float | None] = [1000.0, 1010.0, 990.0, None, 1000.0]  # A's 4th slot failed
    feed = Feed(a, [1000.0, 1020.0, 980.0, 1000.0, 990.0])
    stop, reached = sequential.play(stopping.Rule(most=5), feed.ends, 0, feed.rounds, feed.counted)
    assert reached == 10 and stop is not None and stop.kind == stopping.UNDECIDED
    assert looked == [1, 2, 3, 4]  # n=3 once (pair 4 left it at 3), 4 at the plan's end


def test_the_level_keeps_the_false_stops_under_alpha() -> None:
    """At the minimum effect's edge (B 2% slower, CV 2%), the rule stops "significant"
    only when a look's interval misses the truth: at most 5% of the runs in all."""
    significant, missed, trials = 0, 0, 300
    for t in range(trials):
        feed = Feed(side(1000, 0.02, 10, 2 * t), side(980, 0.02, 10, 2 * t + 1))
        stop, _ = sequential.play(RULE, feed.ends, 0, feed.rounds, feed.counted)
        assert stop is not None and stop.ratio is not None
        significant += stop.kind == stopping.SIGNIFICANT
        missed += not stop.ratio.low <= 0.98 <= stop.ratio.high
    assert significant / trials <= 0.05 and missed / trials <= 0.05
