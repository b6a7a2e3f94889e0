"""The host side of a vng guest's data disk ([storage] kind = "disk", scenario/storage.py):
which disk the guest gets, whether this host can give it, and its file for one boot.

`backing = "file"`: a raw sparse file of `size_gb` that kbisect creates in the cache for
each boot and deletes after it; `backing = "device"`: a host block device, formatted by
every boot (its data is lost), so never one this host has mounted.
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
from kbisect.core.exceptions import UserError
from kbisect.scenario.storage import SERIAL
from kbisect.targets.vng.command import Disk

MOUNTS = Path("/proc/mounts")
NO_PATH = (
    'storage.kind = "path" needs a machine target: a vng guest sees this host\'s '
    'files over 9p (use kind = "disk")'
)


def backing_file(boot_dir: Path) -> Path:
    """A boot's disk file: in the cache (one filesystem for every run, not wherever a run
    directory is), named for the boot, deleted after it."""
    return disk_dir() / f"{boot_dir.name}.raw"


def disk_dir() -> Path:
    """Where the boots' disk files are made."""
    return paths.cache_dir() / "disks"


def vng_disks(data: dict[str, Any], boot_dir: Path) -> list[Disk]:
    """The disks a vng guest gets for this scenario (none for tmpfs)."""
    section = data.get("storage") or {"kind": "tmpfs"}
    if section["kind"] == "tmpfs":
        return []
    if section["kind"] == "path":
        raise UserError(NO_PATH)
    file_backed = section["backing"] == "file"
    return [
        Disk(
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
    """Before any build or boot (the vng target's preflight): a vng guest can have this
    storage and this host can give it the disk (UserError)."""
    section = data.get("storage") or {}
    if section.get("kind") == "path":
        raise UserError(NO_PATH)
    if section.get("kind") != "disk":
        return
    if section["backing"] == "device":
        problem = device_problem(Path(section["device"]), MOUNTS.read_text())
        if problem:
            raise UserError(problem)
        return
    where = disk_dir()
    where.mkdir(parents=True, exist_ok=True)
    free_gb = shutil.disk_usage(where).free / 2**30
    if free_gb < section["size_gb"]:
        raise UserError(
            f"storage.size_gb = {section['size_gb']} but {where} has {free_gb:.1f} GB free"
        )


@contextlib.contextmanager
def attached(disks: list[Disk]) -> Iterator[None]:
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
