"""`kbisect emu image`: the emulated machine's disk, made once with mmdebstrap.

Debian 12 with systemd, sshd, kexec-tools, python3, PostgreSQL 15 and a distro kernel;
Debian's LOAD_KEXEC preseeded off (else every reboot kexecs the running kernel); the
distro's PostgreSQL disabled (the harness runs its own server); DHCP on the NIC; sshd and
a getty on the serial port enabled; kbisect's key for root. The tree becomes an ext4
disk (`mkfs.ext4 -d`); the distro kernel and initrd are copied out for QEMU's -kernel.
"""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbisect.core import clock, debroot, once, proc, progress, reading
from kbisect.core.exceptions import UserError
from kbisect.targets.emu import where

SUITE = debroot.SUITE
PACKAGES = (
    "systemd-sysv",
    "udev",
    "openssh-server",
    "kexec-tools",
    "python3",
    "postgresql-15",
    "linux-image-{debian_arch}",  # the distro kernel of the machine's arch
    "iproute2",
    "e2fsprogs",
    "procps",
    "zstd",
    "dbus",
    "fio",
)
DISK_SIZE = "4G"
HOSTNAME = "kbisect-emu"
MANIFEST = "image.json"
PRESEED = "kexec-tools kexec-tools/load_kexec boolean false"
NETWORK_UNIT = "[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n"
FSTAB = "/dev/vda / ext4 defaults 0 1\n"


def keygen_command(key: Path) -> list[str]:
    return ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kbisect-emu", "-f", str(key)]


def packages() -> list[str]:
    """PACKAGES for the machine's arch."""
    debian_arch = where.machine_arch().debian_arch
    return [p.format(debian_arch=debian_arch) for p in PACKAGES]


def customize_script(pubkey: str) -> str:
    """The customize hook (sh, $1 = the root being made): the machine's identity."""
    console = where.machine_arch().console
    return f"""set -eu
R="$1"
echo {HOSTNAME} > "$R/etc/hostname"
printf '%s' '{FSTAB}' > "$R/etc/fstab"
mkdir -p "$R/etc/systemd/network"
printf '%s' '{NETWORK_UNIT}' > "$R/etc/systemd/network/80-dhcp.network"
chroot "$R" systemctl enable systemd-networkd ssh serial-getty@{console}.service
chroot "$R" systemctl disable postgresql
mkdir -p -m 700 "$R/root/.ssh"
printf '%s\\n' '{pubkey}' > "$R/root/.ssh/authorized_keys"
chmod 600 "$R/root/.ssh/authorized_keys"
"""


def mmdebstrap_command(
    target: Path, hook: Path, mirror: str | None = None, aptopts: Sequence[str] = ()
) -> list[str]:
    """mmdebstrap making the machine's root tree in `target` (pure)."""
    hooks = [
        ("essential", f"echo '{PRESEED}' | chroot \"$1\" debconf-set-selections"),
        ("customize", f'sh {hook} "$1"'),
    ]
    return debroot.mmdebstrap_command(
        arch=where.machine_arch().debian_arch,
        variant="apt",
        packages=packages(),
        output=target,
        hooks=hooks,
        mirror=mirror,
        aptopts=aptopts,
    )


def mkfs_command(tree: Path, disk: Path) -> list[str]:
    """An ext4 file system holding `tree`, in the (sparse) file `disk`."""
    return ["mkfs.ext4", "-q", "-F", "-L", "kbisect-root", "-d", str(tree), str(disk), DISK_SIZE]


def boot_files(tree: Path) -> tuple[Path, Path]:
    """The distro kernel and its initrd in the tree's /boot (the newest, if several)."""
    kernels = sorted((tree / "boot").glob("vmlinuz-*"))
    if not kernels:
        kernel = f"linux-image-{where.machine_arch().debian_arch}"
        raise UserError(f"{tree}/boot: no vmlinuz-* (is {kernel} installed?)")
    release = kernels[-1].name.removeprefix("vmlinuz-")
    return kernels[-1], tree / "boot" / f"initrd.img-{release}"


def ensure_key() -> Path:
    key = where.key_file()
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        proc.run(keygen_command(key))
    return key


def manifest() -> dict[str, object] | None:
    path = where.image_dir() / MANIFEST
    if not path.exists():
        return None
    return reading.json_table(path, "make the image again: kbisect emu image --force")


def build(mirror: str | None = None, force: bool = False) -> Path:
    """Make the image (idempotent: a finished one is kept unless `force`)."""
    final = where.image_dir()
    if manifest() is not None and not force:
        progress.step(f"emulated machine image already made: {final}")
        return final
    tools = ("mmdebstrap", "mkfs.ext4", "ssh-keygen")
    debroot.require("kbisect emu image", tools, "mmdebstrap --mode=root")
    key = ensure_key()
    start = time.monotonic()
    once.build_with_manifest(final, final / MANIFEST, functools.partial(_make, key, mirror))
    progress.step(f"emulated machine image in {time.monotonic() - start:.0f}s: {final}")
    return final


def _make(key: Path, mirror: str | None, partial: Path) -> dict[str, Any]:
    """The disk, kernel and initrd in `partial`; its manifest."""
    partial.mkdir()
    log = partial / "build.log"
    log.write_text(progress.log_header())
    hook = partial / "customize.sh"
    hook.write_text(customize_script(key.with_suffix(".pub").read_text().strip()))
    tree = partial / "root"
    command = mmdebstrap_command(tree, hook, mirror, debroot.host_aptopts())
    progress.step(f"installing Debian {SUITE} into {tree} (log: {log})")
    proc.run(command, log=log, timeout=3600, idle_timeout=900)
    kernel, initrd = boot_files(tree)
    shutil.copyfile(kernel, partial / "vmlinuz")
    shutil.copyfile(initrd, partial / "initrd.img")
    progress.step(f"making the {DISK_SIZE} ext4 disk")
    proc.run(mkfs_command(tree, partial / "disk.img"), log=log, timeout=1800)
    shutil.rmtree(tree)
    return {
        "suite": SUITE,
        "packages": packages(),
        "kernel": kernel.name,
        "release": kernel.name.removeprefix("vmlinuz-"),
        "command": command,
        "created": clock.utc_now(),
    }
