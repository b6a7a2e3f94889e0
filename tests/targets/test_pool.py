"""A pool of targets (kbisect/targets/pool/): the pool file, the Pool and its members,
and the dispatcher's concurrency and quarantine rule, on fake members."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kbisect.commands import cli
from kbisect.core.exceptions import EXIT_USER, BootError, CommandFailed, UserError
from kbisect.measure import results, sample
from kbisect.scenario import scenario
from kbisect.targets import registry
from kbisect.targets.base import Kernel, Target
from kbisect.targets.fake.target import FakeTarget
from kbisect.targets.pool import config, dispatch
from kbisect.targets.pool.target import Member, NoMachineLeft, Pool, TooManySlots
from tests.fakes import fake_image, fake_pool, fake_target


@pytest.fixture
def pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pool:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    path = fake_pool(tmp_path, {"m1": {"seed": 1}, "m2": {"seed": 2}, "m3": {"seed": 3}})
    t = registry.get(str(path))
    assert isinstance(t, Pool)
    return t


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


FAKE = '[[member]]\nkind = "fake"\nname = "a"\n'
BAD_POOLS = {
    "no members": ('kind = "pool"\n', "no members"),
    "unknown key": ('kind = "pool"\nspeed = 3\n' + FAKE, "unknown key 'speed'"),
    "twice by name": ('kind = "pool"\n' + FAKE + FAKE, "two members are named 'a'"),
    "pool in a pool": ('kind = "pool"\n[[member]]\nkind = "pool"\nname = "p"\n', "pool cannot"),
    "unknown kind": ('kind = "pool"\n[[member]]\nkind = "cloud"\nname = "c"\n', "kind must be"),
    "no name": ('kind = "pool"\n[[member]]\nkind = "fake"\n', "needs a name"),
    "bad name": ('kind = "pool"\n[[member]]\nkind = "fake"\nname = "a b"\n', "name must be"),
    "not a table": ('kind = "pool"\nmember = [1]\n', "must be a table"),
    "member list": ('kind = "pool"\nmember = 3\n', "list of tables"),
    "no such file": ('kind = "pool"\n[[member]]\ntarget = "gone.toml"\n', "no such file"),
    "target and more": ('kind = "pool"\n[[member]]\ntarget = "fake"\nseed = 1\n', "only a name"),
    "fake setting": ('kind = "pool"\n[[member]]\nkind = "fake"\nname = "a"\nspeed = 1\n', "speed"),
    "remote address": (
        'kind = "pool"\n[[member]]\nkind = "ssh"\nname = "s"\nhost = "10.0.0.1"\narch = "x86_64"\n',
        "loopback",
    ),
    "one machine twice": (
        'kind = "pool"\n'
        + "".join(
            f'[[member]]\nkind = "ssh"\nname = "{n}"\nhost = "127.0.0.1"\narch = "x86_64"\n'
            for n in ("s1", "s2")
        ),
        "are one machine (127.0.0.1:22)",
    ),
    "two arches": (
        'kind = "pool"\n[[member]]\nkind = "fake"\nname = "a"\narch = "x86_64"\n'
        '[[member]]\nkind = "fake"\nname = "b"\narch = "arm64"\n',
        "different arches",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_POOLS))
def test_a_bad_pool_file_is_one_line_before_anything(tmp_path: Path, case: str) -> None:
    text, says = BAD_POOLS[case]
    path = write(tmp_path, text)
    with pytest.raises(UserError, match=says.replace("(", r"\(").replace(")", r"\)")):
        registry.get(str(path))


def test_a_bad_pool_file_exits_2_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, 'kind = "pool"\n')
    image = fake_image(tmp_path / "k")
    argv = ["compare", "--target", str(path), "--kernel", str(image.parent), "--boots", "2"]
    argv += ["--append-a", "x=1", "--append-b", "x=2", "--scenario", "smoke"]
    argv += ["--out", str(tmp_path / "out")]
    assert cli.main(argv) == EXIT_USER
    err = capsys.readouterr().err
    assert "no members" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_member_names_a_target_file_relative_to_the_pool(tmp_path: Path) -> None:
    fake_target(tmp_path / "machines", name="box", seed=4)
    path = tmp_path / "lab.toml"
    path.write_text(
        'kind = "pool"\nname = "lab"\n[[member]]\ntarget = "machines/box.toml"\n'
        '[[member]]\ntarget = "fake"\nname = "spare"\n'
    )
    t = registry.get(str(path))
    assert isinstance(t, Pool) and t.name == "lab"
    assert [m.name for m in t.members] == ["box", "spare"]
    assert all(isinstance(m.inner, FakeTarget) for m in t.members)
    assert t.members[0].describe() == {
        "kind": "fake",
        "name": "box",
        "arch": t.arch.name,
        "accel": None,
        "pool": "lab",
        "machine": "box",
    }
    assert t.describe()["members"] == ["box", "spare"]


def test_a_plain_target_is_a_pool_of_one(tmp_path: Path) -> None:
    t = registry.get(str(fake_target(tmp_path)))
    assert dispatch.members(t) == [t]
    assert t.seat() is t


def test_each_sample_records_the_machine_that_took_it(pool: Pool, tmp_path: Path) -> None:
    scen = scenario.load("smoke")
    kernel = Kernel.find(fake_image(tmp_path / "k"))
    out = tmp_path / "run"

    def take(machine: Target) -> str:
        boot = sample.Boot(kernel, scen, out, label="A")
        return sample.take(machine, boot).machine

    done = dispatch.run_batch(pool, [dispatch.Task(take, m) for m in ("m3", "m1", "m2")])
    assert [d.get() for d in done] == ["m3", "m1", "m2"]
    stored = results.load_samples(out)  # validated against the schema
    assert sorted(s.machine for s in stored) == ["m1", "m2", "m3"]
    assert {s.target["pool"] for s in stored} == {"pool"}
    # used plainly, the pool boots on its first machine, and says so in the sample
    s = sample.take(pool, sample.Boot(kernel, scen, out, label="B"))
    assert s.machine == "m1"


def test_at_most_one_task_per_machine_and_results_in_order(pool: Pool) -> None:
    lock = threading.Lock()
    busy: dict[str, int] = {}
    most: dict[str, int] = {}
    together = [0, 0]  # now, most

    def task(i: int) -> dispatch.Task[int]:
        def run(machine: Target) -> int:
            with lock:
                busy[machine.name] = busy.get(machine.name, 0) + 1
                most[machine.name] = max(most.get(machine.name, 0), busy[machine.name])
                together[0] += 1
                together[1] = max(together)
            time.sleep(0.05)
            with lock:
                busy[machine.name] -= 1
                together[0] -= 1
            return i

        return dispatch.Task(run, None if i % 2 else ("m1", "m2", "m3")[i % 3])

    done = dispatch.run_batch(pool, [task(i) for i in range(12)])
    assert [d.get() for d in done] == list(range(12))
    assert set(most.values()) == {1}  # never two at once on one machine
    assert together[1] > 1  # but the machines worked at once
    bound = [d.member for i, d in enumerate(done) if i % 2 == 0]
    assert bound == [("m1", "m2", "m3")[i % 3] for i in range(0, 12, 2)]


def test_a_machine_fault_quarantines_and_its_work_moves(pool: Pool) -> None:
    def run(machine: Target) -> str:
        if machine.name == "m2":
            raise CommandFailed("ssh: connect to host m2: Connection refused")
        return machine.name

    done = dispatch.run_batch(pool, [dispatch.Task(run, m) for m in ("m1", "m2", "m2", "m3")])
    assert [d.get() in ("m1", "m3") for d in done] == [True] * 4
    assert done[0].member == "m1" and done[3].member == "m3"
    assert "Connection refused" in pool.quarantined["m2"]
    assert [m.name for m in dispatch.members(pool)] == ["m1", "m3"]
    # the next batch never uses it; a task bound to it goes to another
    again = dispatch.run_batch(pool, [dispatch.Task(run, "m2")])
    assert again[0].member in ("m1", "m3")


def test_the_run_survives_losing_all_but_one_machine(pool: Pool) -> None:
    def run(machine: Target) -> str:
        if machine.name != "m3":
            raise CommandFailed(f"{machine.name} is gone")
        return "ok"

    done = dispatch.run_batch(pool, [dispatch.Task(run) for _ in range(6)])
    assert [d.get() for d in done] == ["ok"] * 6 and {d.member for d in done} == {"m3"}
    assert sorted(pool.quarantined) == ["m1", "m2"]


def test_no_machine_left_is_an_infrastructure_error(pool: Pool) -> None:
    def run(machine: Target) -> str:
        raise CommandFailed(f"{machine.name} is gone")

    with pytest.raises(NoMachineLeft, match="every machine is quarantined"):
        dispatch.run_batch(pool, [dispatch.Task(run) for _ in range(4)])


def test_repeated_strikes_quarantine_a_machine_only_when_others_do_well(pool: Pool) -> None:
    """A kernel failure is the task's result; STRIKES in a row on one machine while
    others have good results take it out, and its task runs elsewhere."""

    def run(machine: Target) -> str:
        if machine.name == "m1":
            raise BootError("kernel panic")
        return machine.name

    first = dispatch.run_batch(pool, [dispatch.Task(run, m) for m in ("m2", "m3")])
    assert [d.get() for d in first] == ["m2", "m3"]
    tasks = [dispatch.Task(run, "m1") for _ in range(dispatch.STRIKES)]
    done = dispatch.run_batch(pool, tasks)
    assert [isinstance(d.error, BootError) for d in done[:-1]] == [True] * (dispatch.STRIKES - 1)
    assert done[-1].error is None and done[-1].member in ("m2", "m3")
    assert "m1" in pool.quarantined


def test_a_kernel_that_fails_everywhere_quarantines_nothing(pool: Pool) -> None:
    def run(machine: Target) -> str:
        raise BootError("kernel panic")

    done = dispatch.run_batch(pool, [dispatch.Task(run) for _ in range(9)])
    assert all(isinstance(d.error, BootError) for d in done)
    assert pool.quarantined == {}


def test_a_strike_predicate_counts_disturbed_results(pool: Pool) -> None:
    def run(machine: Target) -> bool:
        return machine.name != "m3"  # m3's slots are left disturbed

    tasks = [dispatch.Task(run, m) for m in ["m1", "m2"] + ["m3"] * 4]
    done = dispatch.run_batch(pool, tasks, strike=lambda took: took is not True)
    assert "m3" in pool.quarantined
    assert [d.value for d in done[-2:]] == [True, True]  # moved off m3


def test_preflight_quarantines_a_failing_machine_unless_all_fail(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: FakeTarget, scen: object = None) -> None:
        raise UserError(f"target {self.name}: cannot ssh to it")

    monkeypatch.setattr(
        pool.members[1].inner,
        "preflight",
        lambda scen=None: refuse(
            pool.members[1].inner  # type: ignore[arg-type]
        ),
    )
    pool.preflight(None)
    assert list(pool.quarantined) == ["m2"]
    for m in pool.live():
        monkeypatch.setattr(m.inner, "preflight", lambda scen=None, m=m: refuse(m.inner))
    with pytest.raises(UserError, match="cannot ssh"):
        pool.preflight(None)


def test_vng_slots_must_fit_this_hosts_cpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "slots.toml"
    path.write_text(
        'kind = "pool"\n' + "".join(f'[[member]]\nkind = "vng"\nname = "s{i}"\n' for i in range(3))
    )
    t = registry.get(str(path))
    assert isinstance(t, Pool) and all(isinstance(m, Member) for m in t.members)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    with pytest.raises(TooManySlots, match="3 vng slots"):
        t.preflight(scenario.load("smoke"))


def test_parse_keeps_the_files_order_and_names() -> None:
    spec = config.parse(
        "lab",
        {"kind": "pool", "member": [{"target": "emu1"}, {"kind": "fake", "name": "f"}]},
        Path("/etc"),
    )
    assert [m.target for m in spec.members] == ["emu1", None]
    assert spec.members[1].settings == {"kind": "fake"}


def test_an_interruption_ends_the_boots_under_way_on_the_other_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "cache"))
    path = fake_pool(tmp_path, {"m1": {}, "m2": {"delay_s": 60.0}, "m3": {"delay_s": 60.0}})
    t = registry.get(str(path))
    scen = scenario.load("smoke")
    kernel = Kernel.find(fake_image(tmp_path / "k"))

    def run(machine: Target) -> None:
        if machine.name == "m1":
            time.sleep(1.0)  # the others are booting by now
            raise KeyboardInterrupt
        for _ in range(3):  # a retry after the interruption starts no boot
            try:
                sample.take(machine, sample.Boot(kernel, scen, tmp_path / "run", label="A"))
            except BootError:
                continue

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        dispatch.run_batch(t, [dispatch.Task(run, m) for m in ("m1", "m2", "m3")])
    assert time.monotonic() - start < 30
    stored = results.load_samples(tmp_path / "run")
    assert sorted(s.machine for s in stored) == ["m2", "m3"]  # one try each
    assert all(s.status == "boot-failed" for s in stored)
