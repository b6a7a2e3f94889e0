"""Switching a machine's kernel with kexec (pure command builders) and the checks that
prove which kernel came up.

A switch loads the image with the known-good command line, the boot's extras and a
per-boot nonce (`kbisect.boot=<id>`), then asks systemd for a clean `kexec` (a bare
`kexec -e` skips the shutdown: ext4 needed journal recovery in a trial), detached so the
ssh session returns. The new kernel is the one asked for when /proc/cmdline carries the
nonce, `uname -r` is the build's release and its build id (/sys/kernel/notes) is the
image's.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Mapping, Sequence

NONCE_KEY = "kbisect.boot"
# Words of the known-good command line that name its own boot files or an earlier boot.
DROP = ("BOOT_IMAGE=", "initrd=", f"{NONCE_KEY}=")
NEEDS_INITRAMFS = ("root=UUID=", "root=LABEL=", "root=PARTLABEL=", "root=/dev/mapper/")


def new_nonce() -> str:
    return secrets.token_hex(6)


def command_line(known_good: str, extras: Sequence[str], nonce: str, root_dev: str | None) -> str:
    """The switched kernel's command line: the known-good one without its boot-file words,
    root= as a device path when the known-good one needs an initramfs to resolve it (the
    kernels kbisect builds have none), then the extras, then the nonce."""
    words = [w for w in shlex.split(known_good) if not w.startswith(DROP)]
    if root_dev:
        words = [f"root={root_dev}" if w.startswith(NEEDS_INITRAMFS) else w for w in words]
    return shlex.join([*words, *extras, f"{NONCE_KEY}={nonce}"])


def load_command(
    image: str, cmdline: str, initrd: str | None = None, file_load: bool = True
) -> list[str]:
    """kexec -s (kexec_file_load) or the classic -l; an initramfs only when given (a
    distro kernel's: kbisect's own builds have their drivers built in)."""
    mode = ["-s", "-l"] if file_load else ["-l"]
    ramdisk = [f"--initrd={initrd}"] if initrd else []
    return ["kexec", *mode, image, *ramdisk, f"--append={cmdline}"]


def switch_script(image: str, cmdline: str, initrd: str | None = None) -> str:
    """Load (file_load, else the classic syscall), check it is loaded, then a detached,
    clean `systemctl kexec`. Run as root on the machine."""
    first = shlex.join(load_command(image, cmdline, initrd))
    second = shlex.join(load_command(image, cmdline, initrd, file_load=False))
    return (
        f"{{ {first} || {second}; }} && "
        'test "$(cat /sys/kernel/kexec_loaded)" = 1 && '
        "systemctl --no-block kexec"
    )


def has_nonce(cmdline: str, nonce: str) -> bool:
    return f"{NONCE_KEY}={nonce}" in cmdline.split()


def nonce_of(cmdline: str) -> str | None:
    """The nonce of a kernel kbisect switched to (None: not one of kbisect's boots)."""
    for word in cmdline.split():
        if word.startswith(f"{NONCE_KEY}="):
            return word.split("=", 1)[1]
    return None


def mismatch(want: Mapping[str, str | None], got: Mapping[str, str | None]) -> str | None:
    """The first of release / build id that differs from what was booted, in words."""
    for key in ("release", "build_id"):
        if want.get(key) and want[key] != got.get(key):
            return f"{key} is {got.get(key)!r}, expected {want[key]!r}"
    return None
