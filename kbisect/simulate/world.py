"""The simulated machine: builds that fail, boots whose tps is noisy, a host that drifts.

A boot returns the true tps × a noise factor × drift(t), the factor drawn by the noise
model (Noise.shape):

- normal: 1 + cv·N(0, 1), one CV for every level, or with `fast_cv` the fast (good) level
  at its own CV (real compares show the fast side at about twice the slow side's CV);
- t3: 1 + cv·T₃/√3 (Student's t with 3 degrees of freedom, scaled to the CV; heavy tails
  without the model's outlier shape), never below FLOOR;
- empirical: exp(r) with r resampled from the relative residuals of one real side
  (residuals.py: stored samples of real runs), the side chosen at random per level of the
  history when the world is made (the good and the bad level may draw from different
  real sides), r scaled by √(n/(n-1)) so that its variance is the side's sample variance.

With heavy tails one boot in 20 (at random) runs at half speed, as TCG's slow first boots
do. drift(t) = 1 + d·min(t/T, 1) with t the number of boots so far (every boot counts:
endpoints, steps, references, re-checks) and T = `drift_boots`: the host's speed moves by
d over the first T boots and stays there. With `stale` the endpoint check's boots (until
`endpoints_done`) come from an earlier host state, that much slower, as endpoint samples
reused from an older run are; later boots of the same revisions are not. Builds are
counted once per revision; a broken revision's build fails.

A pool of k machines (`offsets`): each machine runs its boots at its own speed, 1 + cv·N(0, 1)
with a machine-effect CV of a few percent (machine_offsets), drawn once per world; each
boot's machine is logged (machine_log) for the sample it gives."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from kbisect.simulate import histories, residuals
from kbisect.simulate.histories import History

SHAPES = ("normal", "t3", "empirical")
HEAVY_SHARE = 0.05  # heavy tails: this share of boots ...
HEAVY_SPEED = 0.5  # ... at this speed
FLOOR = 0.1  # t3: a boot's factor never below this (a boot at a tenth of the speed)
UNDONE = ("conflicts", "no effect")  # reverting a regression a later commit fixed


@dataclass(frozen=True)
class Noise:
    cv: float = 0.10
    heavy: bool = False  # one boot in 20 at half speed
    drift: float = 0.0  # relative change of the host's speed over drift_boots
    drift_boots: int = 40
    shape: str = "normal"  # normal | t3 | empirical
    fast_cv: float | None = None  # normal: the fast (good) level's CV, else cv
    stale: float = 0.0  # the endpoint check's boots this much slower (0.10: 10%)


@dataclass
class World:
    history: History
    noise: Noise
    rng: random.Random
    boots: int = 0
    built: set[str] = field(default_factory=set)
    builds: int = 0
    stale: bool = True  # still in the endpoint check (Noise.stale applies)
    sides: dict[float, residuals.Side] = field(default_factory=dict)  # empirical: per level
    offsets: tuple[float, ...] = (1.0,)  # a pool: each machine's speed (machine_offsets)
    rounds: int = 0  # a pool's rounds of boots at once (the bench counts them)
    machine_log: list[int] = field(default_factory=list)  # each boot's machine, by boot
    undone: str = "conflicts"  # UNDONE: the revert of a regression a later commit fixed

    def __post_init__(self) -> None:
        if self.noise.shape not in SHAPES:
            raise ValueError(f"noise shape {self.noise.shape!r}: not one of {SHAPES}")
        if self.undone not in UNDONE:
            raise ValueError(f"undone {self.undone!r}: not one of {UNDONE}")
        if self.noise.shape == "empirical" and not self.sides:
            pool = residuals.sides()
            for level in self.levels():
                self.sides[level] = self.rng.choice(pool)

    def levels(self) -> list[float]:
        """The history's distinct true levels, fastest first."""
        h = self.history
        found = {_key(h.tps(c)) for c in ("good", *h.graph.commits)}
        return sorted(found, reverse=True)

    def build(self, commit: str) -> bool:
        """Build once (counted); False if the revision does not build."""
        if commit not in self.built and commit != "good" and commit != self.history.graph.bad:
            self.builds += 1
        self.built.add(commit)
        return commit not in self.history.broken

    def endpoints_done(self) -> None:
        """The endpoint check is over: later boots come from today's host."""
        self.stale = False

    def reverted(self, commits: Sequence[str], at: str | None = None) -> float | str:
        """The true tps of revision `at` (default: the bad endpoint) with those of commits
        it contains reverted (module docstring), or why the revert does not apply."""
        h = self.history
        g, kinds = h.graph, h.kinds()
        at = g.bad if at is None else at
        brought = {
            c
            for c in h.culprits
            for x in commits
            if g.is_bad(at, x) and g.is_bad(x, c) and not g.is_bad(g.first_parent(x), c)
        }
        # a fixed regression whose fix goes out with it reverts as any change; one whose
        # fix is not in `at` yet reverts as any change too
        fixes = {f for f in brought if kinds[f] == "fix"}
        later = [f for f, k in kinds.items() if k == "fix" and g.is_bad(at, f)]
        alone = {
            c
            for c in brought
            if kinds[c] == "fixed"
            and any(g.is_bad(f, c) for f in later)
            and not any(g.is_bad(f, c) for f in fixes)
        }
        if alone and self.undone == "conflicts":
            where = f"bad {at}" if at == g.bad else at
            return f"the revert of {commits[-1]} does not apply on {where}"
        level = h.tps(at)
        for c, effect in zip(h.culprits, h.effects, strict=True):
            if c in brought - alone:
                level /= histories.factor(effect)
        return level

    def factor(self, level: float) -> float:
        """One boot's noise factor at a true level."""
        n = self.noise
        if n.shape == "empirical":
            near = min(self.sides, key=lambda k: abs(k - level))  # a revert's level: nearest
            return self.sides[near].draw(self.rng)
        if n.shape == "t3":
            z = self.rng.gauss(0.0, 1.0) / math.sqrt(self.rng.gammavariate(1.5, 2.0) / 3.0)
            return max(1.0 + n.cv * z / math.sqrt(3.0), FLOOR)
        fast = n.fast_cv is not None and level >= self.history.tps("good") * (1 - 1e-9)
        cv = n.fast_cv if fast and n.fast_cv is not None else n.cv
        return 1.0 + cv * self.rng.gauss(0.0, 1.0)

    def boot(self, commit: str, machine: int | None = None) -> tuple[float, float]:
        """One sample: (time, tps), on one of the pool's machines (None: the endpoint
        check's order, good and bad in turn: boot b on machine (b // 2 + b % 2) mod k, so
        neither endpoint keeps to one machine)."""
        return self.draw(self.history.tps(commit), machine)

    def draw(self, level: float, machine: int | None = None) -> tuple[float, float]:
        """One sample of a revision at that true level (boot())."""
        n = self.noise
        t = float(self.boots)
        if machine is None:
            machine = (self.boots // 2 + self.boots % 2) % len(self.offsets)
        self.machine_log.append(machine)
        self.boots += 1
        tps = level * self.factor(level) * self.offsets[machine]
        tps *= 1.0 + n.drift * min(t / n.drift_boots, 1.0)
        if n.heavy and self.rng.random() < HEAVY_SHARE:
            tps *= HEAVY_SPEED
        if self.stale and n.stale:
            tps *= 1.0 - n.stale
        return t, max(tps, 1e-3)


def machine_offsets(machines: int, cv: float, rng: random.Random) -> tuple[float, ...]:
    """A pool of machines of one type: each one's speed 1 + cv·N(0, 1), from its own
    stream (the boots' noise stream stays the same whatever the pool)."""
    if cv <= 0:
        return (1.0,) * machines
    return tuple(1.0 + cv * rng.gauss(0.0, 1.0) for _ in range(machines))


def _key(level: float) -> float:
    return round(level, 6)
