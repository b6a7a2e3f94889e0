"""When a bisection boots a reference: after every `every` boots of revisions under test,
one boot of the good and then of the bad reference (the endpoints), in turn. The samples
of the references show how the host's speed moves (stats/drift.py); the cost is one boot
in every + 1.

The posterior method keeps the turn in its state.json; `git bisect run`'s steps, each a
process of its own, keep it in the sample store (references.json), counted across steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbisect.core import atomic, reading

STORE_FILE = "references.json"


@dataclass
class Schedule:
    """Which boot is a reference: after every `every` test boots, one reference boot,
    alternating the good and the bad reference."""

    good: str
    bad: str
    every: int = 3
    tests: int = 0  # test boots since the last reference boot
    turn: int = 0  # reference boots so far

    def due(self) -> str | None:
        """The reference to boot now, or None: boot the revision under test."""
        if self.tests < self.every:
            return None
        return self.good if self.turn % 2 == 0 else self.bad

    def took(self, revision: str) -> None:
        """Record a boot (of a reference or of a revision under test)."""
        if revision in (self.good, self.bad) and self.tests >= self.every:
            self.tests, self.turn = 0, self.turn + 1
        else:
            self.tests += 1

    @property
    def cost(self) -> float:
        """Extra boots per test boot."""
        return 1.0 / self.every


def in_store(store: Path, good: str, bad: str, every: int) -> Schedule:
    """The schedule the steps of a bisection share, from the store (a new one when the
    store kept none, or one for other references)."""
    f = store / STORE_FILE
    saved = reading.json_table(f, "remove it: the references start over") if f.exists() else {}
    if (saved.get("good"), saved.get("bad")) != (good, bad):
        saved = {}
    return Schedule(good, bad, every, saved.get("tests", 0), saved.get("turn", 0))


def save_in_store(store: Path, s: Schedule) -> None:
    atomic.write_json(
        store / STORE_FILE, {"good": s.good, "bad": s.bad, "tests": s.tests, "turn": s.turn}
    )
