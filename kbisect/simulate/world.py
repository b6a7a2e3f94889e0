"""The simulated machine: builds that fail, boots whose tps is noisy, a host that drifts.

A boot returns the true tps × (1 + cv·N(0, 1)) × drift(t); with heavy tails one boot in 20
(at random) runs at half speed, as TCG's slow first boots do. drift(t) = 1 + d·min(t/T, 1)
with t the number of boots so far (every boot counts: endpoints, steps, references,
re-checks) and T = `drift_boots`: the host's speed moves by d over the first T boots and
stays there. Builds are counted once per revision; a broken revision's build fails."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kbisect.simulate.histories import History


@dataclass(frozen=True)
class Noise:
    cv: float = 0.10
    heavy: bool = False  # one boot in 20 at half speed
    drift: float = 0.0  # relative change of the host's speed over drift_boots
    drift_boots: int = 40


@dataclass
class World:
    history: History
    noise: Noise
    rng: random.Random
    boots: int = 0
    built: set[str] = field(default_factory=set)
    builds: int = 0

    def build(self, commit: str) -> bool:
        """Build once (counted); False if the revision does not build."""
        if commit not in self.built and commit != "good" and commit != self.history.graph.bad:
            self.builds += 1
        self.built.add(commit)
        return commit not in self.history.broken

    def boot(self, commit: str) -> tuple[float, float]:
        """One sample: (time, tps)."""
        n = self.noise
        t = float(self.boots)
        self.boots += 1
        tps = self.history.tps(commit) * (1.0 + n.cv * self.rng.gauss(0.0, 1.0))
        tps *= 1.0 + n.drift * min(t / n.drift_boots, 1.0)
        if n.heavy and self.rng.random() < 0.05:
            tps *= 0.5
        return t, max(tps, 1e-3)
