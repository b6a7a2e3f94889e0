"""Where PGDATA lives: a scenario's [storage] and [fio] rules and the kernel fragments
they need (the host side of a vng guest's disk: targets/vng/disks.py).

`kind = "tmpfs"` (the default) keeps PGDATA in guest memory. `kind = "disk"` gives the
guest a virtio disk (harness/storage.py formats and mounts it): `backing = "file"`, a raw
sparse file of `size_gb` that kbisect creates in the cache for each boot and deletes
after it, or `backing = "device"`, a host block device (formatted by every boot: its
data is lost). `kind = "path"` is a directory of a machine target. [fio] says whether the
harness characterizes the PGDATA filesystem before the first pgbench of a boot.
"""

from __future__ import annotations

from typing import Any

KINDS = ("tmpfs", "disk", "path")
FILESYSTEMS = ("ext4", "xfs")
SERIAL = "kbisect-pgdata"  # the disk's virtio serial; harness/storage.py looks for it
FS_FRAGMENTS = {"xfs": "xfs"}  # fs -> the --config fragment a kernel needs for it
# kind -> the fields it takes, with their defaults (None: required, no default)
DISK = {"backing": "file", "fs": "ext4", "mount_options": "", "cache": "none"}
FIELDS: dict[str, dict[str, Any]] = {
    "tmpfs": {},
    "disk": {**DISK, "size_gb": 4, "device": None, "throttle_iops": None},
    "path": {"path": None},
}
FIO = {"seconds": 2, "size_mb": 16}
# What a scenario did before [storage] and [fio] existed: left out of the scenario hash.
UNHASHED_DEFAULTS = {"storage": {"kind": "tmpfs"}, "fio": {"enabled": False, **FIO}}


def _disk_problem(section: dict[str, Any]) -> str | None:
    backing = section.setdefault("backing", "file")
    unused = "device" if backing == "file" else "size_gb"
    if unused in section:
        return f'storage.{unused} does not go with storage.backing = "{backing}"'
    if backing == "device" and "device" not in section:
        return 'storage.backing = "device" needs storage.device (a host block device)'
    if backing == "file":
        section.setdefault("size_gb", FIELDS["disk"]["size_gb"])
    for name, default in DISK.items():
        section.setdefault(name, default)
    return None


def complete(data: dict[str, Any]) -> str | None:
    """Fill in [storage] and [fio] by kind; the one-line problem, or None."""
    section = data.setdefault("storage", {})
    kind = section.setdefault("kind", "tmpfs")
    stray = sorted(set(section) - {"kind", *FIELDS[kind]})
    if stray:
        return f'storage.{stray[0]} does not go with storage.kind = "{kind}"'
    if kind == "path" and "path" not in section:
        return 'storage.kind = "path" needs storage.path (a directory on the machine)'
    if kind == "disk" and (problem := _disk_problem(section)):
        return problem
    fio = data.setdefault("fio", {})
    fio.setdefault("enabled", kind != "tmpfs")
    for name, default in FIO.items():
        fio.setdefault(name, default)
    return None


def kernel_fragments(data: dict[str, Any]) -> list[str]:
    """`--config` names a kernel needs for this scenario's storage (["xfs"] or [])."""
    section = data.get("storage") or {}
    if section.get("kind") != "disk":
        return []
    frag = FS_FRAGMENTS.get(str(section.get("fs")))
    return [frag] if frag else []
