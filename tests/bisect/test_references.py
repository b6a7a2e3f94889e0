"""The schedule of reference boots (kbisect/bisect/references.py)."""

from __future__ import annotations

from pathlib import Path

from kbisect.bisect import references


def test_schedule_interleaves_one_reference_per_every_test_boots() -> None:
    s = references.Schedule("good", "bad", every=2)
    boots = []
    for _ in range(9):
        ref = s.due()
        boots.append(ref or "test")
        s.took(ref or "c5")
    assert boots == ["test", "test", "good", "test", "test", "bad", "test", "test", "good"]
    assert s.cost == 0.5


def test_the_steps_share_the_turn_through_the_store(tmp_path: Path) -> None:
    s = references.in_store(tmp_path, "g", "b", 3)
    for _ in range(4):
        s.took(s.due() or "c")
    references.save_in_store(tmp_path, s)
    again = references.in_store(tmp_path, "g", "b", 3)
    assert (again.tests, again.turn) == (0, 1) == (s.tests, s.turn)
    other = references.in_store(tmp_path, "g2", "b", 3)  # other references: a new turn
    assert (other.tests, other.turn) == (0, 0)
