"""One emulated machine: QEMU's command line, power on/off, reset through QMP, status.

The VM boots the image's own distro kernel with -kernel, so a reset (a power cycle) always
comes back to it; its disk is a qcow2 overlay on the pristine image; sshd is forwarded
from 127.0.0.1 only; the serial console goes to serial.log; QMP listens on a unix socket.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import atomic, proc, progress
from kbisect.core.arch import Arch
from kbisect.core.exceptions import InfraError, UserError
from kbisect.targets import qemu, registry
from kbisect.targets.emu import where
from kbisect.targets.ssh import qmp
from kbisect.targets.vng import kvm

LOOPBACK = "127.0.0.1"


class NoImage(UserError):
    """`kbisect emu up` before `kbisect emu image`."""


@dataclass(frozen=True)
class Vm:
    """The files of one VM (pure: nothing is read or started here)."""

    name: str
    dir: Path

    @classmethod
    def named(cls, name: str) -> Vm:
        return cls(name, where.vm_dir(name))

    disk = property(lambda self: self.dir / "disk.qcow2")
    serial = property(lambda self: self.dir / "serial.log")
    qmp = property(lambda self: self.dir / "qmp.sock")
    pidfile = property(lambda self: self.dir / "pid")
    portfile = property(lambda self: self.dir / "port")
    log = property(lambda self: self.dir / "qemu.log")


def overlay_command(base: Path, disk: Path) -> list[str]:
    """A qcow2 disk whose unwritten blocks come from the pristine raw image."""
    return ["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(base), "-F", "raw", str(disk)]


def cmdline(a: Arch) -> str:
    """The distro kernel's command line. nowatchdog: under TCG on a loaded host a vCPU can
    stall for many seconds; the soft lockup detector then prints "BUG: soft lockup",
    which kbisect rightly takes for a kernel failure. Kernels switched to inherit it."""
    return f"root=/dev/vda rw console={a.console},115200 nowatchdog"


def qemu_command(
    vm: Vm, image: Path, port: int, accel: str, memory_mb: int = 2048, cpus: int = 2
) -> list[str]:
    """The emulated machine's QEMU command line (pure). Loopback-only ssh forward."""
    a = where.machine_arch()
    nic = f"user,model=virtio-net-pci,hostfwd=tcp:{LOOPBACK}:{port}-:22"
    return [
        qemu.binary(a),
        "-name",
        f"kbisect-{vm.name}",
        *qemu.machine(a),  # pc (i440fx): kexec between kernels verified on it (machines.md)
        *qemu.accel(accel),
        *qemu.memory(memory_mb, cpus),
        "-kernel",
        str(image / "vmlinuz"),
        "-initrd",
        str(image / "initrd.img"),
        "-append",
        cmdline(a),
        "-drive",
        f"file={vm.disk},if=virtio,format=qcow2",
        "-nic",
        nic,
        *qemu.serial_console(f"file:{vm.serial}", vga=False),
        "-qmp",
        f"unix:{vm.qmp},server=on,wait=off",
        "-daemonize",
        "-pidfile",
        str(vm.pidfile),
    ]


def target_settings(vm: Vm, port: int, key: Path, known_hosts: Path) -> dict[str, Any]:
    """The target file kbisect reads for this VM (an ordinary ssh machine)."""
    return {
        "kind": "ssh",
        "arch": where.machine_arch().name,
        "host": LOOPBACK,
        "port": port,
        "user": "root",
        "key": str(key),
        "known_hosts": str(known_hosts),
        "switch": "kexec",
        "console": f"tail -n0 -F {vm.serial}",
        "power_cycle": f"qmp:{vm.qmp}",
        "boot_timeout_s": 600,
    }


def toml_text(settings: dict[str, Any]) -> str:
    """Flat TOML (strings and integers only): enough for a target file."""
    lines = ["# written by `kbisect emu up`: the emulated machine as an ssh target"]
    for key, value in settings.items():
        lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def pid(vm: Vm) -> int | None:
    """The running QEMU's pid, or None (a stale pid file is ignored)."""
    try:
        number = int(vm.pidfile.read_text().strip())
        os.kill(number, 0)
    except (OSError, ValueError):
        return None
    comm = Path(f"/proc/{number}/comm")
    return number if comm.is_file() and comm.read_text().startswith("qemu") else None


def target_file(name: str) -> Path:
    return registry.config_dir() / f"{name}.toml"


def known_hosts(name: str) -> Path:
    return where.vm_dir(name) / "known_hosts"


def up(name: str, memory_mb: int, cpus: int, fresh: bool = False) -> dict[str, Any]:
    """Power the VM on (a no-op when it runs) and write its target file."""
    image = where.image_dir()
    if not (image / "image.json").is_file():
        raise NoImage("no emulated machine image: run `kbisect emu image` first")
    vm = Vm.named(name)
    if pid(vm) is not None:
        progress.step(f"emulated machine {name} already runs (pid {pid(vm)})")
        return status(name)
    vm.dir.mkdir(parents=True, exist_ok=True)
    if (
        fresh
        or not vm.disk.exists()
        or vm.disk.stat().st_mtime < (image / "disk.img").stat().st_mtime
    ):
        vm.disk.unlink(missing_ok=True)
        known_hosts(name).unlink(missing_ok=True)  # a new image has new host keys
        proc.run(overlay_command(image / "disk.img", vm.disk))
    port = free_port()
    for stale in (vm.qmp, vm.serial):
        stale.unlink(missing_ok=True)
    accel = kvm.accel(where.machine_arch().name)
    cmd = qemu_command(vm, image, port, accel, memory_mb, cpus)
    vm.log.write_text(progress.log_header())
    proc.run(cmd, log=vm.log, timeout=120)
    atomic.write_text(vm.portfile, f"{port}\n")
    settings = target_settings(vm, port, where.key_file(), known_hosts(name))
    atomic.write_text(target_file(name), toml_text(settings))
    progress.step(f"emulated machine {name} powered on ({accel}): ssh on {LOOPBACK}:{port}")
    return status(name)


def _wait_gone(vm: Vm, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while pid(vm) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def down(name: str, grace_s: float = 90.0) -> bool:
    """Power off: ACPI shutdown through QMP (a clean ext4), then SIGTERM, then SIGKILL.
    True if it was running."""
    vm = Vm.named(name)
    number = pid(vm)
    if number is None:
        return False
    try:
        qmp.execute(vm.qmp, "system_powerdown")
    except InfraError:
        grace_s = 0.0
    if not _wait_gone(vm, grace_s):
        os.kill(number, signal.SIGTERM)
        if not _wait_gone(vm, 10.0):
            os.kill(number, signal.SIGKILL)
    vm.pidfile.unlink(missing_ok=True)
    vm.qmp.unlink(missing_ok=True)
    return True


def reset(name: str) -> None:
    """A power cycle: QMP system_reset (the machine comes back on its distro kernel)."""
    vm = Vm.named(name)
    if pid(vm) is None:
        raise UserError(f"emulated machine {name} is not running: `kbisect emu up`")
    qmp.execute(vm.qmp, "system_reset")


def status(name: str) -> dict[str, Any]:
    vm = Vm.named(name)
    number = pid(vm)
    port = vm.portfile.read_text().strip() if vm.portfile.is_file() else None
    return {
        "name": name,
        "running": number is not None,
        "pid": number,
        "port": int(port) if port and number is not None else None,
        "dir": str(vm.dir),
        "serial": str(vm.serial),
        "target": str(target_file(name)) if target_file(name).is_file() else None,
        "image": str(where.image_dir()) if (where.image_dir() / "image.json").is_file() else None,
    }
