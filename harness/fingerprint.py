"""What the measurement ran on: kernel, preemption model, memory, huge pages, PostgreSQL.

Pure parsers take text; the `read_*` functions read /proc, /sys and the kernel log.
Anything that cannot be found is null, never guessed.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

PREEMPT_DEBUGFS = Path("/sys/kernel/debug/sched/preempt")


def read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def meminfo(text: str) -> dict[str, int]:
    """`/proc/meminfo` as {field: number} (kB for sizes, a count for HugePages_*)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def bracketed(text: str | None) -> str | None:
    """The selected value of a sysfs choice: `always [madvise] never` -> `madvise`."""
    m = re.search(r"\[([^\]]+)\]", text or "")
    return m.group(1) if m else None


def preempt_from_debugfs(text: str | None) -> str | None:
    """`none voluntary (full) lazy` -> `full`."""
    m = re.search(r"\(([a-z_]+)\)", text or "")
    return m.group(1) if m else None


def preempt_from_log(text: str | None) -> str | None:
    """The boot log's `Dynamic Preempt: lazy` line (the last one wins)."""
    hits = re.findall(r"Dynamic Preempt: ([a-z_]+)", text or "")
    return hits[-1] if hits else None


def read_kmsg(limit: int = 200_000) -> str | None:
    """The kernel log ring from /dev/kmsg, without blocking (None if unreadable)."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    records: list[str] = []
    try:
        while len(records) < limit:
            try:
                records.append(os.read(fd, 8192).decode(errors="replace"))
            except BrokenPipeError:  # a record was overwritten while we read: skip it
                continue
            except BlockingIOError:
                break
    except OSError:
        return None
    finally:
        os.close(fd)
    return "".join(records)


def preempt(dmesg: Callable[[], str | None]) -> tuple[str | None, str | None]:
    """(effective preemption model, where it was read), from debugfs, else the log."""
    found = preempt_from_debugfs(read(PREEMPT_DEBUGFS))
    if found:
        return found, "debugfs"
    found = preempt_from_log(read_kmsg())
    if found:
        return found, "kmsg"
    found = preempt_from_log(dmesg())
    return (found, "dmesg") if found else (None, None)


def pg_version(text: str) -> str | None:
    """`postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)` -> `15.18 (Debian ...)`."""
    m = re.search(r"\(PostgreSQL\)\s+(.+)", text)
    return m.group(1).strip() if m else None


def file_sha256(path: Path) -> str | None:
    """The sha256 of a file (the server binary that ran), None if unreadable."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def smaps_hugetlb(text: str, base_kb: int) -> bool:
    """Does any mapping use pages larger than the base page (hugetlb), or hold hugetlb?"""
    for line in text.splitlines():
        m = re.match(r"^KernelPageSize:\s+(\d+) kB", line)
        if m and int(m.group(1)) > base_kb:
            return True
        m = re.match(r"^(?:Shared|Private)_Hugetlb:\s+(\d+) kB", line)
        if m and int(m.group(1)) > 0:
            return True
    return False


def huge_pages_used(
    setting: str, before: dict[str, int], after: dict[str, int], smaps: str | None
) -> bool | None:
    """Null when huge_pages=off; else whether the server really got huge pages."""
    if setting == "off":
        return None
    taken = before.get("HugePages_Free", 0) - after.get("HugePages_Free", 0)
    reserved = after.get("HugePages_Rsvd", 0) - before.get("HugePages_Rsvd", 0)
    base_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    return taken > 0 or reserved > 0 or (smaps is not None and smaps_hugetlb(smaps, base_kb))


def nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


def cpuinfo(text: str) -> dict[str, Any]:
    """/proc/cpuinfo -> CPU model, cores (distinct physical id/core id pairs) and threads."""
    blocks = [b for b in text.split("\n\n") if "processor" in b]
    fields = [dict(_pairs(b)) for b in blocks]
    model = next((f.get("model name") or f.get("cpu model") for f in fields if f), None)
    cores = {(f.get("physical id"), f.get("core id")) for f in fields if "core id" in f}
    return {
        "cpu_model": model,
        "cpu_threads": len(fields) or None,
        "cpu_cores": len(cores) or len(fields) or None,
    }


def _pairs(block: str) -> list[tuple[str, str]]:
    rows = (line.split(":", 1) for line in block.splitlines() if ":" in line)
    return [(k.strip(), v.strip()) for k, v in rows]


def smt(text: str | None) -> bool | None:
    """/sys/devices/system/cpu/smt/active: "1" -> True."""
    return None if text is None or not text.strip() else text.strip() == "1"


def hardware() -> dict[str, Any]:
    """What machine this is: DMI product, CPU, NUMA nodes, SMT, frequency governor."""
    product = read("/sys/class/dmi/id/product_name")
    governor = read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return {
        "dmi_product": product.strip() if product else None,
        **cpuinfo(read("/proc/cpuinfo") or ""),
        "numa_nodes": len(nodes) or None,
        "smt": smt(read("/sys/devices/system/cpu/smt/active")),
        "governor": governor.strip() if governor else None,
    }


def system(dmesg: Callable[[], str | None]) -> dict[str, Any]:
    """Everything that does not need PostgreSQL running."""
    mem = meminfo(read("/proc/meminfo") or "")
    model, source = preempt(dmesg)
    clock = read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    cmdline = read("/proc/cmdline")
    return {
        "uname_r": platform.release(),
        "uname_v": platform.version(),
        "machine": platform.machine(),
        "cmdline": None if cmdline is None else cmdline.strip(),
        "preempt": model,
        "preempt_source": source,
        "hugepages_total": mem.get("HugePages_Total"),
        "hugepages_free": mem.get("HugePages_Free"),
        "hugepage_size_kb": mem.get("Hugepagesize"),
        "thp": bracketed(read("/sys/kernel/mm/transparent_hugepage/enabled")),
        "nproc": nproc(),
        "mem_total_kb": mem.get("MemTotal"),
        "clocksource": None if clock is None else clock.strip(),
        "pg_version": None,
        "pg_server": None,
        "pg_binary_sha256": None,
        "pg_settings": {},
        "huge_pages_used": None,
        **hardware(),
    }


def cpu_times(text: str | None) -> tuple[int, int, int] | None:
    """(busy, total, steal) in clock ticks from the `cpu ` line of /proc/stat."""
    for line in (text or "").splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:9]]
            if len(v) < 8:
                return None
            user, nice, system_, idle, iowait, irq, softirq, steal = v
            busy = user + nice + system_ + irq + softirq
            return busy, busy + idle + iowait + steal, steal
    return None


def cpu_during(
    before: tuple[int, int, int] | None, after: tuple[int, int, int] | None, seconds: float,
    load: str | None,
) -> dict[str, Any] | None:  # fmt: skip
    """The CPUs of this kernel's machine during the measured runs: how busy they were and
    how much of them the hypervisor gave to others (steal time: a cloud VM or a guest on
    a busy host). Shares are of all CPUs; None when /proc/stat could not be read."""
    if before is None or after is None:
        return None
    total = after[1] - before[1]
    return {
        "seconds": round(seconds, 1),
        "busy_share": round((after[0] - before[0]) / total, 3) if total > 0 else 0.0,
        "steal_share": round((after[2] - before[2]) / total, 3) if total > 0 else 0.0,
        "loadavg": [float(x) for x in (load or "").split()[:3]] or None,
    }


def pg_settings(text: str) -> dict[str, str]:
    """psql's `name=value` lines -> {name: value}."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {name.strip(): value.strip() for name, value in pairs}
