"""Where PGDATA lives in the guest: the scenario's [storage] (kbisect/scenario/storage.py).

tmpfs: a tmpfs at the work dir (as before [storage] existed). disk: the virtio disk whose
serial is SERIAL, formatted (ext4 or xfs) by every boot and mounted at the work dir with
the scenario's options, unmounted at the end. path: a directory of a machine target, used
as it is. `describe()` reads what really holds the work dir from /proc/mounts.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from harness import proc, system
from harness.proc import HarnessError

SERIAL = "kbisect-pgdata"  # kbisect/scenario/storage.py gives the disk this serial
TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
SYS_BLOCK = Path("/sys/block")
BY_ID = Path("/dev/disk/by-id")
FS_CONFIG = {"ext4": "CONFIG_EXT4_FS", "xfs": "CONFIG_XFS_FS (kbisect build --config xfs)"}
PACKAGES = {"ext4": "e2fsprogs", "xfs": "xfsprogs"}


def section(scenario: dict[str, Any]) -> dict[str, Any]:
    """The scenario's [storage], tmpfs when it has none (older scenario JSON)."""
    return dict(scenario.get("storage") or {"kind": "tmpfs"})


def find_disk(serial: str, sys_block: Path = SYS_BLOCK, by_id: Path = BY_ID) -> Path:
    """/dev/<vdX> of the virtio disk with this serial (sysfs, then udev's by-id link)."""
    for entry in sorted(sys_block.glob("*/serial")):
        if entry.read_text(errors="replace").strip() == serial:
            return Path("/dev") / entry.parent.name
    link = by_id / f"virtio-{serial}"
    if link.exists():
        return link.resolve()
    names = ", ".join(sorted(p.name for p in sys_block.iterdir())) if sys_block.is_dir() else ""
    raise HarnessError(
        f"no virtio disk with serial {serial} in the guest (block devices: {names or 'none'}; "
        "is CONFIG_VIRTIO_BLK in the kernel?)"
    )


def kernel_fs_error(fs: str, filesystems: str) -> str | None:
    """Why the kernel cannot mount `fs` (from /proc/filesystems), or None."""
    known = {line.split()[-1] for line in filesystems.splitlines() if line.strip()}
    if fs in known:
        return None
    return f"the kernel has no {fs} filesystem: build it with {FS_CONFIG.get(fs, fs)}"


def mkfs_cmd(tool: str, fs: str, device: Path) -> list[str]:
    """Format the whole device. ext4 initializes its inode tables and journal now: lazy
    init would write them in the background while fio and pgbench measure."""
    if fs == "ext4":
        return [tool, "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(device)]
    return [tool, "-f", "-q", str(device)]


def mount_cmd(fs: str, device: Path, point: Path, options: str) -> list[str]:
    return ["mount", "-t", fs, *(["-o", options] if options else []), str(device), str(point)]


def _tool(fs: str) -> str:
    found = shutil.which(f"mkfs.{fs}", path=TOOL_PATH)
    if found is None:
        raise HarnessError(
            f"mkfs.{fs} is not installed in the guest's root (package {PACKAGES.get(fs, fs)})"
        )
    return found


def _must(cmd: list[str], what: str, timeout: float = 600) -> None:
    done = proc.run(cmd, timeout=timeout)
    if done.returncode != 0:
        raise HarnessError(f"{what} exited {done.returncode}: {proc.last_error_line(done.output)}")


def prepare_disk(spec: dict[str, Any], point: Path) -> None:
    """Format the scenario's disk and mount it at `point`."""
    fs = str(spec["fs"])
    problem = kernel_fs_error(fs, Path("/proc/filesystems").read_text())
    if problem:
        raise HarnessError(problem)
    device = find_disk(SERIAL)
    _must(mkfs_cmd(_tool(fs), fs, device), f"mkfs.{fs} {device}")
    point.mkdir(parents=True, exist_ok=True)
    _must(mount_cmd(fs, device, point, str(spec.get("mount_options") or "")), f"mount {device}")


def prepare(spec: dict[str, Any], point: Path, tmpfs_mb: int) -> None:
    """Make `point` the PGDATA filesystem the scenario asks for (guest only)."""
    if spec["kind"] == "tmpfs":
        system.mount_tmpfs(point, tmpfs_mb)
    elif spec["kind"] == "disk":
        prepare_disk(spec, point)
    elif not point.is_dir():
        raise HarnessError(f"storage.path {point} is not a directory on this machine")


def workdir(spec: dict[str, Any], default: Path) -> Path:
    """Where PGDATA and the socket go: the scenario's path, else the fixed mount point."""
    return Path(spec["path"]) if spec["kind"] == "path" else default


def mount_entry(point: Path, mounts_text: str) -> dict[str, Any]:
    """{device, fs, mount_options} of the mount holding `point`, from /proc/mounts."""
    best: list[str] = []
    target = str(point)
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mp = system.mounts(line)[0][1]
        inside = target == mp or target.startswith(mp.rstrip("/") + "/")
        if inside and (not best or len(mp) >= len(best[1])):
            best = [fields[0], mp, fields[2], fields[3]]
    if not best:
        return {"device": None, "fs": None, "mount_options": None}
    return {"device": best[0], "fs": best[2], "mount_options": best[3]}


def describe(spec: dict[str, Any], point: Path) -> dict[str, Any]:
    """The fingerprint's `storage`: what was asked, and what really holds PGDATA."""
    try:
        found = mount_entry(point.resolve(), Path("/proc/mounts").read_text())
    except OSError:
        found = {"device": None, "fs": None, "mount_options": None}
    asked = {k: spec.get(k) for k in ("backing", "size_gb", "throttle_iops", "cache")}
    return {"kind": spec["kind"], **found, **{k: v for k, v in asked.items() if v is not None}}


def unmount(point: Path) -> str | None:
    """Unmount the disk at the end of a boot (flushes it); the problem, or None."""
    done = proc.run(["umount", str(point)], timeout=600)
    return None if done.returncode == 0 else proc.last_error_line(done.output)
