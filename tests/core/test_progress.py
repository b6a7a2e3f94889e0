"""core/progress.py: the time left at the rate so far, said as the status lines say it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbisect.core import progress


@pytest.mark.parametrize(
    ("spent", "done", "remaining", "said"),
    [
        (9.0, 0, 5, ""),  # no rate yet
        (9.0, 3, 0, ""),  # nothing left
        (20.0, 2, 4, "~40 s left"),
        (60.0, 1, 0.001, "~1 s left"),  # never "~0 s"
        (120.0, 10, 30, "~6 min left"),
        (60.0, 1, 1, "~1 min left"),
        (20.0, 1, 195, "~1 h 05 min left"),
    ],
)
def test_time_left_says_it_in_the_unit_that_fits(
    spent: float, done: int, remaining: float, said: str
) -> None:
    assert progress.time_left(spent, done, remaining) == said


FORMAT = re.compile(
    r"~([1-9]\d*|[1-5]?\d) s left|~([1-9]|[1-5]\d) min left|~[1-9]\d* h [0-5]\d min left"
)


@given(
    st.floats(0, 1e6, allow_nan=False),
    st.integers(0, 10**5),
    st.integers(0, 10**5),
)
def test_time_left_is_one_of_its_forms_or_nothing(spent: float, done: int, remaining: int) -> None:
    said = progress.time_left(spent, done, remaining)
    assert (said == "") == (done == 0 or remaining == 0)
    assert said == "" or FORMAT.fullmatch(said), said
