"""A compare's samples by the machine that took them (a pool's, targets/pool/): the
blocked interval when more than one machine took boots that count (stats/blocked.py),
and each machine's own figures for the reports. A run on one machine has neither: its
interval is the single-target one, unchanged."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from kbisect.measure import retake
from kbisect.measure.record import Sample
from kbisect.stats import means, ratio

Interval = means.Interval


def counted(samples: Sequence[Sample], side: str) -> tuple[list[float], list[str]]:
    """A side's boots that count (retake.counts), in the order given, and their machines."""
    kept = [s for s in samples if s.label == side and retake.counts(s)]
    return [s.tps or 0.0 for s in kept], [s.machine for s in kept]


def interval(samples: Sequence[Sample]) -> Interval | None:
    """The blocked interval for these samples' boots that count, when they ran on more
    than one machine; None (the single-target interval) otherwise. It must be given the
    tps of `counted`, in that order."""
    (_, ma), (_, mb) = counted(samples, "A"), counted(samples, "B")
    if len(set(ma) | set(mb)) < 2:
        return None

    return functools.partial(ratio.ratio_ci, machines=(ma, mb))


def blocks(samples: Sequence[Sample]) -> tuple[list[str], list[str]] | None:
    """Each side's machines of the boots that count (as `counted`), for the verdict's
    warnings within machines; None when one machine took them all."""
    (_, ma), (_, mb) = counted(samples, "A"), counted(samples, "B")
    return (ma, mb) if len(set(ma) | set(mb)) > 1 else None


@dataclass(frozen=True)
class Part:
    """A side's boots on one machine: the tps of those that count, and the failed ones."""

    machine: str
    tps: list[float]
    failed: int


def parts(samples: Sequence[Sample], side: str) -> list[Part]:
    """A side's boots per machine, machines in the order they first took a boot (of
    either side); empty when one machine (or none) took every boot that counts."""
    if blocks(samples) is None:
        return []
    mine = [s for s in samples if s.label == side]
    out = []
    for name in dict.fromkeys(s.machine for s in samples):
        if not (here := [s for s in mine if s.machine == name]):
            continue
        tps = [s.tps or 0.0 for s in here if retake.counts(s)]
        out.append(Part(name, tps, len(here) - len(tps)))
    return out


@dataclass(frozen=True)
class Row:
    """One machine's figures: its boots that count per side and their means."""

    machine: str
    n_a: int
    mean_a: float | None
    n_b: int
    mean_b: float | None

    @property
    def ratio(self) -> float | None:
        """B/A on this machine alone (None when it measured one side only)."""
        if self.mean_a and self.mean_b:
            return self.mean_b / self.mean_a
        return None


def rows(samples: Sequence[Sample]) -> list[Row]:
    """Each machine's figures, machines in the order they first took a boot; empty when
    one machine (or none) took every boot that counts."""
    (a, ma), (b, mb) = counted(samples, "A"), counted(samples, "B")
    names = list(dict.fromkeys([s.machine for s in samples if retake.counts(s)]))
    if len(names) < 2:
        return []

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    out = []
    for name in names:
        xa = [x for x, m in zip(a, ma, strict=True) if m == name]
        xb = [x for x, m in zip(b, mb, strict=True) if m == name]
        out.append(Row(name, len(xa), mean(xa), len(xb), mean(xb)))
    return out


def lines(samples: Sequence[Sample]) -> list[str]:
    """One line per machine, for the text reports (none for a run on one machine)."""
    out = []
    for r in rows(samples):
        a = f"{r.mean_a:.1f}" if r.mean_a is not None else "-"
        b = f"{r.mean_b:.1f}" if r.mean_b is not None else "-"
        ratio = f"{r.ratio:.3f}x" if r.ratio is not None else "-"
        out.append(f"{r.machine}: A {a} tps ({r.n_a}), B {b} tps ({r.n_b}), B/A {ratio}")
    return out
