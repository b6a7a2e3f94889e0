"""targets/qemu.py: the shared pieces of every QEMU command line, per arch from its data."""

from __future__ import annotations

from kbisect.core import arch
from kbisect.targets import qemu


def test_the_per_arch_pieces_come_from_the_data_files() -> None:
    x86, arm = arch.get("x86_64"), arch.get("arm64")
    assert (qemu.binary(x86), qemu.machine(x86)) == ("qemu-system-x86_64", ["-machine", "pc"])
    assert (qemu.binary(arm), qemu.machine(arm)) == ("qemu-system-aarch64", ["-machine", "virt"])
    drive = ["-drive", "if=none,id=d0,file=/x,format=raw"]
    device = ["-device", "virtio-blk-device,drive=d0,serial=s"]
    assert qemu.virtio_disk(arm, "d0", "file=/x,format=raw", "s") == drive + device
    assert qemu.virtio_disk(x86, "d0", "file=/x", "s")[-1] == "virtio-blk-pci,drive=d0,serial=s"


def test_the_shared_pieces() -> None:
    assert qemu.accel("kvm") == ["-accel", "kvm", "-cpu", "host"]
    assert qemu.accel("tcg") == ["-accel", "tcg", "-cpu", "max"]
    assert qemu.memory(512, 1) == ["-m", "512", "-smp", "1"]
    assert qemu.serial_console("stdio") == ["-display", "none", "-serial", "stdio"]
    no_vga = ["-display", "none", "-vga", "none", "-serial", "file:/s"]
    assert qemu.serial_console("file:/s", vga=False) == no_vga
