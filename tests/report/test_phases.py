"""report/phases.py: the mean seconds of each phase of a boot, in the harness's order."""

from __future__ import annotations

from kbisect.measure.record import Sample
from kbisect.report import phases


def _sample(**seconds: float) -> Sample:
    return Sample({"timings": {"boot_s": 1.0, "phases": seconds}})


def test_means_follow_the_harness_order_and_skip_older_samples() -> None:
    samples = [
        _sample(run=90.0, boot=20.0, restore=14.0),
        _sample(run=92.0, boot=10.0, restore=12.0, extra=1.0),
        Sample({"timings": {"boot_s": 40.0}}),  # recorded before phases were: left out
    ]
    figures, n = phases.means(samples)
    assert n == 2
    assert list(figures) == ["boot", "restore", "run", "extra"]
    assert figures["boot"] == 15.0 and figures["run"] == 91.0 and figures["extra"] == 0.5
    line = phases.line(samples)
    assert line == "boot 15 s, restore 13 s, run 91 s, extra 0 s: 120 s in all (mean of 2 boots)"


def test_no_phases_no_line() -> None:
    assert phases.line([Sample({"timings": {"boot_s": 40.0}})]) is None
    assert phases.line([]) is None
