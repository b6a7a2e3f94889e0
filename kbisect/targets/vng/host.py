"""The machine a vng guest really runs on: this host. Under TCG (and under KVM too) the
guest's own CPU model says nothing of it ("QEMU TCG CPU"), yet the host's CPU, its
kernel and the QEMU that emulates the guest set the tps: the same kernel and scenario
measured 1053 tps on one development host and 198 on another. Every vng sample records
these facts (`target.vm_host`) so that samples of two hosts are never taken for one machine
(the results database's machine hash, `kbisect history`, reports)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from kbisect.core import proc


def _field(text: str, key: str) -> str | None:
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key and value.strip():
            return value.strip()
    return None


def cpu_model(cpuinfo: str) -> str | None:
    """The first CPU's model from /proc/cpuinfo text (arm64: its implementer and part)."""
    if model := _field(cpuinfo, "model name") or _field(cpuinfo, "Hardware"):
        return model
    implementer, part = _field(cpuinfo, "CPU implementer"), _field(cpuinfo, "CPU part")
    return f"implementer {implementer} part {part}" if implementer else None


def memory_mb(meminfo: str) -> int | None:
    total = _field(meminfo, "MemTotal")
    return int(total.split()[0]) // 1024 if total and total.split()[0].isdigit() else None


def read(path: str) -> str:
    """A /proc file's text; "" when it cannot be read."""
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


@functools.cache
def qemu_version(qemu: str) -> str | None:
    """`qemu-system-* --version`'s first line (None when it cannot say)."""
    return proc.first_line([qemu, "--version"]) or None


@functools.cache
def facts(qemu: str) -> dict[str, Any]:
    """This host as a sample records it: CPU model, CPUs, memory, kernel, QEMU."""
    return {
        "cpu_model": cpu_model(read("/proc/cpuinfo")),
        "cpus": os.cpu_count(),
        "memory_mb": memory_mb(read("/proc/meminfo")),
        "kernel": os.uname().release,
        "qemu": qemu_version(qemu),
    }
