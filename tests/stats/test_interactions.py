"""A square's interaction over a pool (stats/interactions.py `_within`): its two effects
and its ratio of ratios come from one fit of stats/blocked.py, and equal what three
separate fits (one `log_contrast` each, the former computation) give."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbisect.measure.record import Sample
from kbisect.stats import blocked, interactions, means, ratio
from kbisect.stats.inference import CONFIDENCE
from kbisect.study import analysis, store
from tests.study.test_study import definition

PREEMPT = {"name": "append", "levels": [{"label": "none"}, {"label": "full"}]}
PAGES = {"name": "pages", "levels": [{"label": "4k"}, {"label": "2M"}]}
VALUES = [{"append": a, "pages": p} for p in ("4k", "2M") for a in ("none", "full")]


def sample(k: int, c: int, tps: float, machine: str) -> Sample:
    return Sample(
        {
            "label": store.label(k, c),
            "status": "ok",
            "tps": tps,
            "fingerprint": {},
            "target": {"name": machine, "pool": "lab", "machine": machine},
        }
    )


# Per machine, per kernel and cell: 1 to 3 boots' tps.
boots = st.lists(st.floats(200.0, 5000.0), min_size=1, max_size=3)
machines = st.lists(
    st.lists(st.lists(boots, min_size=4, max_size=4), min_size=2, max_size=2),
    min_size=2,
    max_size=3,
)


def samples_of(data: list[list[list[list[float]]]]) -> list[Sample]:
    return [
        sample(k, c, x, f"m{j}")
        for j, kernels in enumerate(data)
        for k, cells in enumerate(kernels)
        for c, xs in enumerate(cells)
        for x in xs
    ]


@settings(max_examples=30, deadline=None)
@given(data=machines)
def test_one_fit_gives_the_three_fits_figures(data: list[list[list[list[float]]]]) -> None:
    d = definition(2, VALUES, [PREEMPT, PAGES])
    pts = analysis.points(d, samples_of(data))
    got = {i.kernel: i for i in interactions.interactions(d, pts)}
    ((_, _, _, four),) = interactions.squares(d)
    for k in range(2):
        tps = [pts[(k, c)].tps for c in four]
        on = [pts[(k, c)].machines for c in four]
        try:
            e1 = blocked.log_contrast(tps, on, [-1.0, 1.0, 0.0, 0.0])[0]
            e2 = blocked.log_contrast(tps, on, [0.0, 0.0, -1.0, 1.0])[0]
            d3, se, df = blocked.log_contrast(tps, on, [1.0, -1.0, -1.0, 1.0])
            r = ratio.interval(math.exp(d3), se, df, CONFIDENCE, blocked.METHOD)
        except means.StatsError:
            assert k not in got  # left out, as before
            continue
        i = got[k]
        assert (i.effect_y1, i.effect_y2) == (math.exp(e1), math.exp(e2))
        assert (i.ratio, i.low, i.high) == (r.ratio, r.low, r.high)


def test_a_square_is_fitted_once_per_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    fits = []
    lstsq = np.linalg.lstsq

    def counted(*args: Any, **kwargs: Any) -> Any:
        fits.append(1)
        return lstsq(*args, **kwargs)

    monkeypatch.setattr(np.linalg, "lstsq", counted)
    d = definition(2, VALUES, [PREEMPT, PAGES])
    tps = [1000.0, 1010.0, 990.0]
    data = [[[[x * (1 + 0.1 * c) for x in tps] for c in range(4)]] * 2 for _ in range(2)]
    found = interactions.interactions(d, analysis.points(d, samples_of(data)))
    assert len(found) == 2 and len(fits) == 2  # two kernels, one square: one fit each


def test_log_contrasts_refuses_what_log_contrast_refuses() -> None:
    tps = [[1000.0, 1001.0], [900.0, 901.0]]
    apart = [["m0", "m0"], ["m1", "m1"]]  # no machine measured both groups
    with pytest.raises(means.StatsError, match="cannot be told"):
        blocked.log_contrasts(tps, apart, [[-1.0, 1.0]])
    with pytest.raises(means.StatsError, match="sum to 0"):
        blocked.log_contrasts(tps, [["m0", "m1"], ["m0", "m1"]], [[-1.0, 1.0], [1.0, 1.0]])
    with pytest.raises(means.StatsError, match="no contrast"):
        blocked.log_contrasts(tps, [["m0", "m1"], ["m0", "m1"]], [])
