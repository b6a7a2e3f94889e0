"""What `kbisect doctor` asks the machine, as one `Host` whose methods the tests replace."""

from __future__ import annotations

import os
import shutil
import struct
import sys
from glob import glob
from pathlib import Path

from kbisect.core import proc
from kbisect.core.checks import Check
from kbisect.core.exceptions import KbisectError
from kbisect.targets import monitor
from kbisect.targets.vng import kvm


class Host:
    """Everything doctor asks the machine; tests replace these methods."""

    def which(self, name: str) -> str | None:
        """PATH, then the bin/ of the interpreter running kbisect (the venv)."""
        found = shutil.which(name) or str(Path(sys.executable).parent / name)
        return found if os.access(found, os.X_OK) else None

    def on_path(self, name: str) -> bool:
        return shutil.which(name) is not None

    def version(self, cmd: list[str]) -> str:
        """First output line of a version command ('' when it prints nothing or fails)."""
        return proc.first_line(cmd)

    def exists(self, path: str | Path) -> bool:
        return Path(path).exists()

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob(pattern))

    def pkg_config(self, name: str) -> bool:
        try:
            return proc.run(["pkg-config", "--exists", name], check=False).returncode == 0
        except KbisectError:
            return False

    def is_static(self, path: str) -> bool:
        with open(path, "rb") as f:
            return is_static_elf(f.read(1 << 16))

    def free_bytes(self, path: Path) -> int:
        while not path.exists():
            path = path.parent
        return shutil.disk_usage(path).free

    def cpus(self) -> int:
        return os.cpu_count() or 1

    def mem_bytes(self) -> int:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def python(self) -> tuple[int, int, int]:
        return sys.version_info[:3]

    def kvm(self, arch: str, recheck: bool) -> kvm.KvmStatus:
        return kvm.status(arch, recheck=recheck)

    def host_load(self) -> Check:
        return monitor.check()


def is_static_elf(head: bytes) -> bool:
    """True for a 64-bit little-endian ELF with no PT_INTERP program header."""
    if head[:5] != b"\x7fELF\x02":
        return False
    try:
        (phoff,) = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        types = [struct.unpack_from("<I", head, phoff + i * phentsize)[0] for i in range(phnum)]
    except struct.error:  # truncated: cannot tell, so not "static"
        return False
    return 3 not in types  # PT_INTERP names the dynamic loader
