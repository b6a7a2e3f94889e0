"""Per-architecture facts, read from the data files in kbisect/arch/ (one file per arch)."""

from __future__ import annotations

import platform
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

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
    cross_compile: str
    qemu: str
    vng_arch: str
    console: str
    debian_arch: str

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


def host_arch() -> str:
    machine = platform.machine()
    return {"aarch64": "arm64", "amd64": "x86_64"}.get(machine, machine)


def _load(path: Path) -> tuple[Arch, list[str]]:
    data = tomllib.loads(path.read_text())
    native = host_arch() == data["name"]
    arch = Arch(
        name=data["name"],
        kernel_arch=data["kernel_arch"],
        image=data["image"],
        image_target=data["image_target"],
        cross_compile=data["cross_compile"] if not native else "",
        qemu=data["qemu"],
        vng_arch=data["vng_arch"],
        console=data["console"],
        debian_arch=data["debian_arch"],
    )
    if not native and not arch.cross_compile:
        arch = Arch(**{**arch.__dict__, "cross_compile": data["cross_compile_foreign"]})
    return arch, list(data.get("aliases", []))


def names() -> list[str]:
    return sorted(p.stem for p in ARCH_DIR.glob("*.toml"))


def get(name: str) -> Arch:
    for path in sorted(ARCH_DIR.glob("*.toml")):
        arch, aliases = _load(path)
        if name == arch.name or name in aliases:
            return arch
    raise UnknownArch(f"unknown arch {name!r} (known: {', '.join(names())})")


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
