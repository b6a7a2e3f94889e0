"""A pool file (`kind = "pool"`): the machines one kbisect process drives together,
checked key by key before anything is built or booted.

    kind = "pool"
    name = "lab"                # optional: the pool's name (default: the file's stem)
    arch = "x86_64"             # optional: every member must run it

    [[member]]                  # a target as --target names it
    target = "emu1"             # a configured name, `vng`, `fake`, or a path (relative
                                # to this file) to a target's TOML file
    name = "box1"               # optional: the machine's name in the pool

    [[member]]                  # or a target written inline: `kind` and `name`, then
    kind = "fake"               # the kind's own keys (as in its TOML file)
    name = "slow"
    scale = 0.95

A member is never a pool; names are unique; a machine (an ssh host and port) is listed
once; at least one member.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbisect.core import paths, reading
from kbisect.core.exceptions import UserError

KIND = "pool"
POOL_KEYS = ("kind", "name", "arch", "member")


class BadPool(UserError):
    """A pool file that lists no members, a member twice, a pool, or an unknown key."""


@dataclass(frozen=True)
class MemberSpec:
    """One member as the file says it: a `target` reference (name or path) or inline
    settings (with their `kind`); `name` is the machine's name in the pool, when given."""

    name: str | None
    target: str | None
    settings: Mapping[str, Any] | None


@dataclass(frozen=True)
class PoolSpec:
    name: str
    arch: str | None
    members: tuple[MemberSpec, ...]


def _member(pool: str, i: int, entry: Any, here: Path) -> MemberSpec:
    where = f"pool {pool}: member {i + 1}"
    if not isinstance(entry, dict):
        raise BadPool(f"{where} must be a table ([[member]])")
    name = entry.get("name")
    if name is not None and (not isinstance(name, str) or reading.name(name)):
        raise BadPool(f"{where}: name must be letters, digits, '.', '_' or '-', got {name!r}")
    if "target" in entry:
        extra = sorted(set(entry) - {"target", "name"})
        if extra:
            raise BadPool(f"{where}: target = ... takes only a name beside it, got {extra[0]!r}")
        ref = entry["target"]
        if not isinstance(ref, str) or not ref.strip():
            raise BadPool(f"{where}: target must be a target's name or path, got {ref!r}")
        if paths.names_file(ref):  # a path: relative to the pool file
            ref = str((here / Path(ref).expanduser()).resolve())
        return MemberSpec(name, ref, None)
    kind = entry.get("kind")
    if not isinstance(kind, str):
        raise BadPool(f"{where}: needs target = NAME, or kind = ... with the target's keys")
    if kind == KIND:
        raise BadPool(f"{where}: a pool cannot be a member of a pool")
    if name is None:
        raise BadPool(f"{where}: an inline {kind} target needs a name")
    return MemberSpec(name, None, {k: v for k, v in entry.items() if k != "name"})


def parse(default_name: str, data: Mapping[str, Any], here: Path) -> PoolSpec:
    """The pool a file's table describes (`here`: its directory); BadPool naming the
    first problem."""
    unknown = sorted(set(data) - set(POOL_KEYS))
    if unknown:
        raise BadPool(
            f"pool {default_name}: unknown key {unknown[0]!r} (known: {', '.join(POOL_KEYS)})"
        )
    name = data.get("name", default_name)
    if not isinstance(name, str) or reading.name(name):
        raise BadPool(f"pool {default_name}: name must be a short name, got {name!r}")
    arch = data.get("arch")
    if arch is not None and not isinstance(arch, str):
        raise BadPool(f"pool {name}: arch must be a string, got {arch!r}")
    entries = data.get("member", [])
    if not isinstance(entries, list):
        raise BadPool(f"pool {name}: member must be a list of tables ([[member]])")
    if not entries:
        raise BadPool(f"pool {name}: no members (add [[member]] tables)")
    members = tuple(_member(name, i, e, here) for i, e in enumerate(entries))
    return PoolSpec(name, arch, members)


def check_distinct(pool: str, members: list[tuple[str, str | None]]) -> None:
    """Each member (name, machine: an ssh host:port, else None) named once, and each
    machine listed once: two members driving one machine would kexec it under each other."""
    names: set[str] = set()
    hosts: dict[str, str] = {}
    for name, host in members:
        if name in names:
            raise BadPool(f"pool {pool}: two members are named {name!r}")
        names.add(name)
        if host is None:
            continue
        if host in hosts:
            raise BadPool(f"pool {pool}: members {hosts[host]} and {name} are one machine ({host})")
        hosts[host] = name
