"""The pieces of a QEMU command line that every machine kind shares, as pure functions
returning argument lists; what differs by arch (the binary, the machine type, the virtio
block device) comes from core/arch/*.toml. The KVM probe (vng/kvm.py), the emulated
machine (emu/vm.py) and a vng guest's data disks (vng/command.py) are built from them.
"""

from __future__ import annotations

from kbisect.core.arch import Arch


def binary(a: Arch) -> str:
    return a.qemu


def accel(name: str) -> list[str]:
    """`kvm` or `tcg`, and the CPU model: vng runs KVM guests with -cpu host, so every
    machine kbisect starts itself gets the same."""
    return ["-accel", name, "-cpu", "host" if name == "kvm" else "max"]


def machine(a: Arch) -> list[str]:
    return ["-machine", a.machine_type]


def memory(memory_mb: int, cpus: int) -> list[str]:
    return ["-m", str(memory_mb), "-smp", str(cpus)]


def serial_console(where: str, *, vga: bool = True) -> list[str]:
    """No window; the first serial port, the console, to `where` (stdio, file:PATH).
    vga=False also leaves out the graphics card nobody would see."""
    return ["-display", "none", *([] if vga else ["-vga", "none"]), "-serial", where]


def virtio_disk(a: Arch, name: str, drive: str, serial: str) -> list[str]:
    """A virtio-blk disk the guest finds by `serial` (/sys/block/vdX/serial; virtio-blk
    keeps its first 20 bytes); `drive` is the rest of QEMU's -drive options (file=...)."""
    return [
        "-drive",
        f"if=none,id={name},{drive}",
        "-device",
        f"{a.virtio_blk},drive={name},serial={serial}",
    ]
