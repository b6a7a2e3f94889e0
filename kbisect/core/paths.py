"""Where kbisect keeps things: the cache (trees, build dirs, templates) and results."""

from __future__ import annotations

import os
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """$KBISECT_CACHE, else $XDG_CACHE_HOME/kbisect, else ~/.cache/kbisect."""
    if env := os.environ.get("KBISECT_CACHE"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kbisect"


def results_dir() -> Path:
    """$KBISECT_RESULTS, else the checkout's results/ folder."""
    if env := os.environ.get("KBISECT_RESULTS"):
        return Path(env)
    return CHECKOUT / "results"


def harness_dir() -> Path:
    return CHECKOUT / "harness"


def configs_dir() -> Path:
    return CHECKOUT / "kernel-configs"


def scenarios_dir() -> Path:
    return CHECKOUT / "harness" / "scenarios"


def machine_dir(name: str) -> Path:
    """This host's notes about a machine target: known_hosts, its known-good kernel, ssh
    sockets, its running config."""
    return cache_dir() / "machines" / name
