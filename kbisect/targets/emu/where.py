"""The emulated machine: a QEMU full-system VM that behaves like a test box on a desk.

Its own Debian 12 disk (mmdebstrap), its own distro kernel (its known-good kernel, passed
with -kernel so that any reset comes back to it), sshd forwarded to 127.0.0.1 only, the
serial console in a file and power-cycling through QMP. To kbisect it is an ordinary
ssh target (`kind = "ssh"`, targets/ssh/): test and demo tooling, so that a machine
target can be tried without hardware (`kbisect emu image && kbisect emu up`).

    $cache/emu/image/        the shared image: disk.img (pristine), vmlinuz, initrd.img,
                             image.json; built in image.partial/, renamed when finished
    $cache/emu/id_ed25519    the key kbisect logs in with (root)
    $cache/emu/NAME/         one VM: disk.qcow2 (over the image), serial.log, qmp.sock,
                             pid, port, qemu.log
"""

from __future__ import annotations

from pathlib import Path

from kbisect.core import arch, paths

DEFAULT_NAME = "emu"


def machine_arch() -> arch.Arch:
    """The machine's arch: an x86_64 PC by design, where its Debian image, the i440fx
    machine and kexec between kernels were verified (on another host it runs under TCG);
    core/arch/x86_64.toml says so with `emulated_machine = true`."""
    return arch.emulated_machine()


def root() -> Path:
    return paths.cache_dir() / "emu"


def image_dir() -> Path:
    return root() / "image"


def key_file() -> Path:
    return root() / "id_ed25519"


def vm_dir(name: str) -> Path:
    return root() / name
