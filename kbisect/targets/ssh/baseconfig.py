"""`kbisect build --base target:NAME`: start from the machine's own running config with
the drivers it has loaded built in (ktest's MIN_CONFIG recipe: `localyesconfig` fed with
the machine's `lsmod`), then kernel-configs/machine/ (kexec on) and the usual fragments,
verified as for any base. The machine must be on its known-good kernel (preflight
brings it back if needed): its config and module list are what that kernel runs.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from kbisect.core import atomic, proc, progress
from kbisect.core.arch import Arch
from kbisect.core.exceptions import UserError
from kbisect.targets.ssh import config as machine

PREFIX = "target:"
CONFIG_SCRIPT = (
    "if [ -r /proc/config.gz ]; then gzip -dc /proc/config.gz; "
    'elif [ -r "/boot/config-$(uname -r)" ]; then cat "/boot/config-$(uname -r)"; '
    'else echo "no /proc/config.gz and no /boot/config-$(uname -r)" >&2; exit 3; fi'
)
LSMOD_SCRIPT = "cat /proc/modules"


def target_name(base: str) -> str | None:
    """`target:NAME` -> NAME (None for any other base)."""
    return base.removeprefix(PREFIX) if base.startswith(PREFIX) else None


def files(name: str) -> tuple[Path, Path]:
    where = machine.state_dir(name) / "base"
    return where / "config", where / "lsmod"


def fetch(name: str) -> tuple[Path, Path]:
    """The machine's running config and module list, copied into the cache."""
    from kbisect.targets import registry  # the targets package imports build-time modules

    config, lsmod = files(name)
    with registry.get(name) as target:  # closed: the command's own target locks it next
        session = getattr(target, "session", None)
        if session is None:
            raise UserError(f'--base {PREFIX}{name}: {name} is not a machine (kind = "ssh")')
        target.preflight()
        config.parent.mkdir(parents=True, exist_ok=True)
        progress.step(f"fetching {name}'s running config and module list")
        for path, script in ((config, CONFIG_SCRIPT), (lsmod, LSMOD_SCRIPT)):
            atomic.write_text(path, session.check(script, timeout=120))
    if "CONFIG_" not in config.read_text():
        raise UserError(f"--base {PREFIX}{name}: the machine's config is empty")
    return config, lsmod


def module_names(lsmod_text: str) -> list[str]:
    """The loaded modules' names: all that localyesconfig reads of /proc/modules (its
    sizes, use counts and addresses change from boot to boot, KASLR's at every boot)."""
    return sorted({line.split()[0] for line in lsmod_text.splitlines() if line.strip()})


def inputs_hash(name: str) -> str:
    """What the base is made of (for the build's cache key): the running config and the
    names of the loaded modules, so that the same machine gives the same key after a
    reboot."""
    config, lsmod = files(name)
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
    config, lsmod = files(name)
    shutil.copyfile(config, obj / ".config")
    out = obj / ".kbisect-localyes.config"
    proc.run(streamline_command(src, out), cwd=obj, env=streamline_env(lsmod, a), log=log)
    out.replace(obj / ".config")
