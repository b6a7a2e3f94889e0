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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kbisect.simulate import histories, methods
from kbisect.simulate.world import Noise, World, machine_offsets

METHODS = ("sequential", "posterior", "sequential+refs", "posterior+refs")
MATRICES = ("quick", "full", "story", "pool")
STORY_METHODS = ("posterior",)  # --matrix story's methods unless asked otherwise
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
    changes: str = "steps"  # steps: `culprits` regressions; fix: one fixed inside the range
    noise: str = "normal"  # world.SHAPES: normal, t3 (scaled to cv), empirical (residuals)
    fast_cv: float | None = None  # the fast (good) level's CV, `cv` the slower levels'
    stale: float = 0.0  # the endpoint check's boots from a host this much slower
    machines: int = 1  # a pool of this many machines, a round of boots at once
    machine_cv: float = 0.0  # the machines' speeds differ by this CV (the machine effect)
    family: str = ""  # the histories and noise of this setting's (default: its own name)

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
    regression fixed inside the range before the -15% culprit."""
    return [
        Cell("design"),
        Cell("residuals", noise="empirical"),
        Cell("t3 cv 15%", noise="t3", cv=0.15),
        Cell("outliers 5%", heavy=True),
        Cell("per-side cv 13%/7%", cv=0.07, fast_cv=0.13),
        Cell("stale endpoints 10%", stale=0.10),
        Cell("two culprits 15%", regression=0.15, culprits=2),
        Cell("fix inside 15%", regression=0.15, changes="fix"),
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
    # the story's named changes: each one's stated P, right when it is a true change in its
    # direction (a regression, or a fix): the whole range's claims, not git's single one
    story_bins: dict[int, list[int]] = field(default_factory=dict)
    refused_boots: int = 0
    seconds: float = 0.0
    undecided: int = 0
    wrong_single: int = 0  # a single culprit named that is not a true culprit
    wrong_confirmed: int = 0  # exit 0 on a claim that is not true (claim_right)
    exit_ok: int = 0  # exit 0 (Result.confirmed)
    boots_recheck: int = 0
    boots_after: int = 0  # search boots after the first stop (the story's tests, probes)
    boots_story: int = 0  # test boots the search spent on the story ...
    boots_probes: int = 0  # ... and on probes of untested stretches
    boots_all: int = 0  # every boot, refused runs' included
    # change kind -> [runs with such changes, runs whose answer names every one of them]
    reported: dict[str, list[int]] = field(default_factory=dict)
    rounds: int = 0  # a pool's rounds of answered runs (wall-clock: one boot's time each)
    rounds_all: int = 0  # refused runs' included

    def add(self, r: methods.Result, history: histories.History) -> None:
        self.runs += 1
        self.boots_all += r.boots
        self.rounds_all += r.rounds
        self.exit_ok += r.confirmed
        truth = history.truth()
        if r.kind == "refused":
            self.refused += 1
            self.refused_boots += r.boots
            return
        right = bool(set(r.candidates) & truth)
        self.undecided += r.kind == "undecided"
        self.boots += r.boots
        self.rounds += r.rounds
        self.boots_bisect += r.boots_bisect
        self.boots_recheck += r.recheck_boots
        self.boots_after += r.after_first
        self.boots_story += (r.tested or {}).get("story", 0)
        self.boots_probes += sum((r.tested or {}).get(k, 0) for k in ("probe", "check"))
        self.builds += r.builds
        self.wrong += not right
        single_wrong = r.kind == "culprit" and not right
        self.wrong_single += single_wrong
        self.wrong_confirmed += r.confirmed and not claim_right(r, history)
        self.ranges += right and len(r.candidates) > 1
        self.warned += r.warned
        self.confirmed += r.recheck == "confirmed"
        if r.p is not None and len(r.candidates) == 1:
            _binned(self.bins, r.p, right)
        if r.first is not None:
            _binned(self.first_bins, r.first[1], r.first[0] in truth)
        for step in (r.story or {}).get("steps") or []:
            if "p" in step:
                _binned(self.story_bins, float(step["p"]), step_right(step, history))
        if len(history.culprits) > 1:
            named = r.named()
            for kind in sorted(set(history.kinds().values())):
                changes = [c for c, k in history.kinds().items() if k == kind]
                entry = self.reported.setdefault(kind, [0, 0])
                entry[0] += 1
                entry[1] += all(c in named for c in changes)

    @property
    def answered(self) -> int:
        return self.runs - self.refused

    @property
    def no_answer(self) -> int:
        """Refused, undecided or not confirmed: every run that does not exit 0."""
        return self.runs - self.exit_ok


def step_right(step: Mapping[str, Any], history: histories.History) -> bool:
    """Whether a story's named change is a true one, in its direction: exactly one of its
    members is a true change, a regression named with a ratio below 1, a fix above."""
    effects = dict(zip(history.culprits, history.effects, strict=True))
    members = set(step.get("members") or [step["commit"]])
    true = [c for c in members if c in effects]
    if len(true) != 1:
        return False
    return "ratio" not in step or (effects[true[0]] > 0) == (float(step["ratio"]) < 1.0)


def claim_right(r: methods.Result, history: histories.History) -> bool:
    """Whether what exit 0 claims is true: a single step's story, that its commit is a
    culprit; a story of several changes, that each named change is a true one in its
    direction (a regression, or a fix) and one of them a culprit that reaches the bad
    endpoint. (Git's single first bad commit, r.candidates, is not the claim when the
    story has several changes: the report gives it with its caveat.)"""
    steps = (r.story or {}).get("steps") or []
    if (r.story or {}).get("kind") != "several" or not steps:
        return bool(set(r.candidates) & history.truth())
    if not all(step_right(step, history) for step in steps):
        return False
    named = {c for step in steps for c in step.get("members") or [step["commit"]]}
    return bool(named & history.truth())


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
            )
            tally.add(run_one(m, world, s), h)
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


def _grid(
    results: dict[Cell, dict[str, Tally]],
    header: list[str],
    columns: Callable[[str, Tally], list[str]],
) -> str:
    """A markdown table: setting, method, `columns` of each tally, CPU s per bisection."""
    head = ["setting", "method", *header, "CPU s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cell, tallies in results.items():
        for m, t in tallies.items():
            row = [cell.name, m, *columns(m, t), f"{t.seconds / max(t.runs, 1):.2f}"]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def table(results: dict[Cell, dict[str, Tally]]) -> str:
    """One row per setting and method."""

    def columns(m: str, t: Tally) -> list[str]:
        a = max(t.answered, 1)
        return [
            f"{t.boots_bisect / a:.1f}",
            f"{t.boots / a:.1f}",
            f"{t.builds / a:.1f}",
            _pct(t.wrong, t.answered),
            f"{t.ranges}/{t.answered}",
            f"{t.refused}/{t.runs}",
            f"{_reliability(t.bins)} ({_reliability(t.first_bins)})",
            _pct(t.warned, t.answered) if m.endswith("+refs") else "-",
        ]

    header = "boots (bisect)|boots (all)|builds|wrong culprit|range|refused|"
    header += "right at P ≥ 0.95 (at the stop)|drift warned"
    return _grid(results, header.split("|"), columns)


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


def _named(t: Tally) -> str:
    return ", ".join(f"{k} {ok}/{n}" for k, (n, ok) in sorted(t.reported.items())) or "-"


def story_table(results: dict[Cell, dict[str, Tally]]) -> str:
    """One row per setting and method: the exit-0 view of the answers (wrong, wrong and
    confirmed, no answer), the boots by phase (the search's, references included, and of
    them the story's tests, the probes and those after the first stop; the re-checks';
    all, the endpoints' included), which true changes the answer named, and how often an
    answer stated at P ≥ 0.95 was right."""

    def columns(m: str, t: Tally) -> list[str]:
        a = max(t.answered, 1)
        return [
            str(t.runs),
            _pct(t.wrong_single, t.runs),
            _pct(t.wrong_confirmed, t.runs),
            f"{_pct(t.no_answer, t.runs)} ({t.refused}, {t.undecided})",
            f"{t.boots_bisect / a:.1f}",
            f"{t.boots_story / a:.1f}",
            f"{t.boots_probes / a:.1f}",
            f"{t.boots_after / a:.1f}",
            f"{t.boots_recheck / a:.1f}",
            f"{t.boots_all / max(t.runs, 1):.1f}",
            _named(t),
            f"{_reliability(t.bins)} ({_reliability(t.first_bins)})",
            _reliability(t.story_bins),
        ]

    header = "runs|wrong culprit|wrong, exit 0|no answer (refused, undecided)|boots: search|"
    header += "story|probes and checks|after the first stop|re-check|all|changes named|"
    header += "right at P ≥ 0.95 (at the first stop)|story's changes at P ≥ 0.95 right"
    return _grid(results, header.split("|"), columns)


def cpu(results: dict[Cell, dict[str, Tally]]) -> str:
    """Each setting's CPU time (all its methods), one line each."""
    return "\n".join(
        f"{cell.name}: {sum(t.seconds for t in ts.values()):.1f} s" for cell, ts in results.items()
    )


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


def pool_table(results: dict[Cell, dict[str, Tally]]) -> str:
    """One row per pool setting and method: rounds (the wall clock: one boot's time each)
    and boots per answered bisection, each against one machine's at the same histories
    and machine effect (k = 1 of the same family and CV, when it is among the results),
    the wrong answers and the runs without an answer."""
    ones = {
        (c.seeds, c.machine_cv, m): t
        for c, ts in results.items()
        if c.machines == 1
        for m, t in ts.items()
    }
    head = "setting|k|machine CV|method|runs|rounds|x 1 machine|boots (all)|x 1 machine|"
    head += "wrong culprit|wrong, exit 0|no answer|CPU s"
    lines = ["| " + head.replace("|", " | ") + " |", "|" + "---|" * len(head.split("|"))]
    for cell, tallies in results.items():
        for m, t in tallies.items():
            a = max(t.answered, 1)
            one = ones.get((cell.seeds, cell.machine_cv, m))
            rounds, boots = t.rounds / a, t.boots / a

            def ratio(mine: float, field_: str, one: Tally | None = one) -> str:
                if one is None or not one.answered:
                    return "-"
                return f"{mine / (getattr(one, field_) / one.answered):.2f}x"

            row = [
                cell.family or cell.name,
                str(cell.machines),
                f"{cell.machine_cv:.0%}",
                m,
                str(t.runs),
                f"{rounds:.1f}",
                ratio(rounds, "rounds"),
                f"{boots:.1f}",
                ratio(boots, "boots"),
                _pct(t.wrong_single, t.runs),
                _pct(t.wrong_confirmed, t.runs),
                _pct(t.no_answer, t.runs),
                f"{t.seconds / max(t.runs, 1):.2f}",
            ]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
