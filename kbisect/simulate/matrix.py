"""The settings of the simulation of the bisection methods (docs/benchmarks.md), run and
tallied, and their tables.

A setting (Cell) is a product of named axes; every method bisects the same histories
(history i of a cell comes from Random(f"{seed}-{cell}-{i}")) and draws its noise from
the same stream (Random(f"{seed}-{cell}-{i}-noise")), so the endpoint samples, drawn
first, are the same for every method and the methods part only where their choices do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kbisect.simulate import histories, methods
from kbisect.simulate.world import Noise, World

METHODS = ("sequential", "posterior", "sequential+refs", "posterior+refs")
BINS = ((0.95, 0.99), (0.99, 0.999), (0.999, 1.0 + 1e-9))


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

    def history(self, rng: random.Random) -> histories.History:
        low, _, high = self.commits.partition(":")
        effects = (self.regression,) * self.culprits
        return histories.make(rng, self.shape, int(low), int(high or low), self.broken, effects)


def cells(mode: str) -> list[Cell]:
    """quick: three settings for the tests; full: the settings around the design
    point (CV 10%, 25% regression, 16-32 linear commits), one axis at a time, plus the
    CV x regression grid."""
    if mode == "quick":
        return [Cell("design"), Cell("merges 300", "merges", "300"), Cell("drift +20%", drift=0.20)]
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


@dataclass
class Tally:
    runs: int = 0
    refused: int = 0
    boots_bisect: int = 0
    boots: int = 0
    builds: int = 0
    wrong: int = 0
    ranges: int = 0
    warned: int = 0
    confirmed: int = 0
    bins: dict[int, list[int]] = field(default_factory=dict)  # bin -> [answers, right]
    first_bins: dict[int, list[int]] = field(default_factory=dict)  # the same at the stop
    refused_boots: int = 0
    seconds: float = 0.0

    def add(self, r: methods.Result, culprits: Iterable[str]) -> None:
        self.runs += 1
        if r.kind == "refused":
            self.refused += 1
            self.refused_boots += r.boots
            return
        right = bool(set(r.candidates) & set(culprits))
        self.boots += r.boots
        self.boots_bisect += r.boots_bisect
        self.builds += r.builds
        self.wrong += not right
        self.ranges += right and len(r.candidates) > 1
        self.warned += r.warned
        self.confirmed += r.recheck == "confirmed"
        if r.p is not None and len(r.candidates) == 1:
            _binned(self.bins, r.p, right)
        if r.first is not None:
            _binned(self.first_bins, r.first[1], r.first[0] in set(culprits))

    @property
    def answered(self) -> int:
        return self.runs - self.refused


def _binned(bins: dict[int, list[int]], p: float, right: bool) -> None:
    for k, (low, high) in enumerate(BINS):
        if low <= p < high:
            entry = bins.setdefault(k, [0, 0])
            entry[0] += 1
            entry[1] += right


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
    progress: Callable[[str], None] | None = None,
) -> dict[str, Tally]:
    tallies = {m: Tally() for m in wanted}
    for i in range(max(1, round(n * cell.scale))):
        h = cell.history(random.Random(f"{seed}-{cell.name}-{i}"))
        noise = Noise(cell.cv, cell.heavy, cell.drift)
        for m, tally in tallies.items():
            started = time.process_time()
            world = World(h, noise, random.Random(f"{seed}-{cell.name}-{i}-noise"))
            tally.add(run_one(m, world, s), h.culprits)
            tally.seconds += time.process_time() - started
    if progress is not None:
        progress(cell.name)
    return tallies


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "-"


def _reliability(bins: dict[int, list[int]]) -> str:
    answers = sum(a for a, _ in bins.values())
    right = sum(r for _, r in bins.values())
    return _pct(right, answers) if answers else "-"


def table(results: dict[Cell, dict[str, Tally]]) -> str:
    """One row per setting and method."""
    lines = [
        "| setting | method | boots (bisect) | boots (all) | builds | wrong culprit | "
        "range | refused | right at P ≥ 0.95 (at the stop) | drift warned | CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell, tallies in results.items():
        for m, t in tallies.items():
            a = max(t.answered, 1)
            warned = _pct(t.warned, t.answered) if m.endswith("+refs") else "-"
            lines.append(
                f"| {cell.name} | {m} | {t.boots_bisect / a:.1f} | {t.boots / a:.1f} "
                f"| {t.builds / a:.1f} | {_pct(t.wrong, t.answered)} | {t.ranges}/{t.answered} "
                f"| {t.refused}/{t.runs} | {_reliability(t.bins)} ({_reliability(t.first_bins)}) "
                f"| {warned} "
                f"| {t.seconds / max(t.runs, 1):.2f} |"
            )
    return "\n".join(lines)


def reliability(results: dict[Cell, dict[str, Tally]], method: str, first: bool = False) -> str:
    """Culprits named at a stated probability, by bin, over every setting: how many right.
    first: at the first stop (before the re-check), else the final answers."""
    lines = ["| stated P(culprit) | answers | right | fraction right |", "|---|---|---|---|"]
    for k, (low, high) in enumerate(BINS):
        counts = [
            (ts[method].first_bins if first else ts[method].bins).get(k, [0, 0])
            for ts in results.values()
            if method in ts
        ]
        n, ok = sum(c[0] for c in counts), sum(c[1] for c in counts)
        label = f"[{low:g}, {min(high, 1.0):g}{']' if high > 1 else ')'}"
        lines.append(
            f"| {label} | {n} | {ok} | {ok / n:.4f} |" if n else f"| {label} | 0 | 0 | - |"
        )
    return "\n".join(lines)
