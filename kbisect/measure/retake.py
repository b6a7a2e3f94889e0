"""Disturbed samples: a good sample taken while other work used more than a set share of
the host's CPUs (targets/monitor.py) never counts. It is stored with status "disturbed"
(kept on disk, left out of every statistic); the run waits until the host is quiet again
and takes the same boot again, up to `Policy.retakes` times per slot. When the retakes
are used up the slot is left without a figure: the caller says so (compare and study
take it again on --resume, before anything else; a bisection's draw fails like a failed
boot). `--count-disturbed` (`Policy.count`) keeps the old behaviour: the try after the
last retake is kept and counted, flagged (`counted` in its disturbance record).

Why wait rather than move the slot to the end of the schedule: a compare interleaves
its sides (ABBA) so that drift cancels, and a study shuffles complete blocks for the same
reason; a slot moved to the end would put one side's boot where drift is largest. Waiting
keeps the plan's order, costs a few seconds of polling instead of a boot taken into the
same hog, and works the same for a bisection, which has no schedule to move a slot in.

A resumed run counts the retakes a slot already used from what is on disk (`trailing`),
so it never retakes more than the bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbisect.core import progress
from kbisect.measure import sample
from kbisect.measure.record import Sample
from kbisect.targets import monitor
from kbisect.targets.base import Target

RETAKES = 2
DISTURBED = sample.DISTURBED


@dataclass(frozen=True)
class Policy:
    """--retakes, --disturbed-share and --count-disturbed (options.py)."""

    retakes: int = RETAKES
    share: float = monitor.THRESHOLD
    count: bool = False  # --count-disturbed: the try after the last retake counts, flagged

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"retakes": self.retakes, "disturbed_share": self.share}
        return {**out, "count_disturbed": True} if self.count else out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """A saved plan's policy; one from before retakes existed gets the defaults."""
        share = data.get("disturbed_share", monitor.THRESHOLD)
        count = bool(data.get("count_disturbed", False))
        return cls(int(data.get("retakes", RETAKES)), float(share), count)


@dataclass
class Slot:
    """The retakes one planned boot has used so far."""

    used: int = 0


def counts(s: Sample) -> bool:
    """Whether a stored sample is a figure of the statistics: a good boot, undisturbed,
    or disturbed and kept by --count-disturbed. A sample an earlier kbisect kept and
    counted when its retakes ran out does not count any more."""
    if not s.ok or not s.tps:
        return False
    return not s.disturbed or bool(s.disturbance.get("counted"))


def left_out(s: Sample) -> bool:
    """A disturbed sample that does not count and whose slot was not filled after it:
    the last try of a slot (`last_try`), or one an earlier kbisect kept and counted."""
    if s.status == DISTURBED:
        return bool(s.disturbance.get("last_try"))
    return s.ok and s.disturbed and not counts(s)


def trailing(stored: Sequence[Sample]) -> int:
    """Retakes the slot in progress already used: the disturbed samples after the last
    good one or the last try of a slot (failed boots in between do not end the slot)."""
    n = 0
    for s in reversed(stored):
        if s.ok or left_out(s):
            break
        n += s.status == DISTURBED
    return n


def take(target: Target, boot: sample.Boot, policy: Policy, slot: Slot | None = None) -> Sample:
    """sample.take, again (once the host is quiet) while the sample is disturbed and the
    slot has retakes left. The sample returned has status DISTURBED when the retakes ran
    out (`counts` is False for it); with policy.count the last try is kept, counted."""
    slot = slot if slot is not None else Slot()
    while True:
        last = slot.used >= policy.retakes
        mode = (sample.COUNT if policy.count else sample.LAST) if last else sample.RETAKE
        s = sample.take(target, boot, threshold=policy.share, when_disturbed=mode)
        if s.status != DISTURBED:
            if s.disturbed:
                progress.warn(f"{describe(s)}; kept and counted, flagged (--count-disturbed)")
            return s
        if last:
            progress.warn(f"{describe(s)}; not counted, and no retakes left (--retakes)")
            return s
        slot.used += 1
        progress.warn(f"{describe(s)}; kept aside, retake {slot.used} of {policy.retakes}")
        target.wait_quiet(policy.share)


def describe(s: Sample) -> str:
    """One line: how much of the host others used during the sample."""
    d = s.disturbance
    return (
        f"disturbed sample ({s.tps or 0:.1f} tps): other work used "
        f"{float(d.get('others_peak', 0)) * 100:.0f}% of the host's CPUs at its peak "
        f"(threshold {float(d.get('threshold', 0)) * 100:.0f}%)"
    )
