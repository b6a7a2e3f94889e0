"""The endpoint check (kbisect/bisect/check.py): a one-sided test of "bad worse than good"
over the looks from runs-min to runs-max, and its false-pass rate at equal endpoints."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from kbisect.bisect import check
from kbisect.bisect.request import Options
from kbisect.stats import looks, means, ratio

OPTS = Options(tree=None, good="g", bad="b", scenario="s", arch="x86_64")

# a t(3) endpoint pair at CV 15% with a true 25% difference (the simulator's story
# matrix, setting "t3 cv 15%", seed 1, bisection 24): a boot at 1.65 and one at 0.62 of
# the bad level, one at 1.30 of the good; the two-sided gate refused it at every look
T3_GOOD = [1042.1, 949.9, 928.6, 1296.3, 984.3, 1045.1, 1019.9, 969.2, 976.5, 807.2]
T3_BAD = [688.1, 869.8, 609.9, 1236.6, 781.5, 774.0, 468.0, 767.1, 780.2, 826.8]


def lists(good: list[float], bad: list[float]) -> Callable[[str, int], list[float]]:
    """top_up over fixed samples: the first k of each side."""
    return lambda commit, k: (good if commit == "g" else bad)[:k]


def test_the_check_is_one_sided_at_5_percent_over_its_looks() -> None:
    # 8 looks (3..10): each look's interval is the 98.75% one, its bad end a one-sided
    # bound at 0.625%; the two-sided 99.375% it had spent only 2.5% on the side that passes
    assert check.endpoint_confidence(3, 10) == pytest.approx(1 - 2 * 0.05 / 8)
    assert check.endpoint_confidence(3, 3) == pytest.approx(0.90)  # one look: a 5% end
    assert check.endpoint_confidence(3, 10) == looks.level(0.05, 3, 10, one_sided=True)


def test_heavy_tailed_endpoints_the_two_sided_check_refused_now_pass() -> None:
    two_sided = looks.level(0.05, 3, 10, one_sided=False)
    for n in range(3, 11):
        old = ratio.verdict(T3_GOOD[:n], T3_BAD[:n], confidence=two_sided, interval=ratio.ROBUST)
        assert old.kind == "no significant difference"
    v = check.endpoint_verdict(lists(T3_GOOD, T3_BAD), "g", "b", OPTS)
    assert v.kind == "regression"
    assert v.a.n == v.b.n == 9  # at the 9th pair
    assert v.ratio.high < 1.0
    check.check_endpoints(v)  # passes


def test_bad_better_than_good_is_still_refused_as_swapped() -> None:
    v = check.endpoint_verdict(lists(T3_BAD, T3_GOOD), "g", "b", OPTS)
    assert v.kind == "improvement"
    with pytest.raises(check.BadEndpoints, match="bad is better than good"):
        check.check_endpoints(v)


def test_equal_endpoints_pass_at_most_alpha_over_all_looks() -> None:
    """200 seeded pairs of endpoints at the same level, normal noise, each side its own CV
    (5% to 15%), looked at from 3 to 10 pairs as the check does: they pass (bad called
    significantly worse at some look) at most ENDPOINT_ALPHA of the time (measured 2/200;
    1.5-3.1% in 1,000-draw runs, docs/statistics.md). The same draws judged at a one-sided
    5% at every look, without the split over the looks, pass 20/200: the count can tell a
    level that is not split."""
    rng = random.Random(29)
    split = unsplit = 0
    draws = 200
    for _ in range(draws):
        cv_g, cv_b = rng.uniform(0.05, 0.15), rng.uniform(0.05, 0.15)
        good = [1000.0 * (1 + cv_g * rng.gauss(0, 1)) for _ in range(OPTS.runs_max)]
        bad = [1000.0 * (1 + cv_b * rng.gauss(0, 1)) for _ in range(OPTS.runs_max)]
        v = check.endpoint_verdict(lists(good, bad), "g", "b", OPTS)
        split += v.kind == "regression"
        unsplit += any(
            ratio.verdict(good[:n], bad[:n], confidence=0.90, interval=ratio.ROBUST).kind
            == "regression"
            for n in range(OPTS.runs_min, OPTS.runs_max + 1)
        )
    assert split / draws <= check.ENDPOINT_ALPHA
    assert unsplit / draws > check.ENDPOINT_ALPHA


# -- over a pool: k/2 pairs a look -------------------------------------------------------


def test_over_a_pool_each_look_fills_a_round_and_the_level_counts_those_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 4 machines: 2 pairs a look, the first look at 4 a side (8 boots, two full rounds),
    # then 6, 8, 10: 4 looks, each at the one-sided 1 - 2α/4; 8 machines: 4 pairs a look
    assert [check.pairs_a_look(k) for k in (1, 2, 3, 4, 8)] == [1, 1, 1, 2, 4]
    assert check.first_look(3, 10, 2) == 4 and check.first_look(3, 10, 4) == 4
    assert check.first_look(3, 3, 4) == 3  # never past runs-max
    assert check.first_look(3, 10, 1) == 3
    assert check.endpoint_confidence(3, 10, 2) == pytest.approx(1 - 2 * 0.05 / 4)
    assert check.endpoint_confidence(3, 10, 4) == pytest.approx(1 - 2 * 0.05 / 3)  # 4, 8, 10
    assert check.endpoint_confidence(3, 10, 1) == check.endpoint_confidence(3, 10)
    looked: list[tuple[int, int, float]] = []
    verdict = ratio.verdict

    def spy(a: list[float], b: list[float], **kw: object) -> means.Verdict:
        looked.append((len(a), len(b), float(kw["confidence"])))  # type: ignore[arg-type]
        return verdict(a, b, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ratio, "verdict", spy)
    same = [1000.0, 1010.0, 990.0, 1005.0, 995.0] * 2  # the endpoints never differ
    v = check.endpoint_verdict(lists(same, same), "g", "b", OPTS, every=2)
    assert v.kind != "regression" and v.a.n == v.b.n == OPTS.runs_max
    assert [(a, b) for a, b, _ in looked] == [(4, 4), (6, 6), (8, 8), (10, 10)]
    assert {c for *_, c in looked} == {check.endpoint_confidence(3, 10, 2)}
    looked.clear()
    check.endpoint_verdict(lists(same, same), "g", "b", OPTS)  # one machine: as before
    assert [a for a, _, _ in looked] == list(range(3, 11))


def test_over_a_pool_equal_endpoints_pass_at_most_alpha_over_its_looks() -> None:
    """The false-pass rate of the pool's looks (4 machines: 4, 6, 8, 10 pairs), on the
    seeded draws of the one-machine test: at most ENDPOINT_ALPHA; judged at each of those
    looks at an unsplit one-sided 5% they pass more often."""
    rng = random.Random(31)
    split = unsplit = 0
    draws = 200
    for _ in range(draws):
        cv_g, cv_b = rng.uniform(0.05, 0.15), rng.uniform(0.05, 0.15)
        good = [1000.0 * (1 + cv_g * rng.gauss(0, 1)) for _ in range(OPTS.runs_max)]
        bad = [1000.0 * (1 + cv_b * rng.gauss(0, 1)) for _ in range(OPTS.runs_max)]
        v = check.endpoint_verdict(lists(good, bad), "g", "b", OPTS, every=2)
        split += v.kind == "regression"
        unsplit += any(
            ratio.verdict(good[:n], bad[:n], confidence=0.90, interval=ratio.ROBUST).kind
            == "regression"
            for n in (4, 6, 8, 10)
        )
    assert split / draws <= check.ENDPOINT_ALPHA
    assert unsplit > split
