"""The one re-check (bisect/recheck.py): the git method's fixed rule takes exactly
--recheck-samples pairs, interleaved as samples.interleaved took them, and keeps its
record; the posterior's adaptive rule stops early on clear data."""

from __future__ import annotations

import random

import pytest

from kbisect.bisect import recheck
from kbisect.bisect.request import Options
from kbisect.stats import confirm

OPTS = Options(tree=None, good="g", bad="b", scenario="s", arch="x86_64")
KEYS = {
    "parent",
    "culprit",
    "parent_tps",
    "culprit_tps",
    "kind",
    "ratio",
    "low",
    "high",
    "method",
    "warnings",
    "confirmed",
}


def world(level: dict[str, float], seed: int, cv: float = 0.05):
    """fresh() and draw() over in-memory samples; the order of the draws."""
    rng = random.Random(seed)
    got: dict[str, list[float]] = {c: [] for c in level}
    order: list[str] = []

    def draw(c: str) -> None:
        order.append(c)
        got[c].append(level[c] * (1 + cv * rng.gauss(0, 1)))

    return got, order, (lambda c: list(got[c])), draw


@pytest.mark.parametrize("n", [3, 5, 8, 12])
@pytest.mark.parametrize("seed", range(5))
def test_fixed_rule_takes_exactly_n_interleaved_pairs(n, seed):
    _, order, fresh, draw = world({"p": 1000.0, "c": 1000.0 * (1 - 0.3 * (seed % 2))}, seed)
    opts = Options(tree=None, good="g", bad="b", scenario="s", arch="x86_64", recheck_samples=n)
    step, a, b = recheck.sample("p", "c", recheck.fixed(opts), fresh, draw)
    assert len(a) == len(b) == step.n == n
    assert order == ["p", "c"] * n  # as samples.interleaved: parent, culprit, ...
    assert step.kind in ("confirmed", "refuted", "unclear")


@pytest.mark.parametrize("before", [(0, 0), (3, 1), (1, 4), (8, 8), (9, 2)])
def test_stored_samples_count_and_the_shorter_side_is_topped_up_first(before):
    got, order, fresh, draw = world({"p": 1000.0, "c": 700.0}, 1)
    for c, k in zip("pc", before, strict=True):
        got[c] += [1000.0 if c == "p" else 700.0] * k
    _, a, b = recheck.sample("p", "c", recheck.fixed(OPTS), fresh, draw)
    n = OPTS.recheck_samples
    assert (len(a), len(b)) == (max(n, before[0]), max(n, before[1]))
    # the same draws samples.interleaved made: topping k = 1..n up, parent then culprit
    expected = [
        c for k in range(1, n + 1) for c, have in zip("pc", before, strict=True) if have < k
    ]
    assert order == expected


def test_adaptive_rule_stops_early_on_a_clear_regression_and_refutes_none():
    *_, fresh, draw = world({"p": 1000.0, "c": 700.0}, 2, cv=0.02)
    step = recheck.sample("p", "c", recheck.adaptive(OPTS), fresh, draw)[0]
    assert step.kind == "confirmed" and step.n < OPTS.recheck_samples
    *_, fresh, draw = world({"p": 1000.0, "c": 1000.0}, 3, cv=0.002)
    step = recheck.sample("p", "c", recheck.adaptive(OPTS), fresh, draw)[0]
    assert step.kind == "refuted"


def test_adaptive_rule_is_the_posterior_options():
    opts = Options(
        tree=None,
        good="g",
        bad="b",
        scenario="s",
        arch="x86_64",
        recheck_samples=6,
        confidence=0.99,
        higher_is_better=False,
    )
    assert recheck.adaptive(opts) == confirm.Rule(
        least=3, most=6, confidence=0.99, higher_is_better=False
    )
    assert recheck.fixed(opts).least == recheck.fixed(opts).most == 6


def test_git_record_keeps_its_keys_and_verdict():
    rc = recheck.judged("p", "c", [1000.0, 1010.0, 990.0] * 3, [700.0, 705.0, 695.0] * 3, OPTS)
    assert set(rc) == KEYS
    assert rc["kind"] == "regression" and rc["confirmed"]
    assert "confirmed" in recheck.git_line(rc) and "NOT" not in recheck.git_line(rc)
    same = recheck.judged("p", "c", [1000.0, 1010.0, 990.0] * 3, [1001.0, 1009.0, 991.0] * 3, OPTS)
    assert not same["confirmed"] and "NOT CONFIRMED" in recheck.git_line(same)


@pytest.mark.parametrize(("least", "most"), [(3, 8), (3, 3), (2, 6)])
@pytest.mark.parametrize("before", [(0, 0), (2, 0), (0, 5)])
def test_the_rule_looks_once_per_pair_count_as_its_split_assumes(least, most, before, monkeypatch):
    """Samples that never decide: the rule takes exactly most - least + 1 looks from
    `least` pairs on (looks.level's K), none between the two draws of a pair."""
    got, _, fresh, draw = world({"p": 1000.0, "c": 990.0}, 6, cv=0.3)
    for c, k in zip("pc", before, strict=True):
        got[c] += [1000.0] * k
    seen: list[tuple[int, int]] = []
    decide = confirm.decide

    def counted(a, b, rule):
        seen.append((len(a), len(b)))
        return decide(a, b, rule)

    monkeypatch.setattr(confirm, "decide", counted)
    rule = confirm.Rule(least=least, most=most)
    step = recheck.sample("p", "c", rule, fresh, draw)[0]
    assert step.kind == "unclear" and step.n == most
    pairs = [min(s) for s in seen if min(s) >= least]
    assert pairs == list(range(least, most + 1))  # K looks, one per pair count


def test_a_step_just_short_of_the_minimum_effect_is_rarely_confirmed():
    """At the edge (culprit = parent x (1 - min_effect)), confirming is the rule's error:
    over 200 seeded re-checks it happens at most at α = 5%."""
    rule = confirm.Rule(least=3, most=8)
    confirmed = 0
    for seed in range(200):
        *_, fresh, draw = world({"p": 1000.0, "c": 1000.0 * (1 - rule.min_effect)}, seed)
        confirmed += recheck.sample("p", "c", rule, fresh, draw)[0].kind == "confirmed"
    assert confirmed <= 10


def test_the_explanation_is_recorded_with_its_numbers():
    rng = random.Random(8)
    good = [1000 * (1 + 0.03 * rng.gauss(0, 1)) for _ in range(6)]
    bad = [750 * (1 + 0.03 * rng.gauss(0, 1)) for _ in range(6)]
    parent = [1000 * (1 + 0.03 * rng.gauss(0, 1)) for _ in range(6)]
    culprit = [750 * (1 + 0.03 * rng.gauss(0, 1)) for _ in range(6)]
    rule = recheck.adaptive(OPTS)
    rec = recheck.explained(parent, culprit, good, bad, rule)
    assert rec["kind"] == "full"
    assert rec["share_low"] < 1.0 < rec["share_high"]
    assert rec["ends"] == pytest.approx(0.75, rel=0.05)
    half = [866 * (1 + 0.03 * rng.gauss(0, 1)) for _ in range(6)]  # a half-size step
    assert recheck.explained(parent, half, good, bad, rule)["kind"] == "partial"
