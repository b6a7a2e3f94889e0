"""The virtme-ng command line, built by pure functions (one per concern)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.core.arch import Arch
from kbisect.core.exceptions import UserError
from kbisect.targets import qemu


@dataclass(frozen=True)
class Share:
    """A host directory shared with the guest, at the same path unless `guest` is set
    (a foreign root fs does not have the host's paths)."""

    host: Path
    guest: Path | None = None
    writable: bool = True

    def __post_init__(self) -> None:
        for path in (self.host, self.guest):
            if path is not None and "=" in str(path):  # vng reads GUEST=HOST at the first =
                raise UserError(f"{path}: virtme-ng cannot share a path that contains '='")

    def args(self) -> list[str]:
        spec = str(self.host) if self.guest is None else f"{self.guest}={self.host}"
        return ["--rwdir" if self.writable else "--rodir", spec]


@dataclass(frozen=True)
class Disk:
    """A raw virtio-blk disk: a host file or block device. In the guest it is the vd* whose
    /sys/block/<vdX>/serial is `serial` (/dev/disk/by-id/virtio-<serial> with udev)."""

    path: Path
    serial: str
    size_gb: int | None = None  # a file of this size made for the boot; None: it exists
    cache: str = "none"  # QEMU's cache mode: none (O_DIRECT on the host) or writeback
    iops: int | None = None  # QEMU throttling.iops-total: a deliberately slow disk

    def __post_init__(self) -> None:
        # vng hands --qemu-opts to a shell, and QEMU splits options at ','
        if not re.fullmatch(r"[A-Za-z0-9_./+-]+", str(self.path)):
            raise UserError(f"{self.path}: a disk path must be letters, digits and _ . / + -")


@dataclass(frozen=True)
class Boot:
    image: Path
    arch: Arch
    cpus: int
    memory_mb: int
    accel: str  # "kvm" or "tcg"
    exec_argv: list[str]
    append: list[str] = field(default_factory=list)
    shares: list[Share] = field(default_factory=list)
    root: Path | None = None  # the guest's own root fs (rootfs.py), else the host's
    disks: list[Disk] = field(default_factory=list)


def accel_args(boot: Boot) -> list[str]:
    # KVM is decided by kvm.py by really booting; /dev/kvm alone proves nothing.
    return [] if boot.accel == "kvm" else ["--disable-kvm"]


def arch_args(boot: Boot) -> list[str]:
    # A foreign guest cannot run the host's binaries: it always has its own root fs.
    args = [] if boot.arch.is_native() else ["--arch", boot.arch.vng_arch]
    if boot.root is not None:
        args += ["--root", str(boot.root)]
    return args


def kernel_args(boot: Boot) -> list[str]:
    # panic=-1 turns a guest panic into an exit instead of a hang; the console log
    # (--verbose) carries the panic text for the host to report.
    cmdline = ["panic=-1", "oops=panic", *boot.append]
    return [a for item in cmdline for a in ("--append", item)]


def disk_args(boot: Boot) -> list[str]:
    """QEMU options through vng's --qemu-opts (vng's own --disk names the disk after its
    path, and virtio-blk keeps only 20 bytes of a serial): one drive and device per disk."""
    opts = []
    for index, disk in enumerate(boot.disks):
        drive = f"file={disk.path},format=raw,cache={disk.cache}"
        drive += f",throttling.iops-total={disk.iops}" if disk.iops else ""
        opts += qemu.virtio_disk(boot.arch, f"kbdisk{index}", drive, disk.serial)
    return [f"--qemu-opts={' '.join(opts)}"] if opts else []


def binary() -> str:
    """vng from PATH, else the one installed beside this Python (the venv)."""
    return shutil.which("vng") or str(Path(sys.executable).parent / "vng")


def env(vng: str) -> dict[str, str]:
    """vng runs its helpers (virtme-run) from PATH: put vng's own directory first."""
    return {"PATH": f"{Path(vng).parent}:{os.environ.get('PATH', '')}"}


def command(boot: Boot, vng: str = "vng") -> list[str]:
    """`vng --run IMAGE ... --exec CMD` for one boot."""
    cmd = [vng, "--run", str(boot.image), "--verbose", "--force-9p"]
    cmd += accel_args(boot) + arch_args(boot)
    cmd += ["--cpus", str(boot.cpus), "--memory", f"{boot.memory_mb}M"]
    cmd += kernel_args(boot)
    for share in boot.shares:
        cmd += share.args()
    cmd += disk_args(boot)
    cmd += ["--exec", shlex.join(boot.exec_argv)]
    return cmd
