"""Real boot-to-boot noise for the simulator: the relative residuals of stored samples.

A side is the ok samples of one run that measured one thing: an A/B side of a compare, a
study's cell, a bisection's revision (its store, or one re-check of it). Its relative
residuals are log(tps) - mean(log(tps)) over its samples; a side needs MIN_SAMPLES. The
committed file (RESIDUALS, written by scripts/residuals) holds every side with where it
came from; the simulator's empirical noise (world.py) resamples one side's residuals.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core.exceptions import UserError
from kbisect.measure import results
from kbisect.measure.record import Sample

RESIDUALS = Path(__file__).with_name("residuals.json")
MIN_SAMPLES = 3
# Run directories left out by default: their spread is not boot-to-boot noise.
LEFT_OUT = {
    "drift-bisect": "a planted drifting host (scripts/drift-demo), not boot noise",
    "pool-vng-bisect": "two TCG guests sharing the host's two cores (each one's speed moves "
    "with the other's phase), not one machine's boot noise",
}


class BadResiduals(UserError):
    """The residuals file is missing or not one scripts/residuals writes."""


@dataclass(frozen=True)
class Side:
    scenario: str
    source: str  # the run directory and the side in it
    residuals: tuple[float, ...]

    @property
    def cv(self) -> float:
        """The side's sample standard deviation of log(tps)."""
        n = len(self.residuals)
        return math.sqrt(sum(r * r for r in self.residuals) / (n - 1))

    def draw(self, rng: random.Random) -> float:
        """A noise factor exp(r), r one of the residuals at random, scaled by √(n/(n-1))
        so that the draws' variance is the side's sample variance."""
        n = len(self.residuals)
        return math.exp(rng.choice(self.residuals) * math.sqrt(n / (n - 1)))


def relative(tps: Sequence[float]) -> list[float]:
    """log(tps) - mean(log(tps))."""
    logs = [math.log(x) for x in tps]
    mean = sum(logs) / len(logs)
    return [x - mean for x in logs]


def _side_of(sample: Sample) -> str:
    """The side's name; over a pool, one side per machine (machines differ by a few
    percent, which is not boot-to-boot noise)."""
    commit, label = (sample.commit or "")[:12], sample.label
    side = f"side {label} ({commit})" if label else f"revision {commit}"
    target = sample.target
    return f"{side} on {target.get('machine')}" if target.get("pool") else side


def where(run_dir: Path, root: Path) -> str:
    """The run directory as the file names it: relative to here, or under the root's name
    when the root is elsewhere (a results directory)."""
    here = Path.cwd()
    if run_dir.resolve().is_relative_to(here):
        return os.path.relpath(run_dir.resolve(), here)
    return f"{root.name}/{run_dir.relative_to(root)}"


def collect(
    roots: Iterable[Path], left_out: dict[str, str] | None = None
) -> tuple[list[Side], list[str]]:
    """Every side (>= MIN_SAMPLES ok samples) of the runs under the roots, and a line for
    each run or sample left out. A boot seen twice (a run copied from one root to another,
    or a sample copied inside one) counts once: the first root's."""
    skip = LEFT_OUT if left_out is None else left_out
    sides: list[Side] = []
    notes: list[str] = []
    seen: set[str] = set()
    for root in roots:
        for folder in sorted(root.rglob(results.SAMPLES)):
            run_dir = folder.parent
            here = where(run_dir, root)
            parts = here.split("/")
            hit = next((k for k in skip if k in parts), None)
            if hit is not None:
                note = f"{'/'.join(parts[: parts.index(hit) + 1])}: left out, {skip[hit]}"
                if note not in notes:
                    notes.append(note)
                continue
            kept, copies = results.without_copies(run_dir)
            notes.extend(f"{here}: {c}" for c in copies)
            groups: dict[tuple[str, str], list[float]] = {}
            repeated = fake = 0
            for sample in kept:
                key = json.dumps([sample.boot_dir, sample.created, sample.tps])
                if key in seen:
                    repeated += 1
                    continue
                seen.add(key)
                if not sample.ok or not sample.tps:
                    continue
                if sample.target.get("kind") == "fake":
                    fake += 1
                    continue
                name = sample.scenario or "?"
                groups.setdefault((name, _side_of(sample)), []).append(sample.tps)
            if repeated:
                notes.append(f"{here}: {repeated} samples repeat an earlier root's, left out")
            if fake:
                notes.append(f"{here}: {fake} samples from the fake target, left out")
            for (scenario, side), tps in groups.items():
                if len(tps) >= MIN_SAMPLES:
                    rel = tuple(round(r, 6) for r in relative(tps))
                    sides.append(Side(scenario, f"{here}: {side}", rel))
    return sides, notes


def carried(previous: Sequence[Side], read: Sequence[Side]) -> list[Side]:
    """The sides of an earlier file whose runs are not here to read again (another
    machine's results directory): kept, so that writing the file anew on another
    checkout loses no real sample. A run that is here is read again instead."""
    have = {s.source.split(":")[0] for s in read}
    return [
        s
        for s in previous
        if (run := s.source.split(":")[0]) not in have and not Path(run).exists()
    ]


def as_dict(sides: Sequence[Side], roots: Sequence[str], notes: Sequence[str]) -> dict[str, Any]:
    """The file's content."""
    return {
        "about": (
            "Relative residuals log(tps) - mean(log(tps)) of real stored samples, one entry "
            f"per side (a run's A/B side, study cell or bisected revision) with >= "
            f"{MIN_SAMPLES} ok samples; written by scripts/residuals, read by "
            "kbisect/simulate/residuals.py for the simulator's empirical noise."
        ),
        "roots": list(roots),
        "notes": list(notes),
        "sides": [
            {
                "scenario": s.scenario,
                "source": s.source,
                "n": len(s.residuals),
                "cv": round(s.cv, 4),
                "residuals": list(s.residuals),
            }
            for s in sides
        ],
    }


def load(path: Path = RESIDUALS) -> list[Side]:
    """The sides of a residuals file; BadResiduals (one line) if it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        sides = [
            Side(str(e["scenario"]), str(e["source"]), tuple(float(r) for r in e["residuals"]))
            for e in data["sides"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadResiduals(
            f"{path}: not a residuals file ({exc}); write it with scripts/residuals"
        ) from None
    short = [s.source for s in sides if len(s.residuals) < MIN_SAMPLES]
    if not sides or short:
        raise BadResiduals(
            f"{path}: {'no sides' if not sides else f'{short[0]} has < {MIN_SAMPLES} residuals'}"
            "; write it with scripts/residuals"
        )
    return sides


@functools.cache
def sides() -> tuple[Side, ...]:
    """The committed file's sides, read once."""
    return tuple(load())
