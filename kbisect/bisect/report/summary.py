"""What every bisection's summary.json holds, either method: the run (command, scenario,
tree, endpoints, options, threshold), the drift check over its samples and its exit
code. git.py and posterior.py add the answer, the re-check and the revisions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kbisect.bisect import wallclock
from kbisect.bisect.state import Run
from kbisect.core import clock, progress
from kbisect.stats import drift


def common(run: Run, timed: Sequence[drift.Timed]) -> dict[str, Any]:
    """The keys of either method's summary; timed: the samples the drift check reads."""
    return {
        "version": 1,
        "kind": "bisect",
        "created": clock.utc_now(),
        "command": progress.reproduce_line(run.options.argv()),
        "scenario": run.scenario,
        "sides": {},
        "tree": str(run.tree),
        "good": run.good,
        "bad": run.bad,
        "options": run.options.as_dict(),
        "threshold": run.threshold,
        "threshold_source": run.threshold_source,
        "drift": wallclock.check(timed, run.options.method, run.options.references),
        "bisect_log": run.bisect_log,
        "exit": run.exit,
        **({"patches": run.patches} if run.patches else {}),
    }
