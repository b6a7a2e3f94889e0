"""Where a boot's time went: the mean seconds of each phase over the samples that
recorded them (timings.phases, kept by targets/console.py), in the harness's order."""

from __future__ import annotations

from collections.abc import Sequence

from kbisect.measure.record import Sample

ORDER = (
    "boot",
    "init",
    "fio",
    "template",
    "restore",
    "start",
    "warmup",
    "run",
    "profile",
    "stop",
    "shutdown",
)


def means(samples: Sequence[Sample]) -> tuple[dict[str, float], int]:
    """Each phase's mean seconds over the samples that recorded phases, and how many did."""
    found = [p for s in samples if (p := s.timings.get("phases"))]
    totals: dict[str, float] = {}
    for phases in found:
        for name, seconds in phases.items():
            if isinstance(seconds, int | float):
                totals[name] = totals.get(name, 0.0) + float(seconds)
    known = [n for n in ORDER if n in totals] + sorted(set(totals) - set(ORDER))
    return {n: totals[n] / len(found) for n in known}, len(found)


def line(samples: Sequence[Sample]) -> str | None:
    """`boot 20 s, restore 13 s, ...: 150 s in all (mean of N boots)`, or None."""
    figures, n = means(samples)
    if not n:
        return None
    parts = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in figures.items())
    boots = "boot" if n == 1 else "boots"
    return f"{parts}: {sum(figures.values()):.0f} s in all (mean of {n} {boots})"
