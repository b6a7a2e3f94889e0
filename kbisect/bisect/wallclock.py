"""A bisection's samples against wall-clock time (both methods): the drift check on the
revisions sampled more than once (the good and bad endpoints at the start and, with
`--references N`, again alongside the revisions under test; revisions sampled again; the
re-check's pairs) and its one-line warning saying what was done about it (the plot of
tps against time per revision: report/figures.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbisect.bisect import samples
from kbisect.measure import timeline
from kbisect.stats import drift


def action(method: str, references: int) -> str:
    """What the bisection did about drift, as the warning ends."""
    if method == "posterior" and references:
        return (
            f"corrected: the posterior fitted it as a time trend, with a reference boot "
            f"after every {references} test boots"
        )
    if references:
        return (
            f"corrected: each step decided on samples brought back along it, with a "
            f"reference boot after every {references} test boots"
        )
    if method == "posterior":
        return "not corrected (--references 0): re-run with --references 3 if the answer is suspect"
    return (
        "NOT corrected: the threshold was fixed from the endpoints' first samples; "
        "re-run with --references 3"
    )


def store_rows(store: Path, commits: Sequence[str], t0: float | None = None) -> list[drift.Timed]:
    """The stored ok samples of commits as drift.Timed (seconds since t0, default the
    first), oldest first."""
    loaded = [s for c in dict.fromkeys(commits) for s in samples.loaded(store, c)]
    return timeline.timed(loaded, lambda s: s.revision, t0)


def check(rows: Sequence[drift.Timed], method: str, references: int) -> dict[str, Any]:
    """The trend test over every revision sampled more than once (the slope within each,
    so that a revision's own level never passes for drift): the endpoints at the start
    and as references, revisions sampled again, the re-check's pairs.
    {"trend": ... | None, "warning": ...}."""
    tr, line = timeline.check(rows, "revisions sampled more than once", action(method, references))
    return {"trend": tr.as_dict() if tr else None, "warning": line}
