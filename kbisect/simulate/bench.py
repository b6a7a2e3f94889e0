"""The simulator's bench: the port of posterior/bench.py (and the store the git method's
steps share) in a modelled world (world.py). Builds and boots are the world's; every
sample is kept in memory; the revert check's boots (revert, verify_round, verify_tps) and
a rest's reverts (rest) are drawn at the levels world.reverted gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kbisect.bisect import check, references
from kbisect.bisect.posterior.bench import RecheckOf, Sample, each
from kbisect.bisect.posterior.posterior import Posterior
from kbisect.bisect.state import Run
from kbisect.core.exceptions import BuildError
from kbisect.simulate.histories import GOOD
from kbisect.simulate.world import World
from kbisect.stats import drift


class Sim:
    """The simulator's bench (the port of posterior/bench.py, and the store the git
    method's steps share): builds and boots in the world, every sample kept in memory."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.store: dict[str, list[drift.Timed]] = {}
        self.rechecked: dict[tuple[str, str], list[float]] = {}
        self.start = 0  # world boots when the bisection began
        self.recheck_boots = 0
        self.first_stop: int | None = None  # test boots before the first re-check boot
        # the revert check: the pass's reverts built so far, each one's true level and its
        # commits (a range's all), the check's fresh samples of bad and of the revert, its
        # boots and builds
        self.reverts: dict[str, tuple[float, tuple[str, ...]]] = {}
        self.verified: dict[str, tuple[list[float], list[float]]] = {}
        self.verify_boots = 0
        self.reverted_rows: dict[str, list[drift.Timed]] = {}  # each revert's samples
        self.without: list[str] = []  # the rests' reverts, on every revision with them
        self.rested: list[str] = []  # the rests' answers (a range's: its tested member)

    def take(self, commit: str) -> drift.Timed:
        """One boot of commit, kept in the store."""
        t, tps = self.world.boot(commit)
        row = drift.Timed(commit, t, tps)
        self.store.setdefault(commit, []).append(row)
        return row

    def tps(self, commit: str) -> list[float]:
        return [r.tps for r in self.store.get(commit, [])]

    def top_up(self, commit: str, k: int) -> list[float]:
        """At least k samples of commit."""
        while len(self.store.get(commit, [])) < k:
            self.take(commit)
        return self.tps(commit)

    def rows(self, *commits: str) -> list[drift.Timed]:
        return [r for c in commits for r in self.store.get(c, [])]

    # --- the port ---------------------------------------------------------------------------

    def boots(self) -> int:
        """The search's boots: the revert check's are counted apart (verify_boots)."""
        return self.world.boots - self.start - self.verify_boots

    def stored(self, commit: str) -> tuple[list[Sample], str | None]:
        """Every sample went into the posterior when it was taken; but a rest's BAD: the
        revert check's samples of its revert."""
        if self.without and commit == self.world.history.graph.bad:
            rows = self.reverted_rows.get(self.rested[-1], [])
            return [Sample(commit, r.t - self.start, r.tps) for r in rows], None
        return [], None

    def level(self, commit: str) -> float | str:
        """commit's true tps, with the rests' reverts where it has them; or why not."""
        return (
            self.world.reverted(self.without, commit)
            if self.without
            else self.world.history.tps(commit)
        )

    def build(self, commit: str) -> None:
        if not self.world.build(commit):
            raise BuildError(f"{commit} does not build")
        if isinstance(why := self.level(commit), str):
            raise BuildError(why)

    def boot(self, commit: str, recheck_of: str | None = None) -> list[Sample]:
        self.world.rounds += 1
        return [self._one(commit, recheck_of, 0)]

    def _one(self, commit: str, recheck_of: str | None, machine: int) -> Sample:
        level = self.level(commit)
        assert isinstance(level, float)  # build() refused a revision it does not apply on
        if recheck_of is None:
            t, tps = self.world.draw(level, machine)
            row = drift.Timed(commit, t, tps)
            self.store.setdefault(commit, []).append(row)
        else:
            if self.first_stop is None:
                self.first_stop = self.boots() - self.recheck_boots
            t, tps = self.world.draw(level, machine)
            row = drift.Timed(commit, t, tps)
            self.rechecked.setdefault((recheck_of, commit), []).append(tps)
            self.recheck_boots += 1
        return Sample(commit, row.t - self.start, row.tps, machine=self.machine(row.t))

    def machine(self, t: float) -> str:
        """The name of the machine of the boot at time t ("": a pool of one)."""
        return f"m{self.world.machine_log[int(t)]}" if self.width() > 1 else ""

    def width(self) -> int:
        return len(self.world.offsets)

    def boot_round(
        self, commits: list[str], recheck_of: RecheckOf = None
    ) -> list[list[Sample] | BaseException]:
        """One round: the i-th boot on machine (round + i) mod k, so that a revision
        sampled in turn (a re-check's pairs) moves from machine to machine."""
        self.world.rounds += 1
        k, start = self.width(), self.world.rounds
        whose = each(recheck_of, len(commits))
        return [
            [self._one(c, r, (start + i) % k)]
            for i, (c, r) in enumerate(zip(commits, whose, strict=True))
        ]

    def endpoint_rounds(self, runs_min: int, runs_max: int) -> int:
        """The endpoint check's rounds on the pool (modelled: the simulator takes the
        endpoints one boot at a time): the first look's boots at once (check.first_look a
        side), then a look's k/2 pairs a round (check.pairs_a_look); a boot a round on
        one machine."""
        n, k = self.start, self.width()
        if k == 1:
            return n
        every = check.pairs_a_look(k)
        first = min(n, 2 * check.first_look(runs_min, runs_max, every))
        return -(-first // k) + -(-(n - first) // (2 * every))

    def fresh(self, culprit: str, commit: str) -> list[float]:
        return list(self.rechecked.get((culprit, commit), []))

    def revert(self, culprit: str, members: Sequence[str] = ()) -> str | None:
        """Bad with culprit (a range: its members) reverted, on top of the pass's earlier
        reverts (a build, counted once: len(reverts)); why not, when it does not apply."""
        if culprit not in self.reverts:
            earlier = [c for _, commits in self.reverts.values() for c in commits]
            commits = tuple(members) or (culprit,)
            level = self.world.reverted([*earlier, *commits])
            if isinstance(level, str):
                return level
            self.reverts[culprit] = level, commits
        return None

    def verify_round(self, culprit: str, sides: list[str]) -> list[float | BaseException]:
        """A round of the revert check on the pool: the revert, bad or good (the good
        endpoint's store), the i-th boot on machine (round + i) mod k as boot_round's."""
        self.world.rounds += 1
        k, start, bad = self.width(), self.world.rounds, self.world.history.graph.bad
        level = {"revert": self.reverts[culprit][0], "bad": self.level(bad)}
        level["good"] = self.world.history.tps(GOOD)
        fresh = self.verified.setdefault(culprit, ([], []))
        out: list[float | BaseException] = []
        for i, side in enumerate(sides):
            t, tps = self.world.draw(float(level[side]), (start + i) % k)
            self.verify_boots += 1
            if side == "good":
                self.store.setdefault(GOOD, []).append(drift.Timed(GOOD, t, tps))
            else:
                fresh[side == "revert"].append(tps)
            if side == "revert":
                self.reverted_rows.setdefault(culprit, []).append(drift.Timed(bad, t, tps))
            out.append(tps)
        return out

    def verify_tps(self, culprit: str) -> tuple[list[float], list[float], list[float]]:
        bad, reverted = self.verified.get(culprit, ([], []))
        ends = [] if self.without else self.tps(self.world.history.graph.bad)
        return self.tps(GOOD), ends + bad, list(reverted)

    def rest(self, culprit: str, reverts: Callable[[str], list[str]]) -> None:
        """From now on every revision with culprit is drawn with it reverted (level());
        BAD's samples are its revert's (stored()); the plain ones of those revisions go."""
        self.without += reverts(self.world.history.graph.bad)
        self.rested.append(culprit)
        bad = self.world.history.graph.bad
        self.store = {c: rows for c, rows in self.store.items() if not reverts(c)}
        self.store[bad] = list(self.reverted_rows.get(culprit, []))

    def save(self, run: Run, post: Posterior, schedule: references.Schedule | None) -> None:
        pass

    def say(self) -> bool:
        return False
