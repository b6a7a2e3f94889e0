"""The settings of the simulation of the bisection methods (docs/benchmarks.md), each run
with every method (tallied in tally.py, shown by tables.py), and the tallies saved and
merged back (--save).

A setting (Cell) is a product of named axes; every method bisects the same histories
(history i of a cell comes from Random(f"{seed}-{cell}-{i}")) and draws its noise from
the same stream (Random(f"{seed}-{cell}-{i}-noise")), so the endpoint samples, drawn
first, are the same for every method and the methods part only where their choices do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from kbisect.simulate import histories, methods
from kbisect.simulate.tally import Tally
from kbisect.simulate.world import UNDONE, Noise, World, machine_offsets

METHODS = ("sequential", "posterior", "sequential+refs", "posterior+refs")
MATRICES = ("quick", "full", "story", "pool")
STORY_METHODS = ("posterior",)  # --matrix story's methods unless asked otherwise


@dataclass(frozen=True)
class Cell:
    name: str
    shape: str = "linear"
    commits: str = "16:32"
    cv: float = 0.10
    regression: float = 0.25
    broken: float = 0.0
    drift: float = 0.0
    culprits: int = 1  # 2: two culprits, each `regression`
    heavy: bool = False
    scale: float = 1.0  # bisections relative to the others (more at the design point)
    changes: str = "steps"  # steps: `culprits` regressions; fix: one fixed inside the range
    noise: str = "normal"  # world.SHAPES: normal, t3 (scaled to cv), empirical (residuals)
    fast_cv: float | None = None  # the fast (good) level's CV, `cv` the slower levels'
    stale: float = 0.0  # the endpoint check's boots from a host this much slower
    machines: int = 1  # a pool of this many machines, a round of boots at once
    machine_cv: float = 0.0  # the machines' speeds differ by this CV (the machine effect)
    family: str = ""  # the histories and noise of this setting's (default: its own name)
    undone: str = "conflicts"  # world.UNDONE: reverting a regression a later commit fixed

    @property
    def seeds(self) -> str:
        """The name the histories' and the noise's streams are seeded with."""
        return self.family or self.name

    def history(self, rng: random.Random) -> histories.History:
        low, _, high = self.commits.partition(":")
        span = (self.shape, int(low), int(high or low), self.broken)
        if self.changes == "fix":
            return histories.fix_inside(rng, *span, self.regression)
        return histories.make(rng, *span, (self.regression,) * self.culprits)

    def world_noise(self) -> Noise:
        return Noise(
            self.cv,
            self.heavy,
            self.drift,
            shape=self.noise,
            fast_cv=self.fast_cv,
            stale=self.stale,
        )


def cells(mode: str) -> list[Cell]:
    """quick: three settings for the tests; full: the settings around the design
    point (CV 10%, 25% regression, 16-32 linear commits), one axis at a time, plus the
    CV x regression grid; story: the design point and the noise and histories the model
    was not built for (story_cells)."""
    if mode == "quick":
        return [Cell("design"), Cell("merges 300", "merges", "300"), Cell("drift +20%", drift=0.20)]
    if mode == "story":
        return story_cells()
    if mode == "pool":
        return pool_cells()
    grid = [
        Cell(
            f"cv {cv:.0%} reg {reg:.0%}",
            cv=cv,
            regression=reg,
            scale=4.0 if (cv, reg) == (0.10, 0.25) else 1.0,
        )
        for cv in (0.05, 0.10, 0.15, 0.20)
        for reg in (0.10, 0.25, 0.50)
    ]
    sizes = [
        Cell(f"{shape} {n}", shape, n, scale=1 / 3 if n == "3000" else 1.0)
        for shape in ("linear", "merges")
        for n in ("16:32", "300", "3000")
        if (shape, n) != ("linear", "16:32")
    ]
    return [
        *grid,
        *sizes,
        Cell("broken 10%", broken=0.10),
        Cell("drift +20%", drift=0.20),
        Cell("drift -20%", drift=-0.20),
        Cell("drift -20% merges 300", "merges", "300", drift=-0.20),
        Cell("two culprits 15%", regression=0.15, culprits=2),
        Cell("heavy tails", heavy=True),
    ]


def story_cells() -> list[Cell]:
    """The design point; noise drawn from real samples' residuals; t(3) at CV 15%; 5% of
    boots at half speed; the fast (good) level at CV 13%, slower ones at 7%; the endpoint
    samples from a host state 10% slower (no references); two -15% culprits; a -15%
    regression fixed inside the range before the -15% culprit, its revert on the bad
    endpoint either not applying or applying with no effect (world.UNDONE)."""
    return [
        Cell("design"),
        Cell("residuals", noise="empirical"),
        Cell("t3 cv 15%", noise="t3", cv=0.15),
        Cell("outliers 5%", heavy=True),
        Cell("per-side cv 13%/7%", cv=0.07, fast_cv=0.13),
        Cell("stale endpoints 10%", stale=0.10),
        Cell("two culprits 15%", regression=0.15, culprits=2),
        *(
            Cell(
                f"fix inside 15%, revert {u}",
                regression=0.15,
                changes="fix",
                family="fix inside 15%",
                undone=u,
            )
            for u in UNDONE
        ),
    ]


POOL_SIZES = (1, 2, 4, 8)
MACHINE_CVS = (0.0, 0.02, 0.05)


def pool_cells() -> list[Cell]:
    """A pool of k = 1, 2, 4, 8 machines with a machine effect of CV 0%, 2%, 5%, at the
    design point and on 3,000-commit merge histories; every pool bisects the same
    histories with the same boot noise as one machine (family), only the machines'
    speeds and the rounds differ."""
    bases = [Cell("design"), Cell("merges 3000", "merges", "3000")]
    return [
        replace(
            base,
            name=f"{base.name} k{k} machines {cv:.0%}",
            machines=k,
            machine_cv=cv,
            family=base.name,
        )
        for base in bases
        for k in POOL_SIZES
        for cv in MACHINE_CVS
    ]


def run_one(method: str, world: World, s: methods.Settings) -> methods.Result:
    name, refs = method.removesuffix("+refs"), method.endswith("+refs")
    kind = methods.Sequential if name == "sequential" else methods.Bayes
    return kind(world, s, refs).run()


def simulate(
    cell: Cell,
    n: int,
    seed: int,
    wanted: Iterable[str],
    s: methods.Settings,
) -> dict[str, Tally]:
    tallies = {m: Tally() for m in wanted}
    for i in range(max(1, round(n * cell.scale))):
        h = cell.history(random.Random(f"{seed}-{cell.seeds}-{i}"))
        noise = cell.world_noise()
        for m, tally in tallies.items():
            started = time.process_time()
            speeds = random.Random(f"{seed}-{cell.name}-{i}-machines")
            world = World(
                h,
                noise,
                random.Random(f"{seed}-{cell.seeds}-{i}-noise"),
                offsets=machine_offsets(cell.machines, cell.machine_cv, speeds),
                undone=cell.undone,
            )
            tally.add(run_one(m, world, s), h)
            tally.seconds += time.process_time() - started
    return tallies


def dump(results: dict[Cell, dict[str, Tally]]) -> dict[str, Any]:
    """The tallies as JSON (--save), for settings run apart and merged later."""
    return {cell.name: {m: asdict(t) for m, t in ts.items()} for cell, ts in results.items()}


def undump(data: Mapping[str, Any], mode: str) -> dict[Cell, dict[str, Tally]]:
    """dump's content back, each setting found by name among cells(mode); KeyError if
    one is not there."""
    known = {c.name: c for c in cells(mode)}
    out: dict[Cell, dict[str, Tally]] = {}
    for name, ts in data.items():
        cell = known[name]
        for m, t in ts.items():
            keys = [k for k in ("bins", "first_bins", "story_bins") if k in t]
            bins = {k: {int(b): v for b, v in t[k].items()} for k in keys}
            out.setdefault(cell, {})[m] = Tally(**{**t, **bins})
    return out
