"""The revert check's decision (bisect/verify.py) on samples built by hand: when it goes
on, when it boots good, and what kind it settles on."""

from __future__ import annotations

from kbisect.bisect import verify
from kbisect.stats import ratio, stopping

NOISE = (0.04, -0.05, 0.01, -0.03, 0.06, -0.02, 0.03, -0.04, 0.0, 0.02)


def side(level: float, n: int) -> list[float]:
    return [level * (1 + e) for e in NOISE[:n]]


def test_a_revert_that_restores_the_gap_is_all_at_the_first_decided_look():
    good, bad, rev = side(1000, 5), side(750, 5), side(1000, 5)
    assert verify.sides(good, bad, rev, 1) == []
    found = verify.shares(good, bad, rev)
    assert found is not None and verify.kind_of(*found) == "all"


def test_part_at_95_but_not_at_99_goes_on_until_most():
    """930 tps of a 1000-to-750 gap: the 95% interval lies below 100%, the 99% one does
    not; below MOST a side the check takes another round, at MOST it is decided."""
    good, bad, rev = side(1000, 5), side(750, 5), side(930, 5)
    found = verify.shares(good, bad, rev)
    assert found is not None and found[0].high < 1 <= found[1].high
    assert verify.sides(good, bad, rev, 1) == [verify.REVERT, verify.BAD]
    most = verify.RULE.most
    assert verify.sides(side(1000, most), side(750, most), side(930, most), 1) == []


def test_a_share_that_reads_part_boots_good_until_it_has_as_many_as_the_revert():
    good, bad, rev = side(1000, 3), side(750, 5), side(880, 5)
    assert verify.sides(good, bad, rev, 1) == [verify.GOOD]
    assert verify.sides(good, bad, rev, 2) == [verify.GOOD, verify.GOOD]
    assert verify.sides(side(1000, 5), bad, rev, 1) == []  # part at 99% too: decided
    found = verify.shares(side(1000, 5), bad, rev)
    assert found is not None and verify.kind_of(*found) == "part"


def test_all_or_part_needs_a_gap():
    """In a rest the gap left may be noise: no gap, no all and no part."""
    found = verify.shares(side(1000, 5), side(750, 5), side(1000, 5))
    assert found is not None
    assert verify.kind_of(*found, gap=False) in ("none", "unclear")
    assert verify._gap(side(1000, 5), side(750, 5))
    assert not verify._gap(side(1000, 5), side(990, 5))


def test_a_half_speed_good_boot_does_not_move_the_share():
    """Good's one half-speed boot is set apart (the three sides fitted together): the
    share stays near 100%; the plain means would read 162% [-119%, 443%]."""
    good, bad, rev = [1000.0, 1010.0, 990.0, 500.0, 1005.0], side(750, 5), side(1000, 5)
    found = verify.shares(good, bad, rev)
    assert found is not None and 0.9 < found[0].ratio < 1.1 and found[0].low > 0.5
    plain = ratio.restored(good, bad, rev)
    assert plain.ratio > 1.5 and plain.low < 0


def test_a_revert_with_no_effect_ends_the_check_once_the_share_is_clearly_short():
    """Bad with the revert at bad's level: compare's rule would boot until it calls "no
    difference" (up to MOST a side); the check ends as soon as the share's 99% interval
    lies below 100%, on none, whatever compare's rule says."""
    good, bad, rev = side(1000, 5), side(750, 4), side(750, 4)
    found = verify.shares(good, bad, rev)
    assert found is not None and found[1].high < 1
    assert not stopping.decide(bad, rev, verify.RULE, interval=ratio.ROBUST).final
    assert verify.sides(good, bad, rev, 1) == []
    assert verify.kind_of(*found) == "none"
