"""Debian root trees made once with mmdebstrap into the cache: the one command builder
behind `kbisect image` (targets/vng/rootfs.py: a guest's root carrying its scenario's
PostgreSQL), `kbisect emu image` (targets/emu/image.py: the emulated machine's disk)
and the PostgreSQL build root (pgbuild/buildroot.py).

A build goes into `<final>.partial` beside its final directory and is renamed when
finished; its manifest (JSON) is written last (core/once.py build_with_manifest).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from kbisect.core.exceptions import MissingTool, UserError

SUITE = "bookworm"  # Debian 12: the emulated machine's
_NO_EXPIRY = re.compile(r'^\s*Acquire::Check-Valid-Until\s+"?(false|no|0)"?\s*;', re.M | re.I)


def mmdebstrap_command(
    *,
    arch: str,
    variant: str,
    packages: Sequence[str],
    output: Path,
    hooks: Iterable[tuple[str, str]] = (),
    suite: str = SUITE,
    mirror: str | None = None,
    aptopts: Sequence[str] = (),
) -> list[str]:
    """mmdebstrap making a root tree of `arch` (dpkg's name) in `output` (pure). `hooks`:
    (phase, shell command) pairs, e.g. ("customize", 'sh hook.sh "$1"'), in order;
    `aptopts`: apt options for the root's apt (host_aptopts())."""
    cmd = [
        "mmdebstrap",
        "--mode=root",
        f"--variant={variant}",
        f"--architectures={arch}",
        f"--include={','.join(packages)}",
        *(f"--aptopt={o}" for o in aptopts),
        *(f"--{phase}-hook={command}" for phase, command in hooks),
        suite,
        str(output),
    ]
    return [*cmd, mirror] if mirror else cmd


def host_aptopts(etc: Path = Path("/etc/apt")) -> tuple[str, ...]:
    """The host's apt settings a root's apt must share to read the same mirror: a host
    whose apt configuration turns off the Release file's expiry check (a snapshot mirror,
    whose sid Release has expired) gets it turned off in the root too; otherwise none."""
    files = [etc / "apt.conf", *sorted((etc / "apt.conf.d").glob("*"))]
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        if _NO_EXPIRY.search(text):
            return ('Acquire::Check-Valid-Until "false"',)
    return ()


def require(command: str, tools: Iterable[str], why_root: str) -> None:
    """Before a build: the programs it runs are installed and this is root (UserError)."""
    for tool in tools:
        if shutil.which(tool) is None:
            raise MissingTool(f"{tool}: not installed (run scripts/setup)")
    if os.geteuid() != 0:
        raise UserError(f"{command}: run as root ({why_root})")
