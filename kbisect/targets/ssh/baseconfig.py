"""Fetch a machine's running config and module list into the cache, for builds whose base
is that machine's config (`--base target:NAME`, kbisect/kernel/machinebase.py). The
machine must be on its known-good kernel (its preflight brings it back if needed): its
config and module list are what that kernel runs.
"""

from __future__ import annotations

from pathlib import Path

from kbisect.core import atomic, progress
from kbisect.core.exceptions import UserError
from kbisect.kernel import machinebase
from kbisect.targets import registry

CONFIG_SCRIPT = (
    "if [ -r /proc/config.gz ]; then gzip -dc /proc/config.gz; "
    'elif [ -r "/boot/config-$(uname -r)" ]; then cat "/boot/config-$(uname -r)"; '
    'else echo "no /proc/config.gz and no /boot/config-$(uname -r)" >&2; exit 3; fi'
)
LSMOD_SCRIPT = "cat /proc/modules"


def fetch(name: str) -> tuple[Path, Path]:
    """The machine's running config and module list, copied into the cache."""
    config, lsmod = machinebase.files(name)
    prefix = machinebase.PREFIX
    with registry.get(name) as target:  # closed: the command's own target locks it next
        session = getattr(target, "session", None)
        if session is None:
            raise UserError(f'--base {prefix}{name}: {name} is not a machine (kind = "ssh")')
        target.preflight()
        progress.step(f"fetching {name}'s running config and module list")
        for path, script in ((config, CONFIG_SCRIPT), (lsmod, LSMOD_SCRIPT)):
            atomic.write_text(path, session.check(script, timeout=120))
    if "CONFIG_" not in config.read_text():
        raise UserError(f"--base {prefix}{name}: the machine's config is empty")
    return config, lsmod
