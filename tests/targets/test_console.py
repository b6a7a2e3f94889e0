"""targets/console.py: what every target makes of the lines a booting kernel prints."""

from __future__ import annotations

import time

import pytest

from kbisect.core.exceptions import BootError
from kbisect.targets import console


@pytest.mark.parametrize(
    "line",
    [
        "[    0.5] Kernel panic - not syncing: VFS: Unable to mount root fs",
        "[   12.0] Oops: 0002 [#1] PREEMPT SMP",
        "[    3.1] BUG: soft lockup - CPU#0 stuck for 22s!",
        "[    2.2] general protection fault, probably for non-canonical address",
    ],
)
def test_panics_and_oopses_are_failures(line: str) -> None:
    assert console.is_panic(line)


def test_ordinary_lines_are_not() -> None:
    assert not console.is_panic("[    1.0] random: crng init done")
    assert not console.is_panic("kbisect-guest: phase run")


def test_the_console_notes_the_harness_and_the_first_panic() -> None:
    c = console.Console(boot_timeout=60)
    c("[    0.5] Kernel panic - not syncing: first")
    c("[    0.6] Kernel panic - not syncing: second")
    assert c.panic == "[    0.5] Kernel panic - not syncing: first" and c.reached is None
    c(f"{console.GUEST}phase init")
    assert c.reached is not None and c.reached >= 0


def test_missing_the_harness_deadline_is_a_boot_error() -> None:
    c = console.Console(boot_timeout=0.01)
    time.sleep(0.02)
    with pytest.raises(BootError, match="did not reach the harness within 0s"):
        c("[    1.0] still booting")
    reached = console.Console(boot_timeout=0.01)
    reached(f"{console.GUEST}phase init")
    time.sleep(0.02)
    reached("[    9.0] late kernel line")  # the harness was reached: no deadline any more


def test_phases_are_timed_from_the_console(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    c = console.Console(60.0)
    assert c.phases(5.0) == {}  # the harness never spoke: nothing to split
    for at, line in [
        (12.0, "kbisect-guest: phase init"),
        (15.0, "kbisect-guest: phase restore"),
        (28.5, "kbisect-guest: phase start"),
        (30.0, "kbisect-guest: phase warmup"),
        (40.0, "kbisect-guest: phase run"),
        (130.0, "kbisect-guest: phase stop"),
        (131.0, "kbisect-guest: phase done"),
    ]:
        now[0] = 100.0 + at
        c(line)
    phases = c.phases(133.0)
    assert phases == {
        "boot": 12.0,
        "init": 3.0,
        "restore": 13.5,
        "start": 1.5,
        "warmup": 10.0,
        "run": 90.0,
        "stop": 1.0,
        "shutdown": 2.0,
    }
    assert sum(phases.values()) == pytest.approx(133.0)
