"""The boot plan of a study: randomized complete blocks, saved before the first boot.

Each block boots every kernel in every cell once, in an order shuffled with a recorded
seed, so drift (the host, thermal state, page cache) hits every kernel and cell alike;
a study with N boots per cell has N blocks. The plan is saved (schedule.json) before the
first boot. Resume walks it again: the k-th planned slot of a (kernel, cell) is done when
that unit has at least k good samples, so no sample is taken twice and none is lost. A
failed boot is stored (sample.take does it), kept out of the statistics and retried in
place like compare does; one still failing after its retries, or left disturbed when its
retakes ran out (a disturbed sample never counts: measure/retake.py), stays pending for
the next --resume, which takes the pending slots in plan order.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kbisect.core import progress
from kbisect.core.exceptions import BenchmarkError, BootError
from kbisect.measure import retake, sample
from kbisect.scenario.scenario import Scenario
from kbisect.study import store
from kbisect.targets.base import Kernel, Target
from kbisect.targets.pool import dispatch

VERSION = 1


@dataclass(frozen=True)
class Slot:
    block: int
    kernel: int
    cell: int

    @property
    def unit(self) -> tuple[int, int]:
        return (self.kernel, self.cell)

    @property
    def label(self) -> str:
        return store.label(self.kernel, self.cell)


def new_seed() -> int:
    return random.SystemRandom().randrange(2**31)


def plan(kernels: int, cells: Sequence[int], boots: int, seed: int) -> list[Slot]:
    """`boots` blocks; each is every kernel x cell once, shuffled."""
    rng = random.Random(seed)
    slots: list[Slot] = []
    for block in range(boots):
        units = [(k, c) for k in range(kernels) for c in cells]
        rng.shuffle(units)
        slots += [Slot(block, k, c) for k, c in units]
    return slots


def to_json(slots: Sequence[Slot], seed: int, boots: int) -> dict[str, Any]:
    return {
        "version": VERSION,
        "kind": "study-schedule",
        "seed": seed,
        "blocks": boots,
        "slots": [asdict(s) for s in slots],
    }


def from_json(data: Mapping[str, Any]) -> list[Slot]:
    return [Slot(int(s["block"]), int(s["kernel"]), int(s["cell"])) for s in data["slots"]]


def pending(slots: Sequence[Slot], done: Mapping[tuple[int, int], int]) -> list[Slot]:
    """The slots still to take, in plan order: a unit's first `done[unit]` slots are done."""
    seen: dict[tuple[int, int], int] = {}
    out = []
    for slot in slots:
        seen[slot.unit] = seen.get(slot.unit, 0) + 1
        if seen[slot.unit] > done.get(slot.unit, 0):
            out.append(slot)
    return out


@dataclass
class Boots:
    """What the schedule boots: per kernel index its image, per cell its scenario and
    command line; `name(slot)` for progress lines."""

    target: Target
    kernels: Sequence[Kernel]
    scens: Mapping[int, Scenario]
    appends: Mapping[int, str]
    name: Callable[[Slot], str]
    policy: retake.Policy = field(default_factory=retake.Policy)  # disturbed: retaken how often


def take(b: Boots, slot: Slot, out: Path, retries: int, used: int = 0) -> bool:
    """One planned sample, retried up to `retries` times, a disturbed one retaken (with
    `used` retakes already stored); True if it was taken."""
    retakes = retake.Slot(used)
    for attempt in range(retries + 1):
        again = f", retry {attempt}" if attempt else ""
        progress.step(f"block {slot.block + 1}: {b.name(slot)}{again}")
        try:
            boot = sample.Boot(
                b.kernels[slot.kernel], b.scens[slot.cell], out, b.appends[slot.cell], slot.label
            )
            s = retake.take(b.target, boot, b.policy, retakes)
        except (BootError, BenchmarkError) as exc:
            progress.warn(f"{b.name(slot)}: failed, kept out of the statistics: {exc}")
            continue
        if s.status == retake.DISTURBED:
            progress.warn(f"{b.name(slot)}: left disturbed (no retakes left), not counted")
            return False
        progress.step(f"{b.name(slot)}: {s.tps:.1f} tps")
        return True
    return False


def run(b: Boots, slots: Sequence[Slot], out: Path, retries: int) -> list[Slot]:
    """Take every pending slot in plan order over the target's machines (a plain target:
    a pool of one, one slot after the other; targets/pool/dispatch.py), the machine as a
    block: block k goes whole to machine k mod N, so each machine boots every kernel in
    every cell, and a kernel-to-kernel comparison within a block stays on one machine.
    A quarantined machine's slots go to the others. The slots still missing."""
    todo = pending(slots, store.ok_counts(out))
    if len(todo) < len(slots):
        progress.step(f"resuming: {len(slots) - len(todo)} of {len(slots)} samples already taken")
    used = store.retakes_used(out)  # the slot in progress per unit, on resume
    names = [m.name for m in dispatch.members(b.target)]
    progress.step(f"{len(todo)} samples on {len(names)} machine(s) ({', '.join(names)})")

    def task(slot: Slot, retakes: int) -> dispatch.Task[bool]:
        def run_on(machine: Target) -> bool:
            return take(replace(b, target=machine), slot, out, retries, retakes)

        return dispatch.Task(run_on, names[slot.block % len(names)])

    tasks = [task(slot, used.pop(slot.unit, 0)) for slot in todo]
    took = dispatch.run_each(b.target, tasks, strike=lambda took: took is not True)
    return [slot for slot, t in zip(todo, took, strict=True) if t is not True]
