"""ccache statistics, to report a build's hit rate."""

from __future__ import annotations

import shutil

from kbisect.core import proc

KEYS = ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss")


def stats() -> dict[str, int]:
    """Current counters from `ccache --print-stats` (empty without ccache)."""
    if shutil.which("ccache") is None:
        return {}
    out = proc.capture(["ccache", "--print-stats"], check=False)
    counters: dict[str, int] = {}
    for line in out.splitlines():
        key, _, value = line.partition("\t")
        if key in KEYS and value.strip().isdigit():
            counters[key] = int(value)
    return counters


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Hits, misses and hit rate between two snapshots."""
    hits = sum(after.get(k, 0) - before.get(k, 0) for k in KEYS[:2])
    misses = after.get("cache_miss", 0) - before.get("cache_miss", 0)
    total = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / total, 3) if total else 0.0}
