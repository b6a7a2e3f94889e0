"""A build's .config: the base (a make target, a file, or a machine's running config)
plus the Kconfig fragments, merged, olddefconfig'd and verified; the cache key of those
inputs."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from kbisect.build import kconfig
from kbisect.build.make import arch_env, build_env, make_command
from kbisect.core import proc, progress
from kbisect.core.exceptions import UserError
from kbisect.targets.ssh import baseconfig as machineconfig  # --base target:NAME

if TYPE_CHECKING:
    from kbisect.build.build import Request

BASES = ("tinyconfig", "allnoconfig", "defconfig")


def inputs_key(req: Request, fragments: list[kconfig.Fragment]) -> str:
    base = req.base
    if (machine_name := machineconfig.target_name(base)) is not None:
        base = machineconfig.inputs_hash(machine_name)
    elif base not in BASES:
        base = hashlib.sha256(Path(base).read_bytes()).hexdigest()
    text = "\n".join([req.arch.name, base, kconfig.fragments_hash(fragments)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def make_config(
    req: Request, src: Path, obj: Path, fragments: list[kconfig.Fragment], log: Path
) -> list[str]:
    """obj/.config for req; the warnings about symbols olddefconfig dropped."""
    progress.step(f"configuring ({req.base} + {len(fragments)} fragments)")
    obj.mkdir(parents=True, exist_ok=True)
    if req.base in BASES:
        proc.run(make_command(src, obj, req.arch, req.base), log=log, env=build_env())
    elif (machine_name := machineconfig.target_name(req.base)) is not None:
        machineconfig.configure(machine_name, src, obj, req.arch, log)
    else:
        shutil.copyfile(req.base, obj / ".config")
    proc.run(
        kconfig.merge_command(src, obj, [f.path for f in fragments]),
        log=log,
        cwd=obj,
        env={**build_env(), **arch_env(req.arch)},
    )
    proc.run(make_command(src, obj, req.arch, "olddefconfig"), log=log, env=build_env())
    warnings = kconfig.verify((obj / ".config").read_text(), fragments, set(req.allow_dropped))
    for w in warnings:
        progress.warn(w)
    return warnings


def check_base(base: str, option: str = "--base-config") -> None:
    """A base config kbisect knows, a config file, or target:NAME (a machine's: fetched
    now, so a bad machine is one line and exit 2 before any build); else exit 2."""
    if (machine_name := machineconfig.target_name(base)) is not None:
        machineconfig.fetch(machine_name)
    elif base not in BASES and not Path(base).is_file():
        raise UserError(f"{option} {base}: not one of {', '.join(BASES)}, a file nor target:NAME")
