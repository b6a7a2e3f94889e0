"""Guest preparation: mounts, huge page reservation, THP mode, and where PGDATA lives.

Only the guest changes the system; `--host-test` skips every function here that writes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness import proc
from harness.proc import HarnessError

NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def mounts(text: str) -> list[tuple[str, str, str]]:
    """/proc/mounts as (device, mountpoint, fstype), octal escapes (\\040) decoded."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
            out.append((fields[0], point, fields[2]))
    return out


def filesystem_of(path: Path, table: list[tuple[str, str, str]]) -> tuple[str, str]:
    """(device, fstype) of the mount holding `path` (the longest matching mountpoint)."""
    best = ("", "", "")
    target = str(path)
    for device, point, fstype in table:
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[1]):
            best = (device, point, fstype)
    return best[0], best[2]


def pgdata_fs_error(path: Path, table: list[tuple[str, str, str]]) -> str | None:
    """Why PGDATA may not live at `path` (it must be tmpfs or a block device), else None."""
    device, fstype = filesystem_of(path, table)
    if fstype == "tmpfs" or device.startswith("/dev/"):
        return None
    return (
        f"PGDATA {path} is on {fstype or 'an unknown filesystem'} ({device or '?'}), "
        "not on tmpfs or a block device"
    )


def proc_mounts() -> list[tuple[str, str, str]]:
    return mounts(Path("/proc/mounts").read_text())


def _mount(args: list[str]) -> None:
    done = proc.run(["mount", *args], timeout=60)
    if done.returncode != 0:
        raise HarnessError(f"mount {' '.join(args)} failed: {' '.join(done.output.split())}")


def mount_tmpfs(point: Path, size_mb: int) -> None:
    try:
        point.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # virtme-ng overlays /tmp (and /etc, /var) with overlayfs when it runs as root:
        # a kernel without CONFIG_OVERLAY_FS leaves the host's read-only /tmp in place.
        raise HarnessError(
            f"cannot create {point}: {exc.strerror or exc} in the guest "
            f"({point.parent} should be a writable overlay: is CONFIG_OVERLAY_FS in the kernel?)"
        ) from None
    _mount(["-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "kbisect-pgdata", str(point)])


def ensure_dev_shm() -> None:
    """PostgreSQL's POSIX dynamic shared memory needs a writable /dev/shm."""
    if any(point == "/dev/shm" for _, point, _ in proc_mounts()):
        return
    Path("/dev/shm").mkdir(exist_ok=True)
    _mount(["-t", "tmpfs", "-o", "mode=1777", "shm", "/dev/shm"])


def mount_debugfs() -> None:
    """For /sys/kernel/debug/sched/preempt; a kernel without debugfs is fine (best effort)."""
    if any(fstype == "debugfs" for _, _, fstype in proc_mounts()):
        return
    proc.run(["mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug"], timeout=60)


def reserve_hugepages(count: int) -> int:
    """Write vm.nr_hugepages; HarnessError if the kernel gives fewer than asked."""
    try:
        NR_HUGEPAGES.write_text(f"{count}\n")
        got = int(NR_HUGEPAGES.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"cannot reserve {count} huge pages: {exc}") from exc
    if got < count:
        raise HarnessError(f"reserved only {got} of {count} huge pages (guest memory too small?)")
    return got


def set_thp(mode: str) -> None:
    try:
        THP_ENABLED.write_text(f"{mode}\n")
        current = THP_ENABLED.read_text()
    except OSError as exc:
        raise HarnessError(f"cannot set transparent huge pages to {mode}: {exc}") from exc
    if f"[{mode}]" not in current:
        raise HarnessError(f"transparent huge pages stayed {current.strip()!r}, not {mode}")


def is_root() -> bool:
    return os.geteuid() == 0
