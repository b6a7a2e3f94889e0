"""A scenario's [profile]: perf in the guest during one extra pgbench run of the first
`boots_per_side` boots of each side (docs/profiles.md). Off by default; what it adds to a
boot when on: perf in the guest's root (PACKAGES) and the kernel's perf fragment
(FRAGMENTS). The guest side is harness/profile.py."""

from __future__ import annotations

from typing import Any

PACKAGES = ("linux-perf",)  # Debian's perf, added to a guest root only when profiling
FRAGMENTS = ("perf",)  # kernel-configs/perf.config
DEFAULTS = {
    "enabled": False,
    "boots_per_side": 1,
    "seconds": 10,
    "frequency": 499,
    "event": "cpu-clock",
    "call_graph": "fp",
}
EVENT = r"[A-Za-z][A-Za-z0-9_.:/=,-]*"  # a perf event name: cpu-clock, cycles, cpu/cycles/
CALL_GRAPHS = ("fp", "dwarf")
MARGIN_S = 2  # the extra run's seconds at least, before and after perf's slice
SCRIPT_S = 300  # the host's allowance for perf script and the folding after the extra run


def enabled(data: dict[str, Any]) -> bool:
    return bool((data.get("profile") or {}).get("enabled"))


def packages(data: dict[str, Any]) -> tuple[str, ...]:
    """What a guest root needs besides the server for this scenario (perf, or nothing)."""
    return PACKAGES if enabled(data) else ()


def kernel_fragments(data: dict[str, Any]) -> list[str]:
    return list(FRAGMENTS) if enabled(data) else []


def extra_run_s(data: dict[str, Any]) -> int:
    """What profiling adds to a profiled boot: one run, its minute, perf script's time."""
    if not enabled(data):
        return 0
    return run_seconds(data) + 60 + SCRIPT_S


def run_seconds(data: dict[str, Any]) -> int:
    """The extra run's length: pgbench.duration_s, or longer when the slice perf records
    needs it (MARGIN_S before and after; harness/profile.py run_seconds)."""
    duration, seconds = int(data["pgbench"]["duration_s"]), int(data["profile"]["seconds"])
    return max(duration, seconds + 2 * MARGIN_S)


def hashed(view: dict[str, Any]) -> None:
    """Leave [profile] out of the hash while it is off: every scenario written before it
    existed, or with it off, keeps its hash."""
    if not enabled(view):
        view.pop("profile", None)


def with_fragments(configs: tuple[str, ...], data: dict[str, Any]) -> tuple[str, ...]:
    """A build's `--config` names plus the perf fragment a profiled scenario needs (only
    then: an unprofiled build keeps its key)."""
    return (*configs, *(f for f in kernel_fragments(data) if f not in configs))
