"""Samples against wall-clock time, wherever samples accumulate (bisect, compare, study):
when each boot started, the trend test over groups (a revision, a compare side, a study
cell) and the one-line warning that says what moved, by how much and what was done. The
rows it makes are what kbisect/report/plots.py's `tps_over_time` draws.

The statistics are stats/drift.py's: a common slope of log tps over time
*within* each group (so that a group's own level never passes for drift), boots that
`stats.outliers` flags within their group left out, a t test on the slope.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from kbisect.core import clock
from kbisect.measure import retake
from kbisect.measure.record import Sample
from kbisect.stats import drift

_BOOT_DIR = re.compile(r"(\d{13})-")  # sample.new_boot_dir: <ms since the epoch>-<label>


def when(sample: Sample) -> float | None:
    """Seconds since the epoch at which the sample's boot started: the boot directory's
    millisecond stamp, else the record's `created` (to the second, at its end); None for
    a record with neither."""
    m = _BOOT_DIR.match(Path(sample.boot_dir or "").name)
    if m:
        return int(m.group(1)) / 1000.0
    try:
        created = dt.datetime.strptime(sample.created, clock.FORMAT)
    except ValueError:
        return None
    return created.replace(tzinfo=dt.UTC).timestamp()


def timed(
    samples: Sequence[Sample],
    group: Callable[[Sample], str | None],
    t0: float | None = None,
) -> list[drift.Timed]:
    """The samples that count (retake.counts) as drift.Timed(group, seconds since t0
    (default: the first), tps); samples whose group is None are left out."""
    rows = [(group(s), when(s), s.tps or 0.0) for s in samples if retake.counts(s)]
    kept = [(g, t, tps) for g, t, tps in rows if g is not None and t is not None]
    if not kept:
        return []
    start = min(t for _, t, _ in kept) if t0 is None else t0
    return [drift.Timed(g, t - start, tps) for g, t, tps in sorted(kept, key=lambda r: r[1])]


def span(seconds: float) -> str:
    """A time span as a report reads it: "95 min", "40 s", "3.2 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def check(
    rows: Sequence[drift.Timed], what: str, action: str
) -> tuple[drift.Trend | None, str | None]:
    """The trend of the rows (outliers within each group left out) and its warning line,
    None unless they moved significantly and noticeably."""
    tr = drift.trend(drift.robust(rows))
    if tr is None:
        return None, None
    return tr, drift.warning(tr, span(tr.end - tr.start), action, what)


def sides(samples: Sequence[Sample]) -> tuple[list[drift.Timed], str | None]:
    """A compare's samples against time by side, and the warning if both sides moved."""
    rows = timed(samples, lambda s: s.label or None)
    action = (
        "the boots were interleaved, so it hit both sides alike: the ratio is fair, "
        "each side's mean and CV include it"
    )
    return rows, check(rows, "both sides", action)[1]
