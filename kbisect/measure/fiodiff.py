"""The fio preflight's figures compared between the sides of a compare.

Each boot's fingerprint carries `storage.fio` (harness/fio.py). The figures move from boot
to boot, so the sides are compared by their medians, and only beyond NOISE: the sides'
disks differ when the median commit flush (fdatasync p50) or random read or write IOPS of
one side is more than NOISE away from the other's. A slower disk can pass for a scheduler
regression, or hide one: the report says so before anyone reads the tps.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NOISE = 0.25  # a median more than 25% away from the other side's
# (job, figure, label, unit, decisive: warned about when beyond NOISE)
FIGURES = (
    ("wal", "syncs_per_s", "commits/s (write + fdatasync)", "/s", False),
    ("wal", "sync_p50_us", "fdatasync p50", "µs", True),
    ("wal", "sync_p99_us", "fdatasync p99", "µs", False),
    ("randread", "iops", "8 KiB random read IOPS", "", True),
    ("randread", "clat_p99_us", "random read p99", "µs", False),
    ("randwrite", "iops", "8 KiB random write IOPS", "", True),
    ("randwrite", "clat_p99_us", "random write p99", "µs", False),
)


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    medians: dict[str, float | None]  # side -> median over its boots (None: no figure)
    counts: dict[str, int]
    decisive: bool

    @property
    def ratio(self) -> float | None:
        """Second side's median over the first's."""
        a, b = list(self.medians.values())[:2]
        return b / a if a and b is not None else None

    @property
    def beyond_noise(self) -> bool:
        r = self.ratio
        return self.decisive and r is not None and abs(r - 1.0) > NOISE


def _fio(fp: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    storage = (fp or {}).get("storage")
    fio = storage.get("fio") if isinstance(storage, Mapping) else None
    return fio if isinstance(fio, Mapping) else None


def rows(sides: Mapping[str, Sequence[Mapping[str, Any] | None]]) -> list[Row]:
    """One row per figure, from each side's fingerprints; [] when no boot ran fio."""
    found = {s: [f for f in map(_fio, fps) if f is not None] for s, fps in sides.items()}
    if not any(found.values()):
        return []
    out = []
    for job, name, label, unit, decisive in FIGURES:
        medians: dict[str, float | None] = {}
        counts = {}
        for side, fios in found.items():
            figures = [(f.get(job) or {}).get(name) for f in fios]
            values = [float(v) for v in figures if isinstance(v, int | float)]
            medians[side] = statistics.median(values) if values else None
            counts[side] = len(values)
        out.append(Row(label, unit, medians, counts, decisive))
    return out


def warnings(table: list[Row], names: Mapping[str, str]) -> list[str]:
    """One line when the sides' storage differs beyond noise (empty otherwise)."""
    bad = [r for r in table if r.beyond_noise]
    if not bad:
        return []
    a, b = list(names)[:2]
    parts = "; ".join(
        f"{r.label} {a} {_num(r.medians[a])}{r.unit} vs {b} {_num(r.medians[b])}{r.unit} "
        f"({b}/{a} {r.ratio:.2f}x)"
        for r in bad
    )
    return [
        f"storage differs between the sides beyond {NOISE * 100:.0f}%: {parts}; a slower "
        "disk can pass for a kernel regression (see Storage)"
    ]


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def markdown(table: list[Row], names: Mapping[str, str]) -> list[str]:
    """The figures side by side: median (boots), and the ratio; ⚠ beyond noise."""
    if not table:
        return ["No fio preflight in these boots (fio.enabled is off, or PGDATA on tmpfs)."]
    sides = list(names)
    head = "| fio (median of boots) | " + " | ".join(f"{s}: {names[s]}" for s in sides)
    out = [head + f" | {sides[-1]}/{sides[0]} |", "|---|" + "---:|" * (len(sides) + 1)]
    for r in table:
        cells = " | ".join(f"{_num(r.medians[s])}{r.unit} ({r.counts[s]})" for s in sides)
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "—"
        flag = "⚠ " if r.beyond_noise else ""
        out.append(f"| {flag}{r.label} | {cells} | {flag}{ratio} |")
    decisive = ", ".join(r.label for r in table if r.decisive)
    out += ["", f"A difference beyond {NOISE * 100:.0f}% in {decisive} is flagged."]
    return out
