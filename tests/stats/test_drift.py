"""Drift-aware references (kbisect/stats/drift.py): the trend test, the warning, the
correction."""

from __future__ import annotations

import math
import random

import pytest

from kbisect.stats import drift
from kbisect.stats.drift import Timed


def references(rng: random.Random, moved: float, n: int = 24, cv: float = 0.05) -> list[Timed]:
    """Good (1000) and bad (750) references in turn, one per time unit, the host's speed
    moving linearly by `moved` over the run."""
    out = []
    for i in range(n):
        rev, level = ("good", 1000.0) if i % 2 == 0 else ("bad", 750.0)
        factor = 1 + moved * i / (n - 1)
        out.append(Timed(rev, float(i), level * factor * (1 + cv * rng.gauss(0, 1))))
    return out


def test_a_drifting_series_is_detected_with_what_moved_and_by_how_much():
    tr = drift.trend(references(random.Random(1), 0.20))
    assert tr is not None
    assert tr.p < 0.001 and tr.low > 0
    assert tr.moved() == pytest.approx(0.20, abs=0.07)
    line = drift.warning(tr, "23 boots", "decisions use the paired position")
    assert line is not None and "faster" in line and "23 boots" in line
    slower = drift.trend(references(random.Random(1), -0.20))
    assert slower is not None and "slower" in (drift.warning(slower, "x", "y") or "")


def test_a_flat_series_gives_no_warning_in_most_runs():
    warned = sum(
        drift.warning(drift.trend(references(random.Random(s), 0.0)), "r", "a") is not None
        for s in range(200)
    )
    assert warned <= 6  # alpha 1%, and at least 3% moved


def test_a_revision_s_own_level_is_not_drift():
    """Good early and bad late, without drift: the slope comes from within revisions."""
    rng = random.Random(2)
    samples = [Timed("good", float(i), 1000 * (1 + 0.03 * rng.gauss(0, 1))) for i in range(8)]
    samples += [Timed("bad", float(i), 750 * (1 + 0.03 * rng.gauss(0, 1))) for i in range(8, 16)]
    tr = drift.trend(samples)
    assert tr is not None and tr.low < 0 < tr.high


def test_one_half_speed_reference_boot_is_not_corrected_for():
    rng = random.Random(3)
    samples = references(rng, 0.0)
    samples[-1] = Timed(samples[-1].revision, samples[-1].t, samples[-1].tps * 0.5)
    raw = drift.trend(samples)
    assert raw is not None and raw.slope < 0  # the outlier alone tilts the plain fit
    assert abs(drift.correction(samples)) < abs(raw.slope) / 3


def test_correction_follows_a_real_drift_and_brings_samples_back():
    samples = references(random.Random(4), 0.20)
    slope = drift.correction(samples)
    assert math.expm1(slope * 23) == pytest.approx(0.20, abs=0.07)
    back = drift.detrended(samples, slope)
    goods = [v for s, v in zip(samples, back, strict=True) if s.revision == "good"]
    assert abs(goods[-1] / goods[0] - 1) < 0.2  # was ~+20% before


def test_not_enough_samples_is_no_trend():
    assert drift.trend([Timed("g", 0.0, 1.0), Timed("b", 1.0, 2.0)]) is None
    assert drift.warning(None, "r", "a") is None
    assert drift.correction([Timed("g", 0.0, 1.0)]) == 0.0


def test_threshold_is_the_geometric_mean_brought_back_along_the_drift():
    refs = [Timed("g", 0.0, 1000.0), Timed("b", 1.0, 640.0), Timed("g", 10.0, 1100.0)]
    assert drift.threshold(refs, "g", "b", 0.0) == pytest.approx(math.sqrt(1050 * 640))
    slope = math.log(1.1) / 10
    assert drift.threshold(refs, "g", "b", slope) == pytest.approx(
        math.sqrt(1000 * 640 / 1.1**0.1), rel=1e-9
    )
