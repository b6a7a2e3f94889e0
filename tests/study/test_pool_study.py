"""A study's boots over a pool of fake machines (study/schedule.py `run`): each block
whole on one machine, every sample naming its machine, a failing machine's slots moved."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kbisect.measure import results
from kbisect.scenario import scenario
from kbisect.study import schedule
from kbisect.targets import registry
from kbisect.targets.base import Kernel
from kbisect.targets.pool.target import Pool
from tests.fakes import fake_image, fake_pool


def boots(tmp_path: Path, members: dict[str, dict[str, object]]) -> schedule.Boots:
    target = registry.get(str(fake_pool(tmp_path, members)))
    assert isinstance(target, Pool)
    k = fake_image(tmp_path / "k")
    kernels = [Kernel.find(k), Kernel.find(fake_image(tmp_path / "k2", tps=900.0))]
    scens = {0: scenario.load("smoke"), 1: scenario.load("smoke")}
    return schedule.Boots(target, kernels, scens, {0: "", 1: "x=1"}, lambda s: s.label)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))


def test_each_block_goes_whole_to_one_machine(tmp_path: Path) -> None:
    b = boots(tmp_path, {"m1": {"seed": 1}, "m2": {"seed": 2, "scale": 1.05}})
    slots = schedule.plan(2, [0, 1], 4, seed=5)
    out = tmp_path / "study"
    (out / results.SAMPLES).mkdir(parents=True)
    assert schedule.run(b, slots, out, retries=0) == []
    stored = results.load_samples(out)
    assert len(stored) == len(slots) == 16
    per = Counter((s.machine, s.label) for s in stored)
    # 4 blocks over 2 machines: each machine booted every kernel in every cell twice
    assert per == {(m, label): 2 for m in ("m1", "m2") for label in {s.label for s in slots}}
    # the machine is the block: each boots its blocks (k mod 2) in their shuffled orders
    for j, m in enumerate(("m1", "m2")):
        booted = [s.label for s in stored if s.machine == m]
        assert booted == [s.label for s in slots if s.block % 2 == j]
    orders = [[s.label for s in slots if s.block == b] for b in range(4)]
    assert len({tuple(o) for o in orders}) > 1  # randomized within a machine, not one order


def test_a_failing_machine_is_quarantined_and_its_later_slots_move(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = boots(tmp_path, {"m1": {"seed": 1}, "bad": {"seed": 2, "mode": "panic"}})
    slots = schedule.plan(2, [0], 6, seed=5)
    out = tmp_path / "study"
    (out / results.SAMPLES).mkdir(parents=True)
    schedule.run(b, slots, out, retries=0)
    assert "machine bad quarantined" in capsys.readouterr().err
    ok = [s for s in results.load_samples(out) if s.ok]
    assert {s.machine for s in ok} == {"m1"}
