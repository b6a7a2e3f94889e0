"""A build's .config: the base (a make target, a file, or a machine's running config)
plus the Kconfig fragments, merged, olddefconfig'd and verified; the cache key of those
inputs."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from kbisect.core import proc, progress
from kbisect.core.arch import Arch
from kbisect.core.exceptions import UserError
from kbisect.kernel import kconfig, machinebase
from kbisect.kernel.make import arch_env, build_env, make_command

BASES = ("tinyconfig", "allnoconfig", "defconfig")


def inputs_key(arch: Arch, base: str, fragments: list[kconfig.Fragment]) -> str:
    """The cache key of a build's inputs: the arch, the base (a machine's by what it is
    made of, a file by its content) and the fragments' contents."""
    if (machine_name := machinebase.target_name(base)) is not None:
        base = machinebase.inputs_hash(machine_name)
    elif base not in BASES:
        base = hashlib.sha256(Path(base).read_bytes()).hexdigest()
    text = "\n".join([arch.name, base, kconfig.fragments_hash(fragments)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def make_config(
    arch: Arch,
    base: str,
    src: Path,
    obj: Path,
    fragments: list[kconfig.Fragment],
    log: Path,
    allow_dropped: frozenset[str] = frozenset(),
) -> list[str]:
    """obj/.config from the base and the fragments; the warnings about symbols
    olddefconfig dropped that allow_dropped accepts (any other is a ConfigDropped)."""
    progress.step(f"configuring ({base} + {len(fragments)} fragments)")
    obj.mkdir(parents=True, exist_ok=True)
    if base in BASES:
        proc.run(make_command(src, obj, arch, base), log=log, env=build_env())
    elif (machine_name := machinebase.target_name(base)) is not None:
        machinebase.configure(machine_name, src, obj, arch, log)
    else:
        shutil.copyfile(base, obj / ".config")
    proc.run(
        kconfig.merge_command(src, obj, [f.path for f in fragments]),
        log=log,
        cwd=obj,
        env={**build_env(), **arch_env(arch)},
    )
    proc.run(make_command(src, obj, arch, "olddefconfig"), log=log, env=build_env())
    warnings = kconfig.verify((obj / ".config").read_text(), fragments, set(allow_dropped))
    for w in warnings:
        progress.warn(w)
    return warnings


def check_base(base: str, option: str = "--base-config") -> None:
    """A base config kbisect knows, a config file, or target:NAME (a machine's, fetched
    into the cache by the command line before any build); else UserError (exit 2)."""
    if machinebase.target_name(base) is not None:
        return
    if base not in BASES and not Path(base).is_file():
        raise UserError(f"{option} {base}: not one of {', '.join(BASES)}, a file nor target:NAME")
