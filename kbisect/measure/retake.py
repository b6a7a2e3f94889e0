"""Retaking disturbed samples. A good sample taken while other work used more than a set
share of the host's CPUs (targets/monitor.py) is stored with status "disturbed" (kept on disk,
left out of every statistic) and the same boot is taken again, up to `Policy.retakes`
times per slot; the sample after that counts, flagged by its disturbance record.

A resumed run counts the retakes a slot already used from what is on disk (`trailing`),
so it never retakes more than the bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbisect.core import progress
from kbisect.measure import sample
from kbisect.targets import monitor
from kbisect.targets.base import Target

RETAKES = 2
DISTURBED = sample.DISTURBED


@dataclass(frozen=True)
class Policy:
    """--retakes and --disturbed-share (options.py): 0 retakes keeps every disturbed
    sample, flagged."""

    retakes: int = RETAKES
    share: float = monitor.THRESHOLD

    def as_dict(self) -> dict[str, Any]:
        return {"retakes": self.retakes, "disturbed_share": self.share}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Policy:
        """A saved plan's policy; one from before retakes existed gets the defaults."""
        share = data.get("disturbed_share", monitor.THRESHOLD)
        return cls(int(data.get("retakes", RETAKES)), float(share))


@dataclass
class Slot:
    """The retakes one planned boot has used so far."""

    used: int = 0


def trailing(stored: list[dict[str, Any]]) -> int:
    """Retakes the slot in progress already used: the disturbed samples after the last
    good one (failed boots in between do not end the slot)."""
    n = 0
    for s in reversed(stored):
        if s.get("status") == "ok":
            break
        n += s.get("status") == DISTURBED
    return n


def take(
    target: Target, boot: sample.Boot, policy: Policy, slot: Slot | None = None
) -> dict[str, Any]:
    """sample.take, again while the sample is disturbed and the slot has retakes left."""
    slot = slot if slot is not None else Slot()
    while True:
        s = sample.take(target, boot, threshold=policy.share, retake=slot.used < policy.retakes)
        if s.get("status") != DISTURBED:
            if (s.get("disturbance") or {}).get("disturbed"):
                progress.warn(f"{describe(s)}; kept and flagged (no retakes left)")
            return s
        slot.used += 1
        progress.warn(f"{describe(s)}; kept aside, retake {slot.used} of {policy.retakes}")


def describe(s: dict[str, Any]) -> str:
    """One line: how much of the host others used during the sample."""
    d = s.get("disturbance") or {}
    return (
        f"disturbed sample ({s.get('tps') or 0:.1f} tps): other work used "
        f"{float(d.get('others_peak', 0)) * 100:.0f}% of the host's CPUs at its peak "
        f"(threshold {float(d.get('threshold', 0)) * 100:.0f}%)"
    )
