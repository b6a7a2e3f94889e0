"""Targets: where a built kernel runs the harness (base.py has the protocol).

A target is named on the command line with `--target NAME`:
- `vng` (the default): a virtme-ng guest on this host, KVM or TCG (targets/vng/);
- `fake`: a scripted machine for tests and dry runs (targets/fake/);
- any other NAME: a TOML file, `~/.config/kbisect/targets/NAME.toml` (or a path to a
  .toml file), whose `kind` says which of the kinds below it configures;
- a pool file (`kind = "pool"`, targets/pool/): several of those as one target.

The arch is resolved here, once: `--arch` if given, else the target's own (a machine's
TOML says it), else, for a local target, this host's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kbisect.core import arch as arch_mod
from kbisect.core import paths, reading
from kbisect.core.exceptions import UserError
from kbisect.targets.base import Job, Kernel, Target
from kbisect.targets.fake.target import FakeTarget
from kbisect.targets.lava.target import LavaTarget
from kbisect.targets.pool import config as pool_config
from kbisect.targets.pool import target as pool_target
from kbisect.targets.ssh.target import SshTarget
from kbisect.targets.vng.target import VngTarget

__all__ = ["Job", "Kernel", "Target", "config_dir", "get", "names"]
BUILTIN = ("vng", "fake")
KINDS: dict[str, type[Target]] = {
    "vng": VngTarget,
    "fake": FakeTarget,
    "ssh": SshTarget,
    "lava": LavaTarget,
}


class UnknownTarget(UserError):
    """--target names no built-in target and no TOML file."""


def config_dir() -> Path:
    """$XDG_CONFIG_HOME/kbisect/targets (else ~/.config/kbisect/targets)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg) / "kbisect" / "targets"


def names() -> list[str]:
    """The built-in targets, then the configured ones."""
    found = sorted(p.stem for p in config_dir().glob("*.toml")) if config_dir().is_dir() else []
    return [*BUILTIN, *(n for n in found if n not in BUILTIN)]


def _file(name: str) -> Path | None:
    if paths.names_file(name):
        path = Path(name).expanduser()
        if not path.exists():
            raise UnknownTarget(f"--target {name}: no such file")
        return path.resolve()  # reading.toml says what else is wrong with it
    path = config_dir() / f"{name}.toml"
    return path if path.exists() else None


def _settings(name: str, path: Path) -> dict[str, Any]:
    data = reading.toml(path, UnknownTarget)
    kinds = [*KINDS, pool_config.KIND]
    if not isinstance(data.get("kind"), str) or data["kind"] not in kinds:
        raise UnknownTarget(
            f"target {name} ({path}): kind must be one of {', '.join(kinds)}, "
            f"got {data.get('kind')!r}"
        )
    return data


def _arch(given: str | None, own: Any, name: str) -> arch_mod.Arch:
    """--arch, else the target's own, else this host's; they must agree when both say."""
    if given and own and arch_mod.get(given).name != arch_mod.get(str(own)).name:
        raise UserError(f"--arch {given}: target {name} runs {own}")
    return arch_mod.get(given or (str(own) if own else arch_mod.host_arch()))


def _resolve(name: str) -> tuple[str, dict[str, Any], Path | None]:
    """A --target value: its label, its settings, and its file (None for a built-in)."""
    path = None if name in BUILTIN else _file(name)
    if path is None and name not in BUILTIN:
        known = ", ".join(names())
        raise UnknownTarget(
            f"unknown target {name!r} (known: {known}; a machine is a TOML "
            f"file in {config_dir()} or a path)"
        )
    settings = {"kind": name} if path is None else _settings(name, path)
    label = Path(name).stem if path is not None else name
    if problem := reading.name(label):  # it names the machine's folder in the cache
        raise UnknownTarget(f"--target {name}: the target's name {label!r} {problem}")
    return label, settings, path


def _make(label: str, settings: dict[str, Any], arch: str | None) -> Target:
    a = _arch(arch, settings.get("arch"), label)
    return KINDS[settings["kind"]].from_settings(label, a, settings)


def _member(pool: str, spec: pool_config.MemberSpec, arch: str | None) -> Target:
    """One member of a pool file: a target it names, or one it writes inline."""
    if spec.target is not None:
        label, settings, _ = _resolve(spec.target)
    else:
        label, settings = str(spec.name), dict(spec.settings or {})
    if settings.get("kind") not in KINDS:
        raise pool_config.BadPool(
            f"pool {pool}: member {spec.name or label}: kind must be one of "
            f"{', '.join(KINDS)} (a pool cannot be a member), got {settings.get('kind')!r}"
        )
    return _make(spec.name or label, settings, arch)


def get(name: str | None = None, arch: str | None = None) -> Target:
    """The target called `name` (default vng), for `arch` (default: see above)."""
    label, settings, path = _resolve(name or "vng")
    if settings["kind"] != pool_config.KIND:
        return _make(label, settings, arch)
    assert path is not None  # a pool is always a file
    given = _arch(arch, settings.get("arch"), label).name if arch or settings.get("arch") else None
    return pool_target.build(
        label,
        given,
        settings,
        path.parent,
        lambda spec, a: _member(label, spec, a),
    )
