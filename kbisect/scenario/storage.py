"""Where PGDATA lives: a scenario's [storage] and [fio] rules, the kernel fragments they
need, and the host side of a guest's data disk.

`kind = "tmpfs"` (the default) keeps PGDATA in guest memory. `kind = "disk"` gives the
guest a virtio disk (harness/storage.py formats and mounts it): `backing = "file"`, a raw
sparse file of `size_gb` that kbisect creates in the cache for each boot and deletes
after it, or `backing = "device"`, a host block device (formatted by every boot: its
data is lost). `kind = "path"` is a directory of a machine target. [fio] says whether the
harness characterizes the PGDATA filesystem before the first pgbench of a boot.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kbisect.core import paths
from kbisect.core.checks import OK, WARN, Check
from kbisect.core.exceptions import UserError
from kbisect.targets.vng import command

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


def backing_file(boot_dir: Path) -> Path:
    """A boot's disk file: in the cache (one filesystem for every run, not wherever a run
    directory is), named for the boot, deleted after it."""
    return paths.cache_dir() / "disks" / f"{boot_dir.name}.raw"


def vng_disks(data: dict[str, Any], boot_dir: Path) -> list[command.Disk]:
    """The disks a vng guest gets for this scenario (none for tmpfs)."""
    section = data.get("storage") or {"kind": "tmpfs"}
    if section["kind"] == "tmpfs":
        return []
    if section["kind"] == "path":
        raise UserError(
            'storage.kind = "path" needs a machine target: a vng guest sees this host\'s '
            'files over 9p (use kind = "disk")'
        )
    file_backed = section["backing"] == "file"
    return [
        command.Disk(
            path=backing_file(boot_dir) if file_backed else Path(section["device"]),
            serial=SERIAL,
            size_gb=section["size_gb"] if file_backed else None,
            cache=section["cache"],
            iops=section.get("throttle_iops"),
        )
    ]


def mounted_devices(mounts_text: str) -> set[str]:
    """The devices /proc/mounts lists (first field)."""
    return {line.split()[0] for line in mounts_text.splitlines() if line.strip()}


def device_problem(device: Path, mounts_text: str) -> str | None:
    """Why a host block device may not be given to a guest, or None."""
    try:
        mode = device.stat().st_mode
    except OSError as exc:
        return f"storage.device {device}: {exc.strerror or exc}"
    if not stat.S_ISBLK(mode):
        return f"storage.device {device} is not a block device"
    if not os.access(device, os.R_OK | os.W_OK):
        return f"storage.device {device}: no read-write access for this user"
    real = str(device.resolve())
    busy = sorted(d for d in mounted_devices(mounts_text) if d == real or d.startswith(real))
    if busy:
        return f"storage.device {device} is mounted on this host ({busy[0]}): refusing to format it"
    return None


def check_host(data: dict[str, Any]) -> None:
    """Before any build or boot: the host can give the guest this disk (UserError)."""
    section = data.get("storage") or {}
    if section.get("kind") != "disk":
        return
    if section["backing"] == "device":
        problem = device_problem(Path(section["device"]), Path("/proc/mounts").read_text())
        if problem:
            raise UserError(problem)
        return
    folder = paths.cache_dir() / "disks"
    folder.mkdir(parents=True, exist_ok=True)
    free_gb = shutil.disk_usage(folder).free / 2**30
    if free_gb < section["size_gb"]:
        raise UserError(
            f"storage.size_gb = {section['size_gb']} but {folder} has {free_gb:.1f} GB free"
        )


@contextlib.contextmanager
def attached(disks: list[command.Disk]) -> Iterator[None]:
    """Create each file-backed disk as a sparse file for one boot; delete it after."""
    made: list[Path] = []
    try:
        for disk in disks:
            if disk.size_gb is None:
                continue
            disk.path.parent.mkdir(parents=True, exist_ok=True)
            with disk.path.open("wb") as f:
                made.append(disk.path)
                f.truncate(disk.size_gb * 2**30)
        yield
    finally:
        for path in made:
            path.unlink(missing_ok=True)


# (program, package, what needs it): the guest runs them from this host's root fs
GUEST_TOOLS = (
    ("fio", "fio", "the [fio] preflight"),
    ("mkfs.ext4", "e2fsprogs", 'storage.fs = "ext4" disks'),
    ("mkfs.xfs", "xfsprogs", 'storage.fs = "xfs" disks'),
)
TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def checks() -> list[Check]:
    """`kbisect doctor` rows: the storage programs a native guest takes from this host."""
    rows = []
    for program, package, why in GUEST_TOOLS:
        found = shutil.which(program, path=TOOL_PATH)
        if found:
            rows.append(Check(program, OK, found))
        else:
            rows.append(
                Check(program, WARN, f"missing: needed by {why}", f"apt-get install {package}")
            )
    return rows
