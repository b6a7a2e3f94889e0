"""Per-architecture facts, read from the data files in kbisect/core/arch/ (one file per
arch): nothing outside those files names an arch."""

from __future__ import annotations

import functools
import platform
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core.exceptions import UserError

ARCH_DIR = Path(__file__).with_name("arch")


class UnknownArch(UserError):
    """The architecture has no data file."""


@dataclass(frozen=True)
class Arch:
    name: str
    kernel_arch: str
    image: str
    image_target: str
    image_format: str  # kernel/kimage.py recognizes the file by it
    cross_compile: str
    qemu: str
    qemu_package: str
    machine_type: str
    virtio_blk: str
    bootsector_probe: bool
    vng_arch: str
    console: str
    debian_arch: str
    emulated_machine: bool

    def is_native(self) -> bool:
        return host_arch() == self.name

    def make_vars(self) -> list[str]:
        """ARCH= and, when cross-compiling, CROSS_COMPILE= for make."""
        out = [f"ARCH={self.kernel_arch}"]
        if not self.is_native() and self.cross_compile:
            out.append(f"CROSS_COMPILE={self.cross_compile}")
        return out

    def compiler(self) -> str:
        return "gcc" if self.is_native() else f"{self.cross_compile}gcc"


@functools.cache
def _files() -> tuple[dict[str, Any], ...]:
    """The data files, read once per process."""
    return tuple(tomllib.loads(p.read_text()) for p in sorted(ARCH_DIR.glob("*.toml")))


def from_machine(machine: str) -> str:
    """kbisect's name for what `uname -m` says (aarch64 is arm64); others pass through."""
    for data in _files():
        if machine in data["uname_machines"]:
            return str(data["name"])
    return machine


def host_arch() -> str:
    return from_machine(platform.machine())


def _load(data: dict[str, Any]) -> tuple[Arch, list[str]]:
    native = host_arch() == data["name"]
    arch = Arch(
        name=data["name"],
        kernel_arch=data["kernel_arch"],
        image=data["image"],
        image_target=data["image_target"],
        image_format=data["image_format"],
        cross_compile=data["cross_compile"] if not native else "",
        qemu=data["qemu"],
        qemu_package=data["qemu_package"],
        machine_type=data["machine_type"],
        virtio_blk=data["virtio_blk"],
        bootsector_probe=data["bootsector_probe"],
        vng_arch=data["vng_arch"],
        console=data["console"],
        debian_arch=data["debian_arch"],
        emulated_machine=data["emulated_machine"],
    )
    if not native and not arch.cross_compile:
        arch = Arch(**{**arch.__dict__, "cross_compile": data["cross_compile_foreign"]})
    return arch, list(data.get("aliases", []))


def names() -> list[str]:
    return sorted(p.stem for p in ARCH_DIR.glob("*.toml"))


def get(name: str) -> Arch:
    for data in _files():
        arch, aliases = _load(data)
        if name == arch.name or name in aliases:
            return arch
    raise UnknownArch(f"unknown arch {name!r} (known: {', '.join(names())})")


def known() -> list[Arch]:
    """Every arch with a data file, by name."""
    return [_load(data)[0] for data in _files()]


def emulated_machine() -> Arch:
    """The arch of `kbisect emu`'s machine: the one data file that says so (x86_64.toml
    says why)."""
    [arch] = [a for a in known() if a.emulated_machine]
    return arch


def main(argv: list[str]) -> int:
    """`python -m kbisect.core.arch NAME`, for the scripts/ that run make themselves: the
    compiler on the first line, the make variables (space-separated) on the second."""
    if len(argv) != 1:
        print("usage: python -m kbisect.core.arch NAME", file=sys.stderr)
        return UnknownArch.exit_code
    try:
        a = get(argv[0])
    except UnknownArch as exc:
        print(f"kbisect: {exc}", file=sys.stderr)
        return exc.exit_code
    print(a.compiler())
    print(" ".join(a.make_vars()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
