"""kvm.py: the boot sector, the probe command lines, the verdicts, the cache, accel()."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbisect.core import arch, paths, proc
from kbisect.core.exceptions import CommandTimeout, UserError
from kbisect.targets.vng import host as vm_host
from kbisect.targets.vng import kvm
from tests.conftest import REAL_CACHE

PANIC = "[    1.89] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
MSR = "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69"


# --- the boot sector -------------------------------------------------------------------


def test_boot_sector_is_one_bootable_sector_pointing_at_its_marker() -> None:
    sector = kvm.boot_sector()
    assert len(sector) == 512
    assert sector[510:] == b"\x55\xaa"
    (address,) = struct.unpack("<H", sector[7:9])  # the `mov si, imm16` operand
    assert sector[address - 0x7C00 :].startswith(kvm.MARKER.encode() + b"\r\n\0")
    assert b"\xba\xf4\x00\xb0\x10\xee" in sector  # mov dx,0xf4; mov al,0x10; out dx,al
    assert kvm.EXIT_STATUS == 33


def test_boot_sector_loop_jumps_back_to_lodsb() -> None:
    sector = kvm.boot_sector("X")
    loop = sector.index(b"\xac")  # lodsb
    jmp = sector.index(b"\xeb", loop)
    assert jmp + 2 + struct.unpack("b", sector[jmp + 1 : jmp + 2])[0] == loop


# --- command lines ---------------------------------------------------------------------


def test_bootsector_command_under_kvm_uses_host_cpu_like_vng() -> None:
    assert kvm.bootsector_command(arch.get("x86_64"), "kvm", Path("/c/bs.img")) == [
        "qemu-system-x86_64",
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-m",
        "32",
        "-smp",
        "1",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-monitor",
        "none",
        "-net",
        "none",
        "-no-reboot",
        "-machine",
        "pc",
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-drive",
        "format=raw,file=/c/bs.img",
    ]


def test_kernel_command_x86_64_under_tcg() -> None:
    cmd = kvm.kernel_command(arch.get("x86_64"), "tcg", Path("/b/bzImage"))
    assert cmd == [
        "qemu-system-x86_64",
        "-accel",
        "tcg",
        "-cpu",
        "max",
        "-m",
        "512",
        "-smp",
        "1",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-monitor",
        "none",
        "-net",
        "none",
        "-no-reboot",
        "-machine",
        "pc",
        "-kernel",
        "/b/bzImage",
        "-append",
        "console=ttyS0 panic=-1",
    ]


def test_kernel_command_arm64_uses_virt_and_its_console() -> None:
    cmd = kvm.kernel_command(arch.get("arm64"), "kvm", Path("/b/Image"))
    assert cmd[0] == "qemu-system-aarch64"
    assert cmd[cmd.index("-machine") + 1] == "virt"
    assert cmd[-2:] == ["-append", "console=ttyAMA0 panic=-1"]


# --- verdicts --------------------------------------------------------------------------


def test_judge_bootsector() -> None:
    assert kvm.judge_bootsector(33, f"SeaBIOS\n{kvm.MARKER}\n") is None
    assert kvm.judge_bootsector(0, f"{kvm.MARKER}\n") == (
        "no marker on the serial console (exit 0)"
    )
    out = f"qemu-system-x86_64: warning: host doesn't support pni\n{MSR}\nassertion\n"
    assert kvm.judge_bootsector(-6, out) == f"{MSR} (killed by signal 6)"
    assert kvm.judge_bootsector(None, "SeaBIOS\n") == "no marker on the serial console"


def test_judge_kernel() -> None:
    assert kvm.judge_kernel(0, f"Linux version 6.12\n{PANIC}\n") is None
    assert kvm.judge_kernel(None, "Probing EDD (edd=off to disable)... ok\n") == "no kernel output"
    out = "[0.0] Linux version 6.12\n[0.5] smpboot: CPU0\n\n"
    assert kvm.judge_kernel(1, out) == "kernel stopped after: [0.5] smpboot: CPU0 (exit 1)"


# --- the probe, with a fake runner -----------------------------------------------------


Outcome = tuple[int, str] | str  # (returncode, output), or "timeout"


class FakeQemu:
    """Stands in for proc.run; answers by (kind, accel) and records what it ran."""

    def __init__(self, outcomes: dict[tuple[str, str], Outcome]) -> None:
        self.outcomes = outcomes
        self.ran: list[tuple[str, str]] = []
        self.cmds: list[list[str]] = []

    def __call__(self, cmd: list[str], **kw: Any) -> proc.Result:
        kind = "kernel" if "-kernel" in cmd else "bootsector"
        key = (kind, cmd[cmd.index("-accel") + 1])
        self.ran.append(key)
        self.cmds.append(cmd)
        assert kw["timeout"] and kw["idle_timeout"] and kw["check"] is False
        assert kw["log"].read_text().startswith("# reproduce: kbisect doctor")
        outcome = self.outcomes[key]
        on_line: Callable[[str], None] = kw["on_line"]
        if isinstance(outcome, str):
            on_line("Probing EDD (edd=off to disable)... ok")
            raise CommandTimeout(f"{cmd[0]} printed nothing for 30s (log: {kw['log']})")
        code, text = outcome
        for line in text.splitlines():
            on_line(line)
        return proc.Result(code, "", kw["log"])


BS_OK = (33, kvm.MARKER)
K_OK = (0, f"Linux version 6.12\n{PANIC}")


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., FakeQemu]:
    """An x86_64 host with a /dev/kvm; returns a factory installing a FakeQemu."""
    device = tmp_path / "kvm"
    device.touch()
    monkeypatch.setattr(kvm, "KVM_DEVICE", device)
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")

    def install(outcomes: dict[tuple[str, str], Outcome]) -> FakeQemu:
        fake = FakeQemu(outcomes)
        monkeypatch.setattr(proc, "run", fake)
        return fake

    return install


def built_image(name: str = "abc", age: float = 0) -> Path:
    image = paths.cache_dir() / "builds" / "repo" / "x86_64-key" / name / "bzImage"
    image.parent.mkdir(parents=True)
    image.write_bytes(name.encode())
    os.utime(image, (1e9 - age, 1e9 - age))
    return image


def test_no_device_decides_without_booting(
    host: Callable[..., FakeQemu], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = host({})
    monkeypatch.setattr(kvm, "KVM_DEVICE", Path("/nonexistent/kvm"))
    st = kvm.probe("x86_64")
    assert (st.usable, st.method, st.decided) == (False, "no-device", True)
    assert fake.ran == []


def test_foreign_arch_is_always_tcg(host: Callable[..., FakeQemu]) -> None:
    fake = host({})
    st = kvm.probe("arm64")
    assert (st.usable, st.method) == (False, "foreign-arch")
    assert "arm64 guests on an x86_64 host always run under TCG" in st.reason
    assert fake.ran == []


def test_boot_sector_failing_under_kvm_is_decisive(host: Callable[..., FakeQemu]) -> None:
    fake = host({("bootsector", "tcg"): BS_OK, ("bootsector", "kvm"): (-6, MSR)})
    st = kvm.probe("x86_64")
    assert fake.ran == [("bootsector", "tcg"), ("bootsector", "kvm")]
    assert (st.usable, st.decided, st.control_ok, st.method) == (False, True, True, "bootsector")
    assert st.reason == f"boot sector failed under KVM: {MSR} (killed by signal 6)"


def test_broken_qemu_makes_the_probe_undecided(host: Callable[..., FakeQemu]) -> None:
    fake = host({("bootsector", "tcg"): (1, "qemu-system-x86_64: cannot open file")})
    st = kvm.probe("x86_64")
    assert fake.ran == [("bootsector", "tcg")]
    assert (st.usable, st.decided, st.control_ok) == (False, False, False)
    assert "even under TCG" in st.reason


def test_passing_boot_sector_without_a_kernel_is_unknown(host: Callable[..., FakeQemu]) -> None:
    host({("bootsector", "tcg"): BS_OK, ("bootsector", "kvm"): BS_OK})
    st = kvm.probe("x86_64")
    assert (st.usable, st.decided, st.reason) == (False, False, kvm.NO_KERNEL)


def test_newest_built_kernel_settles_it(host: Callable[..., FakeQemu]) -> None:
    built_image("old", age=100)
    new = built_image("new", age=0)
    fake = host(
        {("bootsector", "tcg"): BS_OK, ("bootsector", "kvm"): BS_OK, ("kernel", "kvm"): K_OK}
    )
    st = kvm.probe("x86_64")
    assert fake.ran[-1] == ("kernel", "kvm")
    assert fake.cmds[-1][fake.cmds[-1].index("-kernel") + 1] == str(new)
    assert (st.usable, st.method, st.decided) == (True, "kernel", True)
    assert st.control_ok is None  # no control needed when KVM works


def test_kernel_hanging_under_kvm_but_booting_under_tcg(
    host: Callable[..., FakeQemu], tmp_path: Path
) -> None:
    image = tmp_path / "bzImage"
    fake = host(
        {
            ("bootsector", "tcg"): BS_OK,
            ("bootsector", "kvm"): BS_OK,
            ("kernel", "kvm"): "timeout",
            ("kernel", "tcg"): K_OK,
        }
    )
    st = kvm.probe("x86_64", image=image)
    assert fake.ran[-2:] == [("kernel", "kvm"), ("kernel", "tcg")]
    assert (st.usable, st.decided, st.control_ok) == (False, True, True)
    assert st.reason == (
        "a kernel that boots under TCG failed under KVM: no kernel output; "
        "qemu-system-x86_64 printed nothing for 30s"
    )


def test_kernel_failing_under_tcg_too_cannot_tell(
    host: Callable[..., FakeQemu], tmp_path: Path
) -> None:
    oops = (0, "Linux version\nOops")
    host(
        {
            ("bootsector", "tcg"): BS_OK,
            ("bootsector", "kvm"): BS_OK,
            ("kernel", "kvm"): oops,
            ("kernel", "tcg"): oops,
        }
    )
    st = kvm.probe("x86_64", image=tmp_path / "bzImage")
    assert (st.usable, st.decided, st.control_ok) == (False, False, False)
    assert st.reason.endswith("cannot tell")


# --- the cache and accel() -------------------------------------------------------------


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path | None]:
    """kvm.probe replaced by a counter; the answer depends on whether an image exists."""
    device = tmp_path / "kvm"
    device.touch()
    monkeypatch.setattr(kvm, "KVM_DEVICE", device)
    monkeypatch.setattr(arch, "host_arch", lambda: "x86_64")
    facts = {"qemu": "QEMU emulator version 7.2.22", "kernel": "6.1.0-40-amd64"}
    monkeypatch.setattr(vm_host, "facts", lambda qemu: {**facts, "cpu_model": "EPYC"})
    calls: list[Path | None] = []

    def probe(a: str = "x86_64", image: Path | None = None) -> kvm.KvmStatus:
        calls.append(image)
        if image is None:
            return kvm.KvmStatus(False, kvm.NO_KERNEL, "bootsector", False, True)
        return kvm.KvmStatus(True, "booted", "kernel")

    monkeypatch.setattr(kvm, "probe", probe)
    return calls


def _host(monkeypatch: pytest.MonkeyPatch, **changed: str) -> None:
    """The host as vm_host.facts says it, with `changed` facts."""
    facts = {**vm_host.facts("qemu-system-x86_64"), **changed}
    monkeypatch.setattr(vm_host, "facts", lambda qemu: facts)


def test_status_caches_a_decided_answer(
    counted: list[Path | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    image = built_image()
    assert kvm.status("x86_64").usable
    assert kvm.status("x86_64").usable
    assert counted == [image]
    entry = json.loads((paths.cache_dir() / "kvm.json").read_text())["entries"][0]
    assert entry["key"] == {
        "arch": "x86_64",
        "qemu": "QEMU emulator version 7.2.22",
        "host": "6.1.0-40-amd64",
        "cpu": "EPYC",
        "kvm": "rw",
        "method": "kernel",
        "image_sha256": kvm.sha256(image),
    }
    assert entry["checked"].endswith("Z")
    kvm.status("x86_64", recheck=True)
    assert len(counted) == 2


@pytest.mark.parametrize(
    "change",
    [
        {"qemu": "QEMU emulator version 8.0.0"},
        {"kernel": "6.12.9-amd64"},
        {"cpu_model": "Intel(R) Xeon(R) Gold 6338"},
        {"access": "no access"},
    ],
)
def test_what_can_change_the_answer_probes_again(
    counted: list[Path | None], monkeypatch: pytest.MonkeyPatch, change: dict[str, str]
) -> None:
    """A cached answer stands for one host: another QEMU, host kernel, CPU or /dev/kvm
    this user can no longer open probes again (and then that answer is cached)."""
    built_image()
    kvm.status("x86_64")
    if change.pop("access", None):
        monkeypatch.setattr(os, "access", lambda path, mode: False)
    _host(monkeypatch, **change)
    kvm.status("x86_64")
    kvm.status("x86_64")
    assert len(counted) == 2


def test_a_damaged_entry_is_left_out(counted: list[Path | None]) -> None:
    built_image()
    kvm.status("x86_64")
    cache = paths.cache_dir() / "kvm.json"
    good = json.loads(cache.read_text())["entries"][0]
    damaged = [
        {"key": "x"},
        {**good, "status": {"usable": "yes"}},
        {**good, "status": None},
        {**good, "status": {**good["status"], "decided": "no"}},
        7,
    ]
    cache.write_text(json.dumps({"version": 1, "entries": damaged}))
    assert kvm.status("x86_64").usable
    assert len(counted) == 2
    assert kvm.status("x86_64").usable
    assert len(counted) == 2


def test_unknown_answer_is_reprobed_once_a_kernel_exists(counted: list[Path | None]) -> None:
    assert not kvm.status("x86_64").decided
    assert not kvm.status("x86_64").decided
    assert counted == [None]
    image = built_image()
    assert kvm.status("x86_64").usable
    assert counted == [None, image]


def test_accel_override_wins_and_is_checked(
    counted: list[Path | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    built_image()
    monkeypatch.setenv("KBISECT_ACCEL", "tcg")
    assert kvm.accel("x86_64") == "tcg"
    assert counted == []
    monkeypatch.setenv("KBISECT_ACCEL", "kvn")
    with pytest.raises(UserError, match="KBISECT_ACCEL='kvn': use kvm or tcg"):
        kvm.accel("x86_64")
    monkeypatch.delenv("KBISECT_ACCEL")
    assert kvm.accel("x86_64") == "kvm"
    assert kvm.accel("arm64") == "tcg"


def test_corrupt_cache_is_ignored(counted: list[Path | None]) -> None:
    (paths.cache_dir()).mkdir(parents=True)
    (paths.cache_dir() / "kvm.json").write_text("{not json")
    assert not kvm.status("x86_64").usable
    assert counted == [None]


# --- the real thing --------------------------------------------------------------------


@pytest.mark.real
def test_real_probe_decides_with_a_trustworthy_control() -> None:
    """Boots for real on this host (the PVM host: QEMU aborts under -accel kvm -cpu host)."""
    images = sorted(REAL_CACHE.glob("builds/*/x86_64-*/*/bzImage"), key=lambda p: p.stat().st_mtime)
    st = kvm.probe("x86_64", images[-1] if images else None)
    assert isinstance(st.usable, bool)
    assert st.reason
    assert st.decided or st.reason == kvm.NO_KERNEL
    if Path("/dev/kvm").exists():
        assert st.usable or st.control_ok is True, st  # TCG booted the same thing
        assert (paths.cache_dir() / "kvm-probe" / "bootsector-tcg.log").exists()
