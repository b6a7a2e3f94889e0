"""scripts/boot-loop: how one boot's console and exit code are classified, the summary
line, and its usage errors (exit 2 before any boot)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests import scripts

INT3 = """\
[    1.934120] sched_clock: Marking stable (1893115300, 40944800)->(1937000100, -3940000)
[    1.941002] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[    1.941002] CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Not tainted 6.12.57 #1
[    1.941002] RIP: 0010:default_idle+0x5/0x20
[    1.941002] Call Trace:
[    1.941002]  RIP: 0010:do_idle+0x1a/0x40
[    1.950000] Kernel panic - not syncing: Fatal exception
"""


@pytest.fixture(scope="module")
def loop() -> ModuleType:
    return scripts.load("boot-loop")


def test_an_int3_oops_is_named_with_its_first_rip(loop):
    got = loop.classify(INT3, 1)
    assert (got.kind, got.oops, got.rip) == ("oops", "int3", "default_idle+0x5/0x20")


def test_other_oopses_panics_and_plain_failures(loop):
    gpf = "general protection fault, probably for non-canonical address\nRIP: 0010:f+0x1/0x2\n"
    assert loop.classify(gpf, 1).oops == "general protection fault"
    assert loop.classify("Oops: invalid opcode: 0000 [#1]\n", 1).oops == "invalid opcode"
    assert loop.classify("Kernel panic - not syncing: VFS\n", 1).kind == "panic"
    assert loop.classify("booted\n", 0).kind == "ok"
    assert loop.classify("booted\n", 5).kind == "other"


def test_summary_counts_every_kind_and_the_rips(loop):
    outcomes = [
        loop.classify(INT3, 1),
        loop.classify(INT3, 1),
        loop.classify("fine\n", 0),
        loop.classify("Kernel panic - not syncing\n", 1),
        loop.classify("", 124),
    ]
    assert loop.summary(outcomes) == (
        "boot-loop: 5 boots: 1 ok, 2 oops (2 int3), 1 panic, 1 other  RIP: default_idle+0x5/0x20 x2"
    )
    assert loop.summary([loop.classify("", 0)]) == (
        "boot-loop: 1 boots: 1 ok, 0 oops (0 int3), 0 panic, 0 other"
    )


def test_the_console_is_kbisects_boot_log_when_there_is_one(loop, tmp_path):
    own = tmp_path / "run.log"
    own.write_text("$ kbisect run\n")
    assert loop.consoles(tmp_path, own) == "$ kbisect run\n"
    boot = tmp_path / "boots" / "1-x"
    boot.mkdir(parents=True)
    (boot / "console.log").write_text(INT3)
    assert loop.consoles(tmp_path, own) == INT3


@pytest.mark.parametrize(
    "argv", [[], ["IMAGE"], ["IMAGE", "0"], ["IMAGE", "2", "--vcpus", "0"], ["nosuch", "2"]]
)
def test_bad_arguments_exit_2_with_the_usage(loop, tmp_path, capsys, argv):
    image = tmp_path / "bzImage"
    image.write_bytes(b"MZ")
    with pytest.raises(SystemExit) as exc:
        loop.main([str(image) if a == "IMAGE" else a for a in argv])
    assert exc.value.code == 2
    assert "usage: .venv/bin/python scripts/boot-loop IMAGE N" in capsys.readouterr().err
