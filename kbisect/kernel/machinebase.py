"""A machine's running config as a build's base (`--base target:NAME`): the machine's
config with the drivers it has loaded built in (ktest's MIN_CONFIG recipe:
`localyesconfig` fed with the machine's `lsmod`), then kernel-configs/machine/ (kexec on)
and the usual fragments, verified as for any base.

The build reads the machine's config and module list from the cache, where the command
line put them before any build (kbisect/targets/ssh/baseconfig.py fetches them from the
machine, on its known-good kernel). So the build's cache key follows what the machine
runs, and the build itself never talks to the machine.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from kbisect.core import paths, proc
from kbisect.core.arch import Arch
from kbisect.core.exceptions import UserError

PREFIX = "target:"


def target_name(base: str) -> str | None:
    """`target:NAME` -> NAME (None for any other base)."""
    return base.removeprefix(PREFIX) if base.startswith(PREFIX) else None


def files(name: str) -> tuple[Path, Path]:
    """Where the machine's running config and module list are kept in the cache."""
    where = paths.machine_dir(name) / "base"
    return where / "config", where / "lsmod"


def fetched(name: str) -> tuple[Path, Path]:
    """The machine's config and module list; UserError when they were never fetched."""
    config, lsmod = files(name)
    if not (config.is_file() and lsmod.is_file()):
        raise UserError(
            f"--base {PREFIX}{name}: the machine's config is not in the cache "
            f"(`kbisect build --base {PREFIX}{name}` fetches it)"
        )
    return config, lsmod


def module_names(lsmod_text: str) -> list[str]:
    """The loaded modules' names: all that localyesconfig reads of /proc/modules (its
    sizes, use counts and addresses change from boot to boot, KASLR's at every boot)."""
    return sorted({line.split()[0] for line in lsmod_text.splitlines() if line.strip()})


def inputs_hash(name: str) -> str:
    """What the base is made of (for the build's cache key): the running config and the
    names of the loaded modules, so that the same machine gives the same key after a
    reboot."""
    config, lsmod = fetched(name)
    h = hashlib.sha256(config.read_bytes())
    h.update("\n".join(["", *module_names(lsmod.read_text())]).encode())
    return h.hexdigest()


def streamline_command(src: Path, out: Path) -> list[str]:
    """The tree's streamline_config.pl --localyesconfig (reads ./.config and $LSMOD),
    its config on stdout into `out`. Run with cwd = the O= dir."""
    script = src / "scripts" / "kconfig" / "streamline_config.pl"
    return [
        "sh",
        "-c",
        'exec perl "$1" --localyesconfig "$2" Kconfig > "$3"',
        "sh",
        str(script),
        str(src),
        str(out),
    ]


def streamline_env(lsmod: Path, a: Arch) -> dict[str, str]:
    """streamline_config.pl reads the module list from $LSMOD and expands $(SRCARCH) in
    Kconfig's `source` lines."""
    return {"LSMOD": str(lsmod), "SRCARCH": a.kernel_arch, "ARCH": a.kernel_arch}


def configure(name: str, src: Path, obj: Path, a: Arch, log: Path) -> None:
    """obj/.config = the machine's config, its loaded modules turned built-in."""
    config, lsmod = fetched(name)
    shutil.copyfile(config, obj / ".config")
    out = obj / ".kbisect-localyes.config"
    proc.run(streamline_command(src, out), cwd=obj, env=streamline_env(lsmod, a), log=log)
    out.replace(obj / ".config")
